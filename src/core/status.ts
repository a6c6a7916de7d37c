import { existsSync, mkdirSync, renameSync, statSync, writeFileSync, accessSync, constants } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ErrorReport } from './errors.js';
import { scrub } from './secrets.js';

/**
 * The status document (`lakehouse-jobs/status/v1`, docs/contracts.md): one per run, on every outcome.
 * The one status writer sends it to stdout, `--status-file`, Airflow's XCom file and the
 * Kubernetes termination message.
 */

/** A table a run wrote (or would write): what the status document lists under `outputs`. */
export interface OutputReport {
  /** The table written, `catalog.namespace.table`; absent for files at a path (parquet bronze). */
  table?: string;
  /** Files written at a path (no table): the path. */
  path?: string;
  format: string;
  location?: string;
  snapshotId?: string;
  /** Whether this run committed to the table; false when every event was already applied. */
  committed?: boolean;
  metrics?: Record<string, number>;
  /** The data quality expectations checked before the write (gold-publish), each with its counts. */
  expectations?: ExpectationReport[];
  /** What an incremental read (`source.read = incremental`) read of its source and records with this write. */
  read?: ReadPosition;
  /** reconcile: the source compared with and the days that differ (the first 10). */
  reconcile?: ReconcileReport;
}

/** What reconcile found: the days the table and its source disagree on (docs/templates/reconcile.md). */
export interface ReconcileReport {
  /** The source, without credentials: the platform connection's name (or the url's host) and its table. */
  source: string;
  dateColumn: string;
  daysDiffering: number;
  /** The first 10 days that differ, by day: each side's rows and sums, and what differs (`rows`, `sum.<column>`). */
  days: { day: string; table: DaySide; source: DaySide; differs: string[] }[];
}

export interface DaySide {
  rows: number;
  sums: Record<string, string | null>;
}

/**
 * The source commits a run read: `incremental` from `from` (exclusive, the position the target
 * recorded last) to `to` (inclusive); `full` all of the source as of `to` (a first run, a rewrite
 * that changed rows, `source.read = full`). Iceberg snapshot ids, Delta versions.
 */
export interface ReadPosition {
  source: string;
  mode: 'incremental' | 'full';
  from?: string;
  to: string;
  /** Why a full read (first run, rewritten rows). */
  reason?: string;
}

/** One expectation of a publish and what it found. */
export interface ExpectationReport {
  name: string;
  type: string;
  action: string;
  outcome: 'passed' | 'warned' | 'dropped' | 'quarantined' | 'failed';
  /** The column the check judges, when one does (freshness-check's event-time, reconcile's summed columns). */
  column?: string;
  /** Rows that failed a row check (0 for a table check). */
  failedRows: number;
  /** What a table check measured (row counts, the newest timestamp). */
  observed?: Record<string, number | string | null>;
  /** `diff`: up to 10 of the rows that fail it. */
  samples?: Record<string, unknown>[];
}

/**
 * What `diff` found a run would do, beside the predicted `outputs` (docs/diff.md): per table or
 * path it writes, whether it would be created (with its columns), the columns it would gain and
 * the writes that would be sent; what a stream would read; the steps it could not predict.
 */
export interface DiffReport {
  changes: TableChange[];
  /** The steps that would write (create, alter, write, merge, stream), in order. */
  writes: string[];
  streams: StreamRead[];
  /** Steps a diff cannot predict, because they read what the run's own earlier writes change. */
  notPredicted: { step: string; reason: string }[];
}

export interface TableChange {
  table?: string;
  path?: string;
  format?: string;
  location?: string;
  /** The table does not exist: the run would create it so (and the counts are against an empty table). */
  create?: { columns: { name: string; type: string }[]; partitionBy: string[]; properties?: Record<string, string> };
  /** Configured table properties the table's differ from: the run would set them (docs/table-shape.md). */
  setProperties?: Record<string, string>;
  /** Columns the run would add to the table. */
  addColumns?: { name: string; type: string }[];
  /** The writes the run would send to it, in order; none when it would change nothing. */
  writes: { step: string; title: string; replaces?: string; rowsReplaced?: number }[];
}

/** What the next run of a stream would read: from its checkpoint's offsets (or its starting offsets) to the sources' current end. */
export interface StreamRead {
  step: string;
  checkpoint: string;
  /** The checkpoint's last committed micro-batch, if it has one. */
  committedBatch?: number;
  from: unknown;
  to: unknown;
  rows: number;
  batches: number;
}

export type RunState = 'succeeded' | 'failed' | 'skipped' | 'cancelled';

