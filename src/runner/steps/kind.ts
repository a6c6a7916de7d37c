import type { Logger } from '../../core/logger.js';
import type { TableName } from '../../core/naming.js';
import type { StreamRead } from '../../core/status.js';
import type { Field } from '../../spark/types.js';
import type { Cmd } from '../../spark/plan/commands.js';
import type { Rel } from '../../spark/plan/relations.js';
import type { Touches } from '../../spark/plan/touches.js';
import type { Facts, Row, RowsStep, Sample, Step, StepEffect, StepKind, StepOf } from '../../jobs/steps.js';

/**
 * One module per step kind, each implementing every operation on its kind: run it, diff it (what it
 * would do, sending no write), show it, say what it touches and what Spark's explain analyses. The record in index.ts is typed
 * so that the compiler checks every kind has every operation. The kind modules speak plan nodes
 * only: the executor compiles and sends them (src/runner/executor.ts), so `validate` and the text
 * `plan` load no protobuf.
 */

/** A plan a step sends, as nodes: a relation to read, a command, or a relation to keep (checkpoint). */
export type PlanNode = { readonly relation: Rel } | { readonly command: Cmd } | { readonly checkpoint: Rel };

/** What the server answered an operation, beyond its rows. */
export interface Sent {
  readonly operationId: string;
  readonly streamingQuery?: { readonly id: string; readonly runId: string };
  readonly terminated?: boolean;
  readonly recentProgress?: readonly string[];
  readonly checkpointRelationId?: string;
}

/** What a step's run may do: the executor's session, bound to this step. */
export interface StepRun {
  readonly logger: Logger;
  readonly signal: AbortSignal;
  /** The platform's catalogs (a new table's name is looked for in the others: table-guards.ts). */
  readonly catalogs: readonly string[];
  /** Send a plan as an operation of this step (secrets revealed, kept rows by their server ids). */
  send(node: PlanNode): Promise<Sent>;
  /** A relation's rows, and its columns as the server named them. `reveal: false` for the runner's own lookups. */
  rows(rel: Rel, opts?: { reveal?: boolean }): Promise<{ columns: string[] | undefined; rows: Row[] }>;
  /** The columns a relation produces, as the server analyses it (nothing is read). */
  schema(rel: Rel, opts?: { reveal?: boolean }): Promise<Field[]>;
  /** The files a relation would read (analysed; nothing is read). */
  inputFiles(rel: Rel): Promise<string[]>;
  /** Ask a running streaming query of this session to wait, report its progress, or stop. */
  streaming(query: { id: string; runId: string }, action: { await: { timeoutMs: number } } | 'recentProgress' | 'stop'): Promise<Sent>;
  /** The facts of the steps before (what `when`, `interpret` and a prediction read). */
  readonly facts: Facts;
  /** A query step's rows become a fact for later steps (checked against its declared columns). */
  record(step: RowsStep<string>, columns: readonly string[] | undefined, rows: readonly Row[]): void;
  /** A step's effect on the run's report; returns the skip reason, if any. Throws its failure. */
  effect(effect: StepEffect): string | undefined;
  /** Rows a materialize step kept, by its name: later plans name them by the server's id. */
  keep(name: string, relationId: string): void;
  /** Spark's error class of a failure (undefined when it is not Spark's). */
  errorClass(e: unknown): string | undefined;
  /** A Spark failure blamed on a config path (other errors as they are). */
  at(e: unknown, configPath: string): unknown;
}

/**
 * What a step's diff may do (src/runner/diff.ts): read as its run would, with reads of a table the
 * run would create answered by the empty relation it would be created from; nothing it sends can
 * write (a command is refused as a bug). It records what the run would write instead.
 */
export interface DiffRun extends StepRun {
  /**
   * The tables and paths `rel` reads that an earlier write of the run (not sent) changes: reading
   * them now would not see what the run would see. Empty when reading now is what the run reads.
   */
  stale(rel: Rel): string[];
  /** The step's table does not exist: it would be created with these columns, and reads of it read no row. */
  wouldCreate(step: StepOf<'ensureTable'>, columns: readonly Field[]): void;
  /** The step's existing table would have these configured properties set (its rows unchanged). */
  wouldSetProperties(step: StepOf<'ensureTable'>, properties: Readonly<Record<string, string>>): void;
  /** The table would gain these columns (NULL in its rows) before later steps read it. */
  wouldAddColumns(step: Step, table: TableName, columns: readonly Field[]): void;
  /** The step would send this write: what it writes is stale for later reads. `detail`: what it replaces. */
  wouldWrite(step: Step, command: Cmd, detail?: { replaces?: string; rowsReplaced?: number }): void;
  /** What a stream step would read. */
  wouldRead(stream: StreamRead): void;
  /** The step reads what the run's earlier writes change and nothing predicts it: it is not run. */
  notPredicted(step: Step, reason: string): void;
  /** Read up to 10 rows of each sample into its output's expectation. */
  sample(samples: readonly Sample[]): Promise<void>;
}

export interface StepKindModule<S extends Step> {
  /** Run the step; resolves to a skip reason when it ends the run with nothing to do. */
  run(step: S, run: StepRun): Promise<string | undefined>;
  /**
   * What the step would do in a run now, writing nothing (`diff`): its reads as the run's, its
   * writes recorded instead of sent. Resolves to the skip reason the run would end with.
   */
  diff(step: S, run: DiffRun): Promise<string | undefined>;
  /** The step's main plan, as `plan --format json` prints it. */
  plan(step: S): PlanNode;
  /** The operator tree `plan` prints. */
  view(step: S): string;
  /** What the step reads and writes, from its plan nodes: `validate`, `plan` and lineage. */
  touches(step: S): Touches;
  /** The relation Spark can explain without running anything, if there is one. */
  explainable(step: S): Rel | undefined;
}

export type StepKinds = { readonly [K in StepKind]: StepKindModule<StepOf<K>> };

export function indent(text: string, n = 2): string {
  return text
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
}
