import type { z } from 'zod';
import type { SecretRef } from '../core/config/platform.js';
import type { LakehouseError } from '../core/errors.js';
import type { Instant, LogicalDate } from '../core/instant.js';
import type { Layer, TableName } from '../core/naming.js';
import type { Secret } from '../core/secrets.js';
import type { TenantContext } from '../core/tenant.js';
import type { Cmd } from '../spark/plan/commands.js';
import type { Query } from '../spark/plan/query.js';
import { cmdTouches, relTouches, type Touches } from '../spark/plan/touches.js';

/**
 * The job catalog's contract. A template is a row of the catalog: a name, its config schema per
 * version, and a pure function from (context, config) to plan steps. No I/O, no gRPC. Templates are
 * written with the kit (`defineTemplate` in kit.ts), which keeps the schema-to-plan types linked;
 * the catalog only sees this erased shape.
 */
export interface JobTemplate {
  readonly name: string;
  readonly layer: Layer | 'ops';
  readonly summary: string;
  readonly stability: 'stable' | 'beta' | 'experimental';
  /** The docs page, relative to the repository root. */
  readonly docs: string;
  /** Ascending by version; the last is the newest. */
  readonly versions: readonly TemplateVersion[];
}

export interface TemplateVersion {
  readonly version: number;
  /** Validates the whole job config document (job, tenant and the template's sections). */
  readonly schema: z.ZodType;
  /** A runnable example, relative to the repository root. */
  readonly example: string;
  /** The plan for a config this version's schema accepted. */
  plan(ctx: JobContext, config: unknown): JobPlan;
}

export interface CatalogRef {
  readonly name: string;
  readonly format: 'iceberg' | 'delta';
}

export interface JobContext {
  readonly tenant: TenantContext;
  /** The platform's catalog by name, or its default catalog. Throws a ConfigError naming `path`. */
  catalog(name: string | undefined, path: string): CatalogRef;
  /** A named JDBC connection of the platform config. Throws a ConfigError naming `path` when unknown. */
  jdbcConnection(name: string, path: string): JdbcConnectionRef;
  /**
   * A Kafka cluster of the platform config (`kafka.clusters.<name>`, or its default cluster) with
   * this tenant's topic grant. Throws a ConfigError naming `path` when unknown.
   */
  kafkaCluster(name: string | undefined, path: string): KafkaClusterRef;
  /** Whether the platform lets a job config give its own JDBC url (`jdbc.inline-urls`). */
  readonly inlineJdbcUrls: boolean;
  /** The platform's retention floor for table maintenance, in hours (`maintenance.retention-floor-hours`; default 168). */
  readonly retentionFloorHours?: number;
  /** A secret by reference; resolved (environment or mounted file) only when revealed, i.e. when the plan runs. */
  secret(ref: SecretRef, path: string): Secret;
  readonly runId: string;
  /**
   * A nonce of this attempt (one process), stamped into every commit beside the run id
   * (`lakehouse-jobs.attempt`): an orchestrator's retry of a run keeps the run id, so only this
   * tells this attempt's commits from another's. Absent when no run will happen (plan, validate).
   */
  readonly attempt?: string;
  /** `--logical-date`, parsed once (a value that is neither a date nor an instant is a usage error, 64). */
  readonly logicalDate?: LogicalDate;
  /** The run's clock: when it started, at microseconds. Templates read time only from here. */
  readonly clock: Instant;
  /**
   * What the platform config lets this tenant reach beyond its own layers (`tenants.<id>`): its
   * storage roots and the read-only namespaces and roots it is granted. Absent when the platform
   * says nothing about the tenant (then only its own layers and `tenant.storage-root`).
   */
  readonly access?: TenantAccess;
}

export interface TenantAccess {
  readonly storageRoots: readonly string[];
  /** `catalog.namespace` pairs. */
  readonly readNamespaces: readonly string[];
  readonly readRoots: readonly string[];
}

export interface KafkaClusterRef {
  readonly name: string;
  readonly bootstrapServers: readonly string[];
  readonly securityProtocol: 'PLAINTEXT' | 'SSL' | 'SASL_PLAINTEXT' | 'SASL_SSL';
  /** Resolved when the plan runs, like every secret. */
  readonly sasl?: { readonly mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; readonly username: string; readonly password: Secret };
  readonly tls?: { readonly truststoreLocation?: string; readonly truststoreType?: string; readonly truststorePassword?: Secret };
  /** What this tenant may read: exact topic names and topic name prefixes (both empty: nothing). */
  readonly grant: { readonly topics: readonly string[]; readonly prefixes: readonly string[] };
}

export interface JdbcConnectionRef {
  readonly name: string;
  readonly url: string;
  readonly user?: string;
  readonly driver?: string;
  /** Resolved when the plan runs, like every secret. */
  readonly password?: Secret;
}

// The status document's type, defined in core (templates report outputs, core writes them).
export type { OutputReport } from '../core/status.js';
import type { OutputReport } from '../core/status.js';

