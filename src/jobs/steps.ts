import { InternalError, type LakehouseError } from '../core/errors.js';
import type { TableName } from '../core/naming.js';
import type { OutputReport } from '../core/status.js';
import { outputColumns } from '../spark/plan/columns.js';
import type { Cmd } from '../spark/plan/commands.js';
import type { Query } from '../spark/plan/query.js';
import type { PositionMapper } from '../spark/policy/refusals.js';
import type { SchemaRegistryRef } from './template.js';
import type { TableShape } from './partition-spec.js';

export type { PositionMapper };

/**
 * The steps a template's plan is made of, and how one step reads what an earlier one found: the
 * query steps are built by `queryStep` / `materializeStep`, which return a typed handle over their
 * own columns (`measure.col('inserted')`, rows typed by those columns). A misspelt column is a type
 * error, a column the query does not produce fails when the plan is built, and rows that lack a
 * declared column fail the run as a bug (70): never a silent 0.
 */

/** What a step's rows mean for the run: fail it, skip it, or add to its outputs and metrics. */
export interface StepEffect {
  fail?: LakehouseError;
  skip?: string;
  output?: OutputReport;
  metrics?: { rowsRead?: number; rowsWritten?: number };
}

export type Row = Record<string, unknown>;

/** A row of a step that declared the columns `C`. */
export type TypedRow<C extends string> = { readonly [K in C]: unknown };

export interface SchemaDiff {
  /** Columns the source has and the table lacks, with their Spark SQL types. */
  readonly added: readonly { readonly name: string; readonly type: string }[];
  /** Columns the table has and the source lacks. */
  readonly missing: readonly string[];
  /** Columns both have, with different types (after `sameColumnType`). */
  readonly changed: readonly { readonly name: string; readonly tableType: string; readonly sourceType: string }[];
}

/**
 * Whether a source column's type is the table's: text is text whatever length a JDBC driver
 * reported, and the integer widths a table format stores as int (Iceberg has no byte or short) are int.
 */
export function sameColumnType(tableType: string, sourceType: string): boolean {
  const norm = (t: string) =>
    t
      .toLowerCase()
      .replace(/\b(var)?char\(\d+\)/g, 'string')
      .replace(/\b(tinyint|smallint|byte|short)\b/g, 'int')
      .replace(/\binteger\b/g, 'int')
      .replace(/\s+/g, '');
  return norm(tableType) === norm(sourceType);
}

/**
 * One micro-batch of a streaming query, from Spark's StreamingQueryProgress (the fields the
 * templates use). Offsets are the sources' own JSON (Kafka: `{ "<topic>": { "<partition>": <offset> } }`).
 */
export interface StreamProgress {
  readonly batchId: number;
  readonly numInputRows: number;
  readonly sources: readonly { readonly description: string; readonly startOffset?: unknown; readonly endOffset?: unknown; readonly numInputRows: number }[];
  /** The batch's observed aggregates (`Query.observe(name, …)`), by name, then by column. */
  readonly observedMetrics?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}

/** One version of a subject in a schema registry: its schema id and writer schema (JSON text). */
export interface RegisteredSchema {
  readonly subject: string;
  readonly version: number;
  readonly id: number;
  readonly schema: string;
}

declare const columnRefBrand: unique symbol;

/** One column of a query step's rows, as a later step reads it: made only by the step's `col`, never by hand. */
export interface ColumnRef {
  readonly step: string;
  readonly column: string;
  readonly [columnRefBrand]: true;
}

/** A step whose rows later steps read: its id, its declared columns, and references to them. */
export interface RowsStep<C extends string> {
  readonly id: string;
  readonly columns: readonly C[];
  /** This step's `column` (of its first row), for a later step's `when`. */
  col(column: C): ColumnRef;
}

/** What the query steps that ran before found: what a later step's `when` decides on. */
export interface Facts {
  /** The rows of a step that ran; undefined when it did not (not needed, or not reached). */
  rows<C extends string>(step: RowsStep<C>): readonly TypedRow<C>[] | undefined;
  /** A count in a step's first row: 0 when the step did not run, found no row, or the value is NULL. */
  count(ref: ColumnRef): number;
}

/** The facts of one run, recorded by the executor step by step. */
export class StepFacts implements Facts {
  readonly #rows = new Map<string, readonly Row[]>();

