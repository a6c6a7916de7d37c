import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/core/errors.js';
import { type CommandSpec, commandHelp, parseInvocation, seconds } from '../../../src/app/command.js';
import { COMMANDS, main } from '../../../src/app/main.js';

const spec: CommandSpec = {
  name: 'demo',
  summary: 'a demo',
  usage: 'lakehouse-jobs demo <thing>',
  positionals: [{ name: 'thing', required: true }],
  options: [
    { name: 'config', type: 'string', env: 'LAKEHOUSE_CONFIG', describe: 'the config' },
    { name: 'set', type: 'string', multiple: true, describe: 'overrides' },
    { name: 'level', type: 'string', default: 'info', choices: ['info', 'debug'], describe: 'level' },
    { name: 'explain', type: 'boolean', describe: 'explain' },
  ],
};

describe('command specs parsed with util.parseArgs', () => {
  it('reads options, repeated options, defaults and the environment; the command line wins', () => {
    const inv = parseInvocation(spec, ['x', '--set', 'a=1', '--set=b=2', '--explain'], { LAKEHOUSE_CONFIG: 'from-env.conf' });
    expect(inv.values).toEqual({ config: 'from-env.conf', set: ['a=1', 'b=2'], level: 'info', explain: true });
    expect(inv.positionals).toEqual({ thing: 'x' });
    expect(parseInvocation(spec, ['x', '--config', 'given.conf'], { LAKEHOUSE_CONFIG: 'from-env.conf' }).values.config).toBe('given.conf');
    // An empty variable is no value.
    expect(parseInvocation(spec, ['x'], { LAKEHOUSE_CONFIG: '' }).values.config).toBeUndefined();
  });

  it('refuses unknown options, bad choices, missing and extra positionals as usage errors (64)', () => {
    for (const args of [['x', '--nope'], ['x', '--level', 'loud'], [], ['x', 'y'], ['x', '--config']]) {
      const e = (() => {
        try {
          parseInvocation(spec, args, {});
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(e, args.join(' ')).toBeInstanceOf(UsageError);
      expect((e as UsageError).exitCode).toBe(64);
    }
  });

  it('checks seconds', () => {
    expect(seconds('1.5', 'timeout')).toBe(1500);
    expect(seconds(undefined, 'timeout')).toBeUndefined();
    expect(() => seconds('-1', 'timeout')).toThrow('--timeout must be a non-negative number of seconds, got "-1"');
    expect(() => seconds(' ', 'timeout')).toThrow(UsageError);
  });

  it('documents every option of every command in its help', () => {
    for (const c of COMMANDS) {
      const help = commandHelp(c.spec);
      for (const o of c.spec.options) expect(help, c.spec.name).toContain(`--${o.name}`);
    }
  });

  it('dispatches: help, version, the default command, an unknown command', async () => {
    const io = () => {
      const out = { stdout: '', stderr: '' };
      return { out, io: { stdout: (t: string) => void (out.stdout += t), stderr: (t: string) => void (out.stderr += t) } };
    };
    const a = io();
    expect(await main(['validate', '--help'], {}, a.io)).toBe(0);
    expect(a.out.stdout).toContain('Usage: lakehouse-jobs validate');
    const b = io();
    expect(await main(['--bogus'], {}, b.io)).toBe(64);
    expect(b.out.stderr).toContain('Try lakehouse-jobs --help.');
    const c = io();
    expect(await main(['plna'], {}, c.io)).toBe(64);
    expect(c.out.stderr).toContain('unknown command "plna"; did you mean "plan"?');
    const d = io();
    expect(await main([], {}, d.io)).toBe(64);
    expect(d.out.stderr).toContain('--config <file> is required');
  });
});
