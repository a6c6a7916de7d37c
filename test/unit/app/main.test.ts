import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { seconds, type Io } from '../../../src/app/command.js';
import { COMMANDS, main, withDefaultCommand } from '../../../src/app/main.js';
import { repoRoot } from '../../support/stack.js';

/** The command line in process (yargs parses, the command runs), its output captured. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  const out = { stdout: '', stderr: '' };
  const io: Io = { stdout: (t) => void (out.stdout += t), stderr: (t) => void (out.stderr += t), stdoutIsTTY: false, stderrIsTTY: false };
  const code = await main(args, io);
  return { code, ...out };
}

const example = join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf');
const platform = join(repoRoot, 'configs/examples/platform-local.conf');
const lake = { LAKEHOUSE_LAKE_HOME: '/srv/lake' };

afterEach(() => vi.unstubAllEnvs());

describe('the command line (yargs command modules)', () => {
  it('has one module per command, each with its describe and builder', () => {
    expect(COMMANDS.map((c) => c.command.split(' ')[0])).toEqual(['run', 'diff', 'validate', 'plan', 'history', 'rollback', 'ping', 'templates', 'schema']);
    for (const c of COMMANDS) expect(c.describe.length, c.command).toBeGreaterThan(10);
  });

  it('runs a job when the command line starts with an option (the default command)', () => {
    expect(withDefaultCommand(['--config', 'x.conf'])).toEqual(['run', '--config', 'x.conf']);
    expect(withDefaultCommand([])).toEqual(['run']);
    expect(withDefaultCommand(['validate', '--config', 'x'])).toEqual(['validate', '--config', 'x']);
    for (const flag of ['--help', '-h', '--version', '--get-yargs-completions']) expect(withDefaultCommand([flag])).toEqual([flag]);
  });

  it('reads options, repeated --set and the LAKEHOUSE_* variables; the command line wins; an empty variable is no value', async () => {
    const r = await cli(['validate', '--log-level', 'silent', '--set', 'a=1', '--set=b=2'], { ...lake, LAKEHOUSE_CONFIG: example, LAKEHOUSE_ENV: platform });
    expect(r.code).toBe(78);
    // Both overrides reached the loader: each is reported as an unknown key at its --set.
    expect(JSON.parse(r.stdout).error.issues.map((i: { path: string }) => i.path)).toEqual(['a', 'b']);
    const given = await cli(['validate', '--config', '/nonexistent/tenant.conf', '--log-level', 'silent'], { ...lake, LAKEHOUSE_CONFIG: example });
    expect(given.code).toBe(66);
    const empty = await cli(['validate', '--config', example, '--env', platform, '--log-level', 'silent'], { ...lake, LAKEHOUSE_TENANT: '' });
    expect(empty.code, empty.stderr).toBe(0);
    const bound = await cli(['validate', '--config', example, '--env', platform, '--log-level', 'silent'], { ...lake, LAKEHOUSE_TENANT: 'Nope' });
    expect(bound.code).toBe(64);
    expect(JSON.parse(bound.stdout).error.message).toContain('--tenant "Nope" is not a tenant id');
  });

  it('ignores LAKEHOUSE_* variables that are no option of the command (yargs issue 873); the same names typed are refused', async () => {
    const env = { ...lake, LAKEHOUSE_XCOM_DIR: '/nowhere', LAKEHOUSE_FORMAT: 'json', LAKEHOUSE_TIMEOUT: '3' };
    const r = await cli(['validate', '--config', example, '--env', platform, '--log-level', 'silent'], env);
    expect(r.code, r.stderr).toBe(0);
    // LAKEHOUSE_FORMAT is plan's --format: read there.
    const plan = await cli(['plan', '--config', example, '--env', platform, '--log-level', 'silent'], env);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).steps.length).toBeGreaterThan(3);
    const typed = await cli(['validate', '--config', example, '--lake-home', '/x'], env);
    expect(typed.code).toBe(64);
    expect(typed.stderr).toContain('Unknown arguments: lake-home, lakeHome');
  });

  it('refuses an unknown option (64) and suggests the option meant', async () => {
    const r = await cli(['validate', '--confg', example]);
    expect(r.code).toBe(64);
    expect(r.stderr).toBe('lakehouse-jobs: Unknown argument: confg; did you mean --config?\nTry lakehouse-jobs validate --help.\n');
    const run = await cli(['--config', example, '--stauts-file', 's.json']);
    expect(run.code).toBe(64);
    expect(run.stderr).toContain('did you mean --status-file?');
    const far = await cli(['templates', '--zzzzzz']);
    expect(far.code).toBe(64);
    expect(far.stderr).toContain('Unknown argument: zzzzzz\n');
  });

  it('suggests the command meant for a misspelt one (64)', async () => {
    const r = await cli(['valdate', '--config', example]);
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('Did you mean validate?');
    expect((await cli(['nothing-like-it'])).code).toBe(64);
  });

  it('refuses bad choices, missing values and arguments, and extra arguments (64)', async () => {
    const cases: [string[], string][] = [
      [['plan', '--config', example, '--format', 'yaml'], 'Argument: format, Given: "yaml", Choices: "text", "json"'],
      [['validate', '--config'], 'Not enough arguments following: config'],
      [['validate', '--config', example, '--log-level', 'loud'], 'Argument: log-level, Given: "loud"'],
      [['validate', '--config', example, '--log-format', 'xml'], 'Argument: log-format, Given: "xml"'],
      [['schema'], 'Not enough non-option arguments'],
      [['validate', '--config', example, 'extra'], 'Unknown argument: extra'],
      [['validate'], '--config <file> is required'],
      [['ping', '--timeout', 'soon'], '--timeout must be a non-negative number of seconds, got "soon"'],
    ];
    for (const [args, message] of cases) {
      const r = await cli(args, lake);
      expect(r.code, args.join(' ')).toBe(64);
      expect(r.stderr, args.join(' ')).toContain(message);
      expect(r.stdout, args.join(' ')).toBe('');
    }
  });

  it("shows yargs' help: the commands, and each command's options with the variables", async () => {
    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    for (const c of COMMANDS) expect(top.stdout).toContain(`lakehouse-jobs ${c.command}`);
    expect(top.stdout).toContain('completion');
    for (const c of COMMANDS) {
      const name = c.command.split(' ')[0]!;
      const help = await cli([name, '--help']);
      expect(help.code, name).toBe(0);
      expect(help.stdout, name).toMatch(new RegExp(`^lakehouse-jobs (\\[run\\]|${name})`));
      expect(help.stderr).toBe('');
    }
    const plan = (await cli(['plan', '--help'])).stdout;
    for (const o of ['--job', '--config', '--env', '--tenant', '--remote', '--set', '--run-id', '--logical-date', '--status-file', '--termination-log'])
      expect(plan).toContain(o);
    for (const o of ['--retry-budget', '--log-level', '--log-format', '--format', '--explain']) expect(plan).toContain(o);
    expect(plan).toContain('LAKEHOUSE_<OPTION>');
    expect((await cli(['-h'])).stdout).toBe(top.stdout);
    expect((await cli(['--version'])).stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it("documents every command's options in the README's option table, with their variables", async () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    for (const c of COMMANDS) {
      const help = (await cli([c.command.split(' ')[0]!, '--help'])).stdout;
      for (const [, option] of help.matchAll(/^\s+(?:-\w, )?--([a-z-]+)/gm)) {
        if (['help', 'version', 'schema-version'].includes(option!)) continue;
        const row = readme.split('\n').find((l) => l.startsWith('|') && l.includes(`\`--${option}`));
        expect(row, `--${option} of ${c.command}`).toBeDefined();
        expect(row, `--${option}`).toContain(`LAKEHOUSE_${option!.toUpperCase().replace(/-/g, '_')}`);
      }
    }
  });

  it('prints a completion script, and completes commands and options', async () => {
    const script = await cli(['completion']);
    expect(script.code).toBe(0);
    expect(script.stdout).toContain('_lakehouse-jobs_yargs_completions');
    expect(script.stdout).toContain('lakehouse-jobs --get-yargs-completions');
    const commands = (await cli(['--get-yargs-completions', 'lakehouse-jobs', ''])).stdout.split('\n');
    expect(commands).toEqual(expect.arrayContaining(['run', 'validate', 'plan', 'ping', 'templates', 'schema']));
    const options = (await cli(['--get-yargs-completions', 'lakehouse-jobs', 'plan', '--'])).stdout.split('\n');
    expect(options).toEqual(expect.arrayContaining(['--config', '--format', '--explain', '--log-format']));
  });

  it('checks seconds', () => {
    expect(seconds('1.5', 'timeout')).toBe(1500);
    expect(seconds(undefined, 'timeout')).toBeUndefined();
    expect(() => seconds('-1', 'timeout')).toThrow('--timeout must be a non-negative number of seconds, got "-1"');
    expect(() => seconds(' ', 'timeout')).toThrow('--timeout must be');
  });
});