/** What a step's rows mean for the run: fail it, skip it, or add to its outputs and metrics. */
export interface StepEffect {
  fail?: LakehouseError;
  skip?: string;
  output?: OutputReport;
  metrics?: { rowsRead?: number; rowsWritten?: number };
}

export type Row = Record<string, unknown>;

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
}

/** The rows of the query steps that ran before, by step id: what a later step's `when` decides on. */
export type Facts = Readonly<Record<string, readonly Row[]>>;

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
   * checks its plan against the tenant read policy (src/spark/policy) before it runs it; a refusal
   * names these paths (78).
   */
  readonly untrusted?: readonly string[];
}

export type Step =
  /** Run a command (DDL, write, MERGE). */
  | (StepBase & { readonly kind: 'command'; readonly command: Cmd })
  /**
   * Create a table unless it exists (probed by analysing its schema; a concurrent create is fine).
   * An existing table must be at `location` (the tenant's layout, `<storage-root>/<layer>/<table>`):
   * a table found by name elsewhere (an old lake home, another tenant's path) fails the run with a
   * ConfigError at `configPath` before anything is written to it.
   */
  | (StepBase & {
      readonly kind: 'ensureTable';
      readonly table: TableName;
      readonly location: string;
      readonly configPath: string;
      readonly create: Cmd;
    })
  /**
   * Compare the columns a query produces with a table's columns (both as Spark reports them); the
   * pure function decides: fail, or commands to run first (e.g. add the new columns).
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
      readonly command: Extract<Cmd, { kind: 'writeStream' }>;
      readonly interpret: (progress: readonly StreamProgress[]) => StepEffect;
    })
  /** Run a query and interpret its rows with a pure function; the rows become a fact for later steps. */
  | (StepBase & { readonly kind: 'query'; readonly query: Query; readonly interpret: (rows: Row[]) => StepEffect })
  /**
   * Compute `query` once and keep its rows on the server for the rest of the run (a local
   * checkpoint, in the executors' memory and disk), under `name`: later steps read them with
   * `Query.materialized(name)`, and nothing that produced them runs again (no second scan, no
   * second sort). Then run `check`, a query over them, and interpret its rows as a query step does.
   * The rows are those of the moment this step ran; the executor drops them when the run ends.
   * A later step reading them carries no config logic of its own for them: this step was judged.
   */
  | (StepBase & {
      readonly kind: 'materialize';
      readonly name: string;
      readonly query: Query;
      readonly check: Query;
      readonly interpret: (rows: Row[]) => StepEffect;
    });

export interface JobPlan {
  readonly steps: readonly Step[];
  /** Spark session settings the steps rely on, set before the first step. */
  readonly sessionConf?: Readonly<Record<string, string>>;
  /** Optional lineage the steps cannot show (src/runner/lineage derives datasets from the steps themselves). */
  readonly lineage?: PlanLineage;
}

/** A table (`catalog.namespace.table`) or files (a path) a template names in its lineage hook. */
export type DatasetRef = { readonly kind: 'table'; readonly table: string } | { readonly kind: 'path'; readonly path: string };

/** Where one output column's values come from. */
export interface ColumnSource {
  readonly input: DatasetRef;
  readonly field: string;
  /** OpenLineage's transformation: the value copied as is (IDENTITY) or computed from the field. */
  readonly transformation: 'IDENTITY' | 'TRANSFORMATION';
}

/**
 * A template's optional lineage hook. The runner finds input and output datasets in the plan steps
 * for every template; a template that knows which input columns feed an output's columns says so
 * here. `fields` are the output's columns as written (known only after the run, from the table).
 */
export interface PlanLineage {
  /**
   * Datasets the steps do not show (a procedure called by SQL text, say): added to those found in
   * the plan. `outputs` are also what the template changes in place (table-maintenance's tables).
   */
  readonly datasets?: { readonly inputs?: readonly DatasetRef[]; readonly outputs?: readonly DatasetRef[] };
  columns?(output: DatasetRef, fields: readonly string[]): Readonly<Record<string, readonly ColumnSource[]>> | undefined;
}

/**
 * What a step reads and writes, from its plan nodes (one walk for `plan`'s listing and for lineage).
 * A new kind of step must say it here, or it fails to compile.
 */
export function stepTouches(step: Step): Touches {
  switch (step.kind) {
    case 'command':
    case 'stream':
      return cmdTouches(step.command);
    case 'ensureTable': {
      const format = step.create.kind === 'writeV2' ? step.create.provider : undefined;
      const parts = [step.table.catalog, step.table.namespace, step.table.table];
      return { reads: [], writes: [{ kind: 'table', parts, location: step.location, ...(format ? { format } : {}) }] };
    }
    case 'compareSchemas':
    case 'checkColumns':
      return { reads: relTouches(step.source.rel), writes: [] };
    case 'probePaths':
      return { reads: [{ kind: 'listing', paths: step.paths }], writes: [] };
    case 'query':
    case 'materialize':
      return { reads: relTouches(step.query.rel), writes: [] };
  }
}
