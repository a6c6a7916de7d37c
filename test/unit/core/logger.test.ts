import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/core/logger.js';
import { registerSecretValue } from '../../../src/core/secrets.js';

/**
 * src/core/logger.ts writes pino's lines without pino (cold start, issue 13). The reference here is
 * pino configured as the runner configured it before: every line must be the same, byte for byte,
 * apart from the clock.
 */
function reference(level: string, bindings: Record<string, unknown>, write: (line: string) => void): Logger {
  return pino(
    {
      level,
      base: { app: 'lakehouse-jobs', ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ['password', 'token', '*.password', '*.token', 'authorization', '*.authorization'], censor: '[redacted]' },
    },
    { write },
  );
}

const TIME = /"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"/g;

/** The same calls against both loggers: their lines, with the time made equal. */
function both(level: string, bindings: Record<string, unknown>, calls: (log: Logger) => void): [string[], string[]] {
  const ours: string[] = [];
  const theirs: string[] = [];
  calls(createLogger(level, bindings, (l) => ours.push(l)));
  calls(reference(level, bindings, (l) => theirs.push(l)));
  const norm = (lines: string[]) => lines.map((l) => l.replace(TIME, '"time":"T"'));
  return [norm(ours), norm(theirs)];
}

class ExitError extends Error {
  readonly exitCode = 70;
  readonly code = 'INTERNAL';
}

describe('the JSON-lines logger', () => {
  it('writes the lines pino wrote: level label, time, bindings, fields in order, msg', () => {
    const [ours, theirs] = both('debug', { runId: 'run-1', command: 'validate' }, (log) => {
      log.info({ template: 'cdc-silver-merge', schemaVersion: 1, tenant: 'acme', steps: 13 }, 'config valid');
      log.info({ status: 'succeeded', exitCode: 0, durationMs: 317 }, 'finished: succeeded');
      log.warn({ event: 'spark.retry', rpc: 'ExecutePlan', retry: 1, delayMs: 250, grpcCode: undefined }, 'retrying ExecutePlan');
      log.error(
        { error: { type: 'ConfigError', code: 'CONFIG_INVALID', exitCode: 78 } },
        'config error: a "quoted"\nline\twith \u0001 control and \ud800 lone surrogate',
      );
      log.debug({ n: NaN, inf: -Infinity, t: true, nul: null, arr: [1, 'a', { b: 2 }], d: new Date(0), f: () => 1, big: 10n }, 'types');
      log.info('a message alone');
      log.info({ only: 'fields' });
      log.info({ level: 'dup', time: 1, msg: 'dup', app: 'dup' }, 'keys pino writes twice');
      log.trace({ x: 1 }, 'below the level: not written');
    });
    expect(ours).toEqual(theirs);
    expect(ours).toHaveLength(8);
  });

  it('redacts credentials’ keys at the top level and one object below, in fields and bindings', () => {
    const [ours, theirs] = both('info', { token: 'bound-token', conn: { password: 'bound-pw', user: 'u' } }, (log) => {
      log.info({ password: 'p', token: 't', authorization: 'Bearer a', nested: { token: 't2', deeper: { password: 'kept: two levels down' } } }, 'creds');
      log.info({ o: { authorization: undefined }, authorization: undefined, list: [{ password: 'arrays are not objects here' }] }, 'edges');
      log.child({ component: 'spark', token: 'child-token' }).info({ x: 1 }, 'child');
    });
    expect(ours).toEqual(theirs);
    expect(ours.join('')).not.toMatch(/bound-token|bound-pw|child-token|"p"|"t2"|Bearer/);
  });

  it('serializes errors under err as pino did: type, message and stack with causes, own fields, nested errors', () => {
    const cause = new Error('inner cause');
    const err = Object.assign(new Error('outer', { cause }), { code: 'X', token: 'err-token', inner: new Error('nested') });
    // Made once: both loggers must see the very same errors (their stacks name where they were made).
    const subclass = new ExitError('subclass');
    const aggregate = new AggregateError([new Error('a1'), 'not an error'], 'aggregate');
    const first = new Error('an error as the first argument');
    const own = new Error('with its own message');
    const other = new Error('an error under another key is {}');
    const [ours, theirs] = both('info', {}, (log) => {
      log.warn({ step: 'merge', err }, 'streaming query failed');
      log.error({ err: subclass }, 'subclass');
      log.error({ err: aggregate }, 'aggregate');
      log.error({ err: 'a string is left alone' }, 'string');
      log.error({ e: other }, 'other key');
      log.error(first);
      log.error(own, 'and a message');
    });
    expect(ours).toEqual(theirs);
  });

  it('children add bindings after their parent’s; levels and isLevelEnabled as pino', () => {
    const [ours, theirs] = both('warn', { runId: 'r' }, (log) => {
      const child = log.child({ component: 'spark', sessionId: 's' }).child({ more: 2, level: 'not a field' });
      child.warn({ event: 'e' }, 'grandchild');
      child.info({ event: 'e' }, 'not written');
      child.fatal({}, 'fatal');
    });
    expect(ours).toEqual(theirs);
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']) {
      const ourLog = createLogger(level, {}, () => {});
      const pinoLog = reference(level, {}, () => {});
      expect(ourLog.level).toBe(pinoLog.level);
      for (const asked of ['trace', 'debug', 'info', 'warn', 'error', 'fatal'])
        expect(ourLog.isLevelEnabled(asked), `${level}/${asked}`).toBe(pinoLog.isLevelEnabled(asked));
    }
  });

  it('silent writes nothing; an unknown level is refused', () => {
    const lines: string[] = [];
    const log = createLogger('silent', {}, (l) => lines.push(l));
    log.fatal({ x: 1 }, 'nothing');
    log.child({ a: 1 }).error('nothing either');
    expect(lines).toEqual([]);
    expect(() => createLogger('verbose')).toThrow(/unknown log level "verbose"/);
  });

  it('scrubs registered secrets from every line, wherever they appear', () => {
    registerSecretValue('s3cr3t-value-for-logger-test');
    const lines: string[] = [];
    createLogger('info', { remote: 'sc://h/;token=s3cr3t-value-for-logger-test' }, (l) => lines.push(l)).info(
      { detail: 'x s3cr3t-value-for-logger-test y' },
      'msg s3cr3t-value-for-logger-test',
    );
    expect(lines.join('')).not.toContain('s3cr3t-value-for-logger-test');
    expect(lines).toHaveLength(1);
  });

  it('values JSON cannot write: bigint as a number, a cycle as [Circular]', () => {
    const lines: string[] = [];
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    createLogger('info', {}, (l) => lines.push(l)).info({ big: 12345678901234567890n, cyclic }, 'odd values');
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(lines[0]).toContain('"big":12345678901234567890');
    expect(line.cyclic).toEqual({ a: 1, self: '[Circular]' });
  });
});