  /**
   * A step's rows, which must have exactly its declared columns: `columns` as the server named them
   * (undefined only when it sent no schema, which it does for no rows).
   */
  record(step: RowsStep<string>, columns: readonly string[] | undefined, rows: readonly Row[]): void {
    if (columns === undefined) {
      if (rows.length) throw new InternalError(`step ${step.id} returned rows without their columns`);
      this.#rows.set(step.id, rows);
      return;
    }
    const declared = new Set(step.columns);
    const got = new Set(columns);
    const missing = step.columns.filter((c) => !got.has(c));
    const extra = columns.filter((c) => !declared.has(c));
    if (missing.length || extra.length)
      throw new InternalError(
        `step ${step.id} returned the columns ${JSON.stringify(columns)}, not its declared ${JSON.stringify(step.columns)}${missing.length ? ` (missing ${missing.join(', ')})` : ''}`,
      );
    this.#rows.set(step.id, rows);
  }

  rows<C extends string>(step: RowsStep<C>): readonly TypedRow<C>[] | undefined {
    return this.#rows.get(step.id) as readonly TypedRow<C>[] | undefined;
  }

  count(ref: ColumnRef): number {
    const row = this.#rows.get(ref.step)?.[0];
    return Number(row?.[ref.column] ?? 0);
  }
}

interface StepBase {
  readonly id: string;
  readonly title: string;
  /**
   * Run the step only when this holds for the earlier query steps' rows (a write that would change
   * nothing is not sent: no empty commit). Without it the step always runs.
   */
  readonly when?: (facts: Facts) => boolean;
  /**
   * The config paths whose logic (a tenant's expression or SQL) the step carries: the executor
   * sends it as tenant logic, which the server's tenant policy judges (src/spark/policy); a refusal
   * or an analysis error names these paths (78).
   */
  readonly untrusted?: readonly string[];
  /**
   * Where positions of the tenant SQL this step sends come from (gold's transform): an error at a
   * position of that text is reported at the config path, line and column the tenant wrote.
   */
  readonly sqlOrigin?: SqlOrigin;
  /**
   * The same map as the tenant policy's hook: where a position the server's refusals and analysis
   * errors name in the SQL sent lies in the tenant's own text, at its config path.
   */
  readonly mapPosition?: PositionMapper;
  /**
   * What a failure of this step means in the config's words (a Kafka topic the server does not
   * have is the topic the config names, 66): the executor throws the answer instead of the
   * failure; undefined keeps the failure as it is.
   */
  readonly explainFailure?: (error: LakehouseError) => LakehouseError | undefined;
  /**
   * Properties this step's commit carries beside the run's own stamps (run id, attempt), from the
   * earlier steps' facts: an incremental read's consumed position, recorded in the same commit as
   * the write it fed (Iceberg snapshot summary, Delta commitInfo.userMetadata).
   */
  readonly stamp?: (facts: Facts) => Readonly<Record<string, string>>;
}

/** A place in a tenant's SQL as its config gives it: the config path of the SQL, line and column from 1, offset from 0. */
export interface SqlPosition {
  readonly path: string;
  readonly line: number;
  readonly column: number;
  readonly offset: number;
}

/**
 * The map from positions of SQL text the runner sends to the tenant's own text: the rewrite of
 * table names and parameters, dropped comments and composed steps shift them.
 */
export interface SqlOrigin {
  /** A character offset (from 0) of the text sent. */
  locate(offset: number): SqlPosition | undefined;
  /** A line (from 1) and column (from 0, as Spark's parse errors count it) of the text sent. */
  locateLineColumn(line: number, column0: number): SqlPosition | undefined;
}

/** Run a query and interpret its rows with a pure function; the rows become a fact for later steps. */
export interface QueryStep<C extends string> extends StepBase, RowsStep<C> {
  readonly kind: 'query';
  readonly query: Query;
  /** A table the query reads may not exist yet (the run creates it later): then it has no rows. */
  readonly tableMayBeMissing?: boolean;
  /** `facts`: the earlier steps' rows (a measurement after a change compares with the one before); the executor always passes them. */
  interpret(rows: readonly TypedRow<C>[], facts?: Facts): StepEffect;
  /**
   * For `diff`, which sends no write: a query over the tables as they are now that yields the rows
   * this step would read after the run's earlier writes (e.g. a count of what a write would land).
   * Without it such a step is reported as not predicted (docs/diff.md).
   */
  readonly predict?: Query;
  /**
   * For `diff`: the rows behind the failures this step's rows report (an expectation's failing
   * rows), each a query `diff` reads up to 10 rows of.
   */
  readonly samples?: (rows: readonly TypedRow<C>[]) => readonly Sample[];
}

