import type { ArgumentsCamelCase, Argv } from 'yargs';
import { UsageError } from '../core/errors.js';

/**
 * Commands as yargs command modules: each file under src/app/commands/ exports its `command`,
 * `describe`, `builder` (its options) and a `handler` that returns the exit code
 * (docs/contracts.md); src/app/main.ts only dispatches.
 */

/** Where a command writes, and what it writes to. */
export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  readonly stdoutIsTTY: boolean;
  readonly stderrIsTTY: boolean;
  /** The terminal's width, when stderr is one. */
  readonly columns?: number;
}

export type Args = ArgumentsCamelCase<Record<string, unknown>>;

export interface LakehouseCommand {
  readonly command: string;
  readonly describe: string;
  /** The usage line of its help, `$0 validate --config <file> [options]`. */
  readonly usage: string;
  // yargs' builder returns an Argv of the options it added; the handler reads them by name.
  readonly builder: (y: Argv) => Argv<any>;
  handler(argv: Args, io: Io): Promise<number>;
}

export const processIo = (): Io => ({
  stdout: (t) => void process.stdout.write(t),
  stderr: (t) => void process.stderr.write(t),
  stdoutIsTTY: process.stdout.isTTY === true,
  stderrIsTTY: process.stderr.isTTY === true,
  ...(process.stderr.columns ? { columns: process.stderr.columns } : {}),
});

/** Seconds from the command line or environment as milliseconds; the option's name in the error. */
export function seconds(value: unknown, option: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== 'string' || value.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`--${option} must be a non-negative number of seconds, got ${JSON.stringify(value)}`);
  return Math.round(n * 1000);
}

/** A string option's value, if given. */
export function str(argv: Args, name: string): string | undefined {
  const v = argv[name];
  return typeof v === 'string' ? v : undefined;
}
