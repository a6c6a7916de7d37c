import { describe, expect, it } from 'vitest';
import { createLogger, LOG_LEVELS, type Logger } from '../../../src/core/logger.js';
import { registerConnectionSecrets, registerSecretValue } from '../../../src/core/secrets.js';

/** The logger is pino: these pin the lines the runner relies on (orchestrators and tests parse them). */
function lines(level: string, bindings: Record<string, unknown>, calls: (log: Logger) => void): Record<string, any>[] {
  const out: string[] = [];
  calls(createLogger(level, bindings, (l) => out.push(l)));
  for (const l of out) expect(l.endsWith('\n')).toBe(true);
  return out.map((l) => JSON.parse(l));
}

describe('the JSON-lines logger (pino)', () => {
  it('writes one JSON line per call: level label, ISO time, bindings, fields, msg', () => {
    const [line, alone] = lines('info', { runId: 'run-1', command: 'validate' }, (log) => {
      log.info({ template: 'cdc-silver-merge', steps: 13 }, 'config valid');
      log.info('a message alone');
      log.debug({ x: 1 }, 'below the level: not written');
    });
    expect(Object.keys(line!)).toEqual(['level', 'time', 'app', 'runId', 'command', 'template', 'steps', 'msg']);
    expect(line).toMatchObject({
      level: 'info',
      app: 'lakehouse-jobs',
      runId: 'run-1',
      command: 'validate',
      template: 'cdc-silver-merge',
      msg: 'config valid',
    });
    expect(line!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(alone).toMatchObject({ level: 'info', msg: 'a message alone' });
  });

  it('redacts credentials by path: at the top level and one object below, in fields, bindings and children', () => {
    const out = lines('info', { token: 'bound-token', conn: { password: 'bound-pw', user: 'u' } }, (log) => {
      log.info({ password: 'p', authorization: 'Bearer a', nested: { token: 't2', deeper: { password: 'two levels down' } } }, 'creds');
      log.child({ component: 'spark', token: 'child-token' }).info({ x: 1 }, 'child');
    });
    const text = JSON.stringify(out);
    expect(text).not.toMatch(/bound-token|bound-pw|child-token|"p"|"t2"|Bearer/);
    expect(out[0]).toMatchObject({ token: '[redacted]', conn: { password: '[redacted]', user: 'u' }, password: '[redacted]', nested: { token: '[redacted]' } });
    // Two objects below is no longer a credential's place (the paths say where they are).
    expect(out[0]!.nested.deeper.password).toBe('two levels down');
    expect(out[1]).toMatchObject({ component: 'spark', x: 1, msg: 'child' });
  });

  it("serializes errors under err with pino's standard serializer: type, message and stack with causes, own fields", () => {
    class ExitError extends Error {
      readonly exitCode = 70;
    }
    const err = Object.assign(new Error('outer', { cause: new Error('inner cause') }), { code: 'X', token: 'err-token' });
    const [withCause, subclass, first] = lines('info', {}, (log) => {
      log.warn({ step: 'merge', err }, 'streaming query failed');
      log.error({ err: new ExitError('subclass') }, 'subclass');
      log.error(new Error('an error as the first argument'));
    });
    expect(withCause!.err).toMatchObject({ type: 'Error', message: 'outer: inner cause', code: 'X', token: '[redacted]' });
    expect(withCause!.err.stack).toMatch(/^Error: outer\n\s+at [^]*caused by: Error: inner cause/);
    expect(subclass!.err).toMatchObject({ type: 'ExitError', message: 'subclass', exitCode: 70 });
    expect(first).toMatchObject({ level: 'error', msg: 'an error as the first argument', err: { type: 'Error' } });
  });

  it('scrubs registered secret values from every line: message, fields, bindings, error text', () => {
    registerSecretValue('s3cr3t-value-for-logger-test');
    registerConnectionSecrets('sc://h:1/;token=tok-logger-77aa');
    const out: string[] = [];
    const log = createLogger('info', { remote: 'sc://h/;token=s3cr3t-value-for-logger-test' }, (l) => out.push(l));
    log.info({ detail: 'x s3cr3t-value-for-logger-test y', list: ['tok-logger-77aa'] }, 'msg s3cr3t-value-for-logger-test');
    log.error({ err: new Error('server said "tok-logger-77aa"') }, 'failed');
    log.child({ where: 'tok-logger-77aa' }).warn('child');
    expect(out).toHaveLength(3);
    expect(out.join('')).not.toMatch(/s3cr3t-value-for-logger-test|tok-logger-77aa/);
    expect(JSON.parse(out[0]!)).toMatchObject({ detail: 'x [redacted] y', msg: 'msg [redacted]' });
    expect(JSON.parse(out[1]!).err.message).toBe('server said "[redacted]"');
  });

  it('gates by level as pino does; silent writes nothing; an unknown level is refused', () => {
    for (const level of LOG_LEVELS) {
      const log = createLogger(level, {}, () => {});
      expect(log.level).toBe(level);
      expect(log.isLevelEnabled('warn'), level).toBe(['trace', 'debug', 'info', 'warn'].includes(level));
    }
    expect(lines('silent', {}, (log) => log.fatal({ x: 1 }, 'nothing'))).toEqual([]);
    expect(lines('warn', {}, (log) => (log.info('no'), log.warn('yes'), log.child({ a: 1 }).error('child')))).toHaveLength(2);
    expect(() => createLogger('verbose')).toThrow(/unknown log level "verbose"/);
  });

  it('writes what JSON cannot hold: a bigint as a number, a cycle as [Circular]', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const out: string[] = [];
    createLogger('info', {}, (l) => out.push(l)).info({ big: 12345678901234567890n, cyclic }, 'odd values');
    expect(out[0]).toContain('"big":12345678901234567890');
    expect(out[0]).toContain('"[Circular]"');
  });
});