/** The failing rows of one expectation of an output, as a query. */
export interface Sample {
  /** The output (`catalog.namespace.table`) the expectation belongs to. */
  readonly table: string;
  readonly expectation: string;
  readonly rows: Query;
}

/**
 * Compute `query` once and keep its rows on the server for the rest of the run (a local
 * checkpoint), under `name`: later steps read them with `Query.materialized(name)`, and nothing that
 * produced them runs again. Then run `check`, a query over them, and interpret its rows as a query
 * step does. A later step reading them carries no config logic of its own for them: this step was judged.
 */
export interface MaterializeStep<C extends string> extends StepBase, RowsStep<C> {
  readonly kind: 'materialize';
  readonly name: string;
  readonly query: Query;
  readonly check: Query;
  interpret(rows: readonly TypedRow<C>[]): StepEffect;
}

/**
 * Identify a batch without reading it: the files `source` would read (analysed, no file is read),
 * with `identity` (what the run computes from them: the batch's plan), hashed (SHA-256) into one
 * fingerprint. At the same time `previous` is read (a metadata query: what the target's current
 * commit recorded of the batch it applied), and the pure function compares the two. Its row, for
 * later steps: `fingerprint`, and `unchanged` (1 when `interpret` said so, else 0).
 */
export interface FingerprintStep extends StepBase, RowsStep<'fingerprint' | 'unchanged' | 'commits'> {
  readonly kind: 'fingerprint';
  readonly source: Query;
  readonly identity: string;
  readonly previous: Query;
  /**
   * The fingerprint, and `previous`'s rows (none: e.g. the target does not exist yet). `commits`:
   * the tables' current commits `previous` read (label to commit, null for a table without one),
   * recorded for later steps (a commit window's base), or undefined when it could not tell.
   */
  interpret(fingerprint: string, previous: readonly Row[]): StepEffect & { unchanged?: boolean; commits?: Readonly<Record<string, string | null>> };
}

/** A fingerprint step (its handle's columns: fingerprint, unchanged, commits). */
export function fingerprintStep(def: Omit<FingerprintStep, 'kind' | 'col' | 'columns'>): FingerprintStep {
  const columns = ['fingerprint', 'unchanged', 'commits'] as const;
  return Object.freeze({ ...def, kind: 'fingerprint' as const, columns, col: columnRef(def.id, columns) });
}

