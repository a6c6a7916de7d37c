import { parseArgs } from 'node:util';
import { UsageError } from '../core/errors.js';

/**
 * Commands as data: each module under src/app/commands/ exports a spec (name, options, help) and a
 * handler returning an exit code; src/app/main.ts only dispatches. Parsed with Node's own
 * `util.parseArgs`: no dependency, and nothing to load before the first line runs (a cold start is
 * what an orchestrator pays per task).
 */

export interface OptionSpec {
  readonly name: string;
  readonly type: 'string' | 'boolean';
  readonly multiple?: boolean;
  readonly describe: string;
  /** The placeholder in help, e.g. `<file>`. */
  readonly arg?: string;
  readonly default?: string;
  readonly choices?: readonly string[];
  /**
   * The environment variable read when the option is not on the command line (`LAKEHOUSE_CONFIG`, …).
   * Only these names are read.
   */
  readonly env?: string;
}

export interface CommandSpec {
  readonly name: string;
  /** The default command runs when the first argument is not a command's name. */
  readonly isDefault?: boolean;
  readonly summary: string;
  readonly usage: string;
  readonly positionals?: readonly { readonly name: string; readonly required: boolean }[];
  readonly options: readonly OptionSpec[];
}

export type Values = Record<string, string | string[] | boolean | undefined>;

export interface Invocation {
  readonly values: Values;
  readonly positionals: Readonly<Record<string, string | undefined>>;
}

export interface Command {
  readonly spec: CommandSpec;
  run(inv: Invocation, env: Record<string, string | undefined>): Promise<number>;
}

/** Parse one command's arguments; environment variables fill what the command line left out. */
export function parseInvocation(spec: CommandSpec, args: readonly string[], env: Record<string, string | undefined>): Invocation {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const o of spec.options) options[o.name] = { type: o.type, ...(o.multiple ? { multiple: true } : {}) };
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (e) {
    // parseArgs' own messages name the option; they are usage errors (64) like ours.
    throw new UsageError(`${spec.name}: ${e instanceof Error ? e.message.replace(/\. To specify a positional argument.*$/s, '') : String(e)}`);
  }
  const values: Values = {};
  for (const o of spec.options) {
    let v = parsed.values[o.name] as string | string[] | boolean | undefined;
    if (v === undefined && o.env) {
      const fromEnv = env[o.env];
      if (fromEnv !== undefined && fromEnv !== '') v = o.type === 'boolean' ? fromEnv === 'true' || fromEnv === '1' : fromEnv;
    }
    if (v === undefined && o.default !== undefined) v = o.default;
    if (typeof v === 'string' && o.choices && !o.choices.includes(v))
      throw new UsageError(`--${o.name} must be one of ${o.choices.join(', ')}, got ${JSON.stringify(v)}`);
    values[o.name] = v;
  }
  const declared = spec.positionals ?? [];
  if (parsed.positionals.length > declared.length)
    throw new UsageError(`${spec.name}: unexpected argument ${JSON.stringify(parsed.positionals[declared.length])}`);
  const positionals: Record<string, string | undefined> = {};
  declared.forEach((p, i) => {
    const v = parsed.positionals[i];
    if (v === undefined && p.required) throw new UsageError(`${spec.name}: <${p.name}> is required`);
    positionals[p.name] = v;
  });
  return { values, positionals };
}

/** Seconds from the command line or environment as milliseconds; the option's name in the error. */
export function seconds(value: unknown, option: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== 'string' || value.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`--${option} must be a non-negative number of seconds, got ${JSON.stringify(value)}`);
  return Math.round(n * 1000);
}

export function commandHelp(spec: CommandSpec): string {
  const rows = spec.options.map((o) => {
    const left = `--${o.name}${o.type === 'string' ? ` ${o.arg ?? '<value>'}` : ''}`;
    const extra = [
      o.multiple ? 'repeatable' : '',
      o.choices ? `one of ${o.choices.join(', ')}` : '',
      o.default !== undefined ? `default ${o.default}` : '',
      o.env ? `env ${o.env}` : '',
    ].filter(Boolean);
    return [left, `${o.describe}${extra.length ? ` (${extra.join('; ')})` : ''}`] as const;
  });
  const width = Math.max(0, ...rows.map(([l]) => l.length));
  const lines = [`Usage: ${spec.usage}`, '', spec.summary];
  if (rows.length) lines.push('', 'Options:', ...rows.map(([l, r]) => `  ${l.padEnd(width)}  ${r}`));
  lines.push(`  ${'--help'.padEnd(width)}  show this help`);
  return lines.join('\n') + '\n';
}

export function programHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.spec.name.length));
  return (
    [
      'Usage: lakehouse-jobs [command] [options]',
      '',
      'Commands:',
      ...commands.map((c) => `  ${c.spec.name.padEnd(width)}  ${c.spec.summary}${c.spec.isDefault ? ' (the default command)' : ''}`),
      '',
      "lakehouse-jobs <command> --help shows a command's options; --version prints the version.",
    ].join('\n') + '\n'
  );
}