export interface StatusDocument {
  schema: 'lakehouse-jobs/status/v1';
  status: RunState;
  exitCode: number;
  command: string;
  job: { template?: string; schemaVersion?: number; name?: string };
  tenant?: string;
  runId: string;
  logicalDate?: string;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  spark?: { remote: string; sessionId?: string; serverVersion?: string; operationIds: string[]; interruptedOperationIds?: string[] };
  outputs: OutputReport[];
  metrics: { rowsRead: number; rowsWritten: number };
  /**
   * Steps that ran to the end (`run` only). After a failure these are what committed; `outputs`
   * and `metrics` are what those steps reported (a template may measure a commit in a step before it).
   */
  completedSteps?: string[];
  /** The step that failed. */
  failedStep?: string;
  skipReason?: string;
  error?: ErrorReport;
  /** `diff`: what the run would change; its `outputs`, `metrics`, `skipReason` and `error` are the run's, predicted. */
  diff?: DiffReport;
  /** `history`: the table's commits, newest first (docs/history.md). */
  history?: { table: string; format: string; commits: readonly object[] };
  /** `rollback`: per table, from, to, mode and state (docs/history.md). */
  rollback?: object;
  /**
   * `run` under a platform config with `ledger`: whether this document was appended to the run
   * ledger's table (docs/history.md). A failed append is a warning, never the run's exit code.
   */
  ledger?: LedgerReport;
}

export interface LedgerReport {
  table: string;
  written: boolean;
  error?: { code: string; message: string };
}

export interface StatusTargets {
  statusFile?: string;
  /** Airflow's XCom sidecar directory; written only when it exists. */
  xcomDir?: string;
  /** A termination message file asked for explicitly: always written (created if need be). */
  terminationLog?: string;
  /**
   * The default termination message file, written only when it already exists: Kubernetes creates
   * it in the pod; anywhere else (a developer's machine, as root) we must not create or overwrite it.
   */
  terminationLogIfExists?: string;
  stdout?: (text: string) => void;
}

export const XCOM_DIR = '/airflow/xcom';
export const TERMINATION_LOG = '/dev/termination-log';
const TERMINATION_LIMIT = 4096;

/** The document as every target but the termination message receives it: indented JSON, scrubbed. */
export function statusText(doc: StatusDocument): string {
  return scrub(JSON.stringify(doc, bigintSafe, 2));
}

/** The document as the run ledger keeps it: one line of JSON, scrubbed as every other target. */
export function statusLine(doc: StatusDocument): string {
  return scrub(JSON.stringify(doc, bigintSafe));
}

export function writeStatus(doc: StatusDocument, targets: StatusTargets): void {
  const text = statusText(doc);
  (targets.stdout ?? ((t) => process.stdout.write(t)))(text + '\n');
  if (targets.statusFile) writeAtomically(targets.statusFile, text + '\n');
  if (targets.xcomDir && existsSync(targets.xcomDir)) writeAtomically(join(targets.xcomDir, 'return.json'), text);
  const termination =
    targets.terminationLog ?? (targets.terminationLogIfExists && existsAsFile(targets.terminationLogIfExists) ? targets.terminationLogIfExists : undefined);
  if (termination && writable(termination)) {
    try {
      writeFileSync(termination, compact(doc));
    } catch {
      // Best effort: the termination message is a convenience; stdout and the files above are the record.
    }
  }
}

/** Where the termination message goes: the explicit path, else the default one only where it exists. */
export function terminationTargets(explicit: string | undefined): Pick<StatusTargets, 'terminationLog' | 'terminationLogIfExists'> {
  return explicit ? { terminationLog: explicit } : { terminationLogIfExists: TERMINATION_LOG };
}

function existsAsFile(path: string): boolean {
  try {
    return !statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** At most 4096 bytes: Kubernetes truncates the termination message there. */
export function compact(doc: StatusDocument): string {
  const small = {
    status: doc.status,
    exitCode: doc.exitCode,
    job: doc.job.template,
    tenant: doc.tenant,
    runId: doc.runId,
    durationMs: doc.durationMs,
    outputs: doc.outputs.map((o) => ({ table: o.table, path: o.path, snapshotId: o.snapshotId, metrics: o.metrics })),
    ...(doc.completedSteps && doc.status === 'failed' ? { completedSteps: doc.completedSteps } : {}),
    // Scrubbed before it is cut: a secret across the cut would otherwise leave its first half behind.
    ...(doc.error ? { error: { code: doc.error.code, path: doc.error.path, message: scrub(doc.error.message).slice(0, 1000) } } : {}),
  };
  let text = scrub(JSON.stringify(small, bigintSafe));
  if (Buffer.byteLength(text) > TERMINATION_LIMIT) {
    text = scrub(JSON.stringify({ status: doc.status, exitCode: doc.exitCode, job: doc.job.template, runId: doc.runId, error: doc.error?.code }, bigintSafe));
  }
  return text;
}

function writeAtomically(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

function writable(path: string): boolean {
  try {
    accessSync(existsSync(path) ? path : dirname(path), constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function bigintSafe(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}