export type Step =
  /**
   * Run a command (DDL, write, MERGE). `ifNotExists`: the command creates something unless it exists
   * (a namespace); when another run's create beat it (CREATE_RACE) it is sent once more and finds the winner's.
   */
  | (StepBase & { readonly kind: 'command'; readonly command: Cmd; readonly ifNotExists?: true })
  /**
   * Create a table unless it exists. An existing table must be at `location` (the tenant's
   * layout); a table found by name elsewhere fails the run with a ConfigError at `configPath`
   * before anything is written to it (src/runner/table-guards.ts).
   */
  | (StepBase & {
      readonly kind: 'ensureTable';
      readonly table: TableName;
      readonly location: string;
      readonly configPath: string;
      readonly create: Cmd;
      /**
       * The partitioning and properties `create` carries, as configured: checked against the new
       * table's columns, and an existing table checked against them (src/runner/table-shape.ts).
       */
      readonly shape?: TableShape;
    })
  /**
   * Compare the columns a query produces with a table's columns (both as Spark reports them); the
   * pure function decides: fail, or commands to run first, which add the columns the table lacks
   * (`diff` takes them to do exactly that: later reads of the table see those columns, NULL).
   */
  | (StepBase & {
      readonly kind: 'compareSchemas';
      readonly source: Query;
      readonly table: TableName;
      readonly interpret: (diff: SchemaDiff) => { fail?: LakehouseError; commands?: Cmd[] };
    })
  /**
   * Analyse the columns a query produces (nothing is read) and let the pure function decide on
   * them: e.g. refuse a source whose column names are a template's own (docs/security.md).
   */
  | (StepBase & {
      readonly kind: 'checkColumns';
      readonly source: Query;
      readonly interpret: (columns: readonly { readonly name: string; readonly type: string }[]) => StepEffect;
    })
  /**
   * Check which of `paths` exist, by listing them (no file is read); the pure function decides what
   * the missing ones mean (e.g. skip: the selected input is not there yet).
   */
  | (StepBase & { readonly kind: 'probePaths'; readonly paths: readonly string[]; readonly interpret: (missing: string[]) => StepEffect })
  /**
   * Run a streaming query (`writeStream`, trigger availableNow) until it ends by itself, then
   * interpret the progress of its micro-batches. A cancelled run stops the query on the server.
   */
  | (StepBase & {
      readonly kind: 'stream';
      /** The query; with `registry`, as built before the registry was asked (what `plan` shows). */
      readonly command: Extract<Cmd, { kind: 'writeStream' }>;
      /**
       * Writer schemas the query decodes with, asked of a schema registry before the run's first
       * step (the runner's I/O, never the template's): the query sent is `build` of what it answered.
       */
      readonly registry?: {
        readonly ref: SchemaRegistryRef;
        readonly subjects: readonly string[];
        readonly configPath: string;
        readonly build: (found: readonly RegisteredSchema[]) => Extract<Cmd, { kind: 'writeStream' }>;
      };
      readonly interpret: (progress: readonly StreamProgress[]) => StepEffect;
    })
  | QueryStep<string>
  | MaterializeStep<string>
  | FingerprintStep;

export type StepKind = Step['kind'];
export type StepOf<K extends StepKind> = Extract<Step, { kind: K }>;

type Definition<S> = Omit<S, 'kind' | 'col'>;

/** A query step: its rows typed by `columns`, which must be what `query` (and `predict`) produces. */
export function queryStep<const C extends string>(def: Definition<QueryStep<C>>): QueryStep<C> {
  checkColumns(def.id, def.columns, def.query);
  if (def.predict) checkColumns(def.id, def.columns, def.predict);
  return Object.freeze({ ...def, kind: 'query' as const, columns: Object.freeze([...def.columns]), col: columnRef(def.id, def.columns) });
}

/** A materialize step: `check`'s rows typed by `columns`. */
export function materializeStep<const C extends string>(def: Definition<MaterializeStep<C>>): MaterializeStep<C> {
  checkColumns(def.id, def.columns, def.check);
  return Object.freeze({ ...def, kind: 'materialize' as const, columns: Object.freeze([...def.columns]), col: columnRef(def.id, def.columns) });
}

function columnRef<C extends string>(step: string, columns: readonly C[]): (column: C) => ColumnRef {
  return (column) => {
    // A column name computed at run time escapes the type: still never read as a silent 0.
    if (!columns.includes(column)) throw new Error(`step ${step} has no column ${column} (it declares ${columns.join(', ')})`);
    return Object.freeze({ step, column }) as unknown as ColumnRef;
  };
}

/** Declared columns are distinct, and where the plan nodes name the query's columns they are those. */
function checkColumns(step: string, declared: readonly string[], query: Query): void {
  if (new Set(declared).size !== declared.length) throw new Error(`step ${step} declares a column twice: ${declared.join(', ')}`);
  const produced = outputColumns(query.rel);
  if (produced && (produced.length !== declared.length || produced.some((c) => !declared.includes(c))))
    throw new Error(`step ${step} declares the columns ${declared.join(', ')}, but its query produces ${produced.join(', ')}`);
}

/** The same step under another id (a handle follows its step: its references name the new id). */
export function withId<S extends Step>(step: S, id: string): S {
  if (step.kind === 'query') {
    const { kind: _kind, col: _col, ...def } = step as QueryStep<string>;
    return queryStep({ ...def, id }) as unknown as S;
  }
  if (step.kind === 'materialize') {
    const { kind: _kind, col: _col, ...def } = step as MaterializeStep<string>;
    return materializeStep({ ...def, id }) as unknown as S;
  }
  return { ...step, id };
}
