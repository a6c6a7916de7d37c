/**
 * One error hierarchy for the whole runner. Spark's own failures (transient 75, permission 77, …) are
 * `SparkError`s, classified in src/spark/errors.ts. Every failure that reaches the CLI is a LakehouseError
 * (or becomes an InternalError), and its `exitCode` is the contract in docs/contracts.md.
 */

/**
 * The prefix of the message a template's own data check raises with `raise_error` (exit 65, the
 * message after it). Here, not in src/spark/errors.ts: templates build it without loading gRPC.
 */
export const BAD_VALUE_MARKER = 'LAKEHOUSE_BAD_VALUE:';

export const ExitCode = {
  succeeded: 0,
  usage: 64,
  data: 65,
  inputMissing: 66,
  unavailable: 69,
  internal: 70,
  transient: 75,
  permission: 77,
  config: 78,
  skipped: 99,
  sigint: 130,
  sigterm: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export type ErrorCategory = 'usage' | 'config' | 'data' | 'input' | 'unavailable' | 'transient' | 'permission' | 'cancelled' | 'spark' | 'internal';

/** One problem in a config, with the path of the offending key (`cdc.primary-key`, `source`). */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** An issue with where in the config files its value (or, for a missing key, its object) was written: `file:line:col`. */
export interface LocatedIssue extends ConfigIssue {
  at?: string;
}

export interface ErrorReport {
  code: string;
  category: ErrorCategory;
  message: string;
  path?: string;
  retryable: boolean;
  issues?: ConfigIssue[];
  sparkErrorClass?: string;
  sqlState?: string;
  /** How to fix it, when we know. */
  hint?: string;
}

export abstract class LakehouseError extends Error {
  abstract readonly exitCode: ExitCode;
  abstract readonly category: ErrorCategory;
  abstract readonly code: string;
  readonly retryable: boolean = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  report(): ErrorReport {
    return { code: this.code, category: this.category, message: this.message, retryable: this.retryable };
  }
}

/** Bad command line or unknown template (64). */
export class UsageError extends LakehouseError {
  readonly exitCode = ExitCode.usage;
  readonly category = 'usage' as const;
  readonly code = 'USAGE';
}

/** Config invalid: HOCON syntax, schema, schema-version, tenant policy (78). Carries every issue. */
export class ConfigError extends LakehouseError {
  readonly exitCode = ExitCode.config;
  readonly category = 'config' as const;
  /** `CONFIG_INVALID`, or a narrower code orchestrators can tell apart (`TABLE_LOCATION_TAKEN`). */
  readonly code: string;
  readonly issues: readonly ConfigIssue[];
  /** Per issue (same index), where it was written when known; for people (`validate`, logs), not the status. */
  readonly locations: readonly (string | undefined)[];

  constructor(issues: LocatedIssue[] | string, options?: { cause?: unknown; path?: string; code?: string }) {
    const list: LocatedIssue[] = typeof issues === 'string' ? [{ path: options?.path ?? '', message: issues }] : issues;
    super(list.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; '), options);
    this.code = options?.code ?? 'CONFIG_INVALID';
    this.issues = list.map(({ path, message }) => ({ path, message }));
    this.locations = list.map((i) => i.at);
  }

  override report(): ErrorReport {
    const first = this.issues[0];
    return { ...super.report(), ...(first?.path ? { path: first.path } : {}), issues: [...this.issues] };
  }
}

/** A config file, include or source table that does not exist (66). */
export class InputMissingError extends LakehouseError {
  readonly exitCode = ExitCode.inputMissing;
  readonly category = 'input' as const;
  readonly code = 'INPUT_MISSING';
}

/** Quality gate, data contract or bad source data (65). */
export class DataError extends LakehouseError {
  readonly exitCode = ExitCode.data;
  readonly category = 'data' as const;
  readonly code: string;
  /** How to fix the data, when we know. */
  readonly hint: string | undefined;
  /** The config path of the input the bad data came from (`source.table`), when one does. */
  readonly path: string | undefined;
  constructor(message: string, options?: { cause?: unknown; code?: string; hint?: string; path?: string }) {
    super(message, options);
    this.code = options?.code ?? 'DATA_INVALID';
    this.hint = options?.hint;
    this.path = options?.path;
  }

  override report(): ErrorReport {
    return { ...super.report(), ...(this.path ? { path: this.path } : {}), ...(this.hint ? { hint: this.hint } : {}) };
  }
}

/** A race another run won, detected by the runner: the orchestrator's retry finds the winner's work (75). */
export class TransientError extends LakehouseError {
  readonly exitCode = ExitCode.transient;
  readonly category = 'transient' as const;
  readonly code: string;
  override readonly retryable = true;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(message, options);
    this.code = options?.code ?? 'TRANSIENT';
  }
}

/** Spark Connect (or a source) unreachable after backoff (69). */
export class UnavailableError extends LakehouseError {
  readonly exitCode = ExitCode.unavailable;
  readonly category = 'unavailable' as const;
  readonly code: string;
  override readonly retryable = true;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(message, options);
    this.code = options?.code ?? 'SPARK_UNAVAILABLE';
  }
}

/** Cancelled by a signal (130 for SIGINT, 143 for SIGTERM). */
export class CancelledError extends LakehouseError {
  readonly exitCode: ExitCode;
  readonly category = 'cancelled' as const;
  readonly code = 'CANCELLED';
  override readonly retryable = true;
  constructor(
    readonly signal: 'SIGINT' | 'SIGTERM',
    options?: { cause?: unknown },
  ) {
    super(`cancelled by ${signal}`, options);
    this.exitCode = signal === 'SIGINT' ? ExitCode.sigint : ExitCode.sigterm;
  }
}

/** A bug in the runner (70). */
export class InternalError extends LakehouseError {
  readonly exitCode = ExitCode.internal;
  readonly category = 'internal' as const;
  readonly code = 'INTERNAL';
}

/**
 * How the CLI ends for an error that escaped a command. Only a usage problem (ours, or yargs'
 * `YError` for a malformed command line) is 64; a LakehouseError keeps its code; anything else
 * (a TypeError, a bug) is internal, 70, and its stack goes to the log so it can be fixed.
 */
export function cliFailure(e: unknown): { exitCode: number; message: string; usage: boolean; stack?: string } {
  if (e instanceof UsageError || (e instanceof Error && e.name === 'YError')) return { exitCode: ExitCode.usage, message: e.message, usage: true };
  if (e instanceof LakehouseError) return { exitCode: e.exitCode, message: e.message, usage: false };
  const error = asLakehouseError(e);
  return { exitCode: error.exitCode, message: `internal error: ${error.message}`, usage: false, ...(e instanceof Error && e.stack ? { stack: e.stack } : {}) };
}

/** Anything thrown at all, as a LakehouseError: unknown throwables are internal errors. */
export function asLakehouseError(e: unknown): LakehouseError {
  if (e instanceof LakehouseError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new InternalError(message, { cause: e });
}
