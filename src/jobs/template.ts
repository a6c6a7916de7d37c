import type { z } from 'zod';
import type { SecretRef } from '../core/config/platform.js';
import type { LakehouseError } from '../core/errors.js';
import type { Layer, TableName } from '../core/naming.js';
import type { Secret } from '../core/secrets.js';
import type { TenantContext } from '../core/tenant.js';
import type { Cmd } from '../spark/plan/commands.js';
import type { Query } from '../spark/plan/query.js';

/**
 * The job catalog's contract. A template is a row of the catalog: a name, its config schema per
 * version, and a pure function from (context, config) to plan steps. No I/O, no gRPC.
 */
export interface JobTemplate {
  readonly name: string;
  readonly layer: Layer | 'ops';
  readonly summary: string;
  readonly stability: 'stable' | 'beta' | 'experimental';
  readonly versions: readonly TemplateVersion[];
}

export interface TemplateVersion<C = any> {
  readonly version: number;
  /** Validates the whole job config document (job, tenant and the template's sections). */
  readonly schema: z.ZodType<C>;
  /** A runnable example, relative to the repository root. */
  readonly example: string;
  /** Config paths whose values are secrets (never printed). */
  readonly secretPaths?: readonly string[];
  plan(ctx: JobContext, config: C): JobPlan;
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
  /** A secret by reference; resolved (environment or mounted file) only when revealed, i.e. when the plan runs. */
  secret(ref: SecretRef, path: string): Secret;
  readonly runId: string;
  readonly logicalDate?: string;
}

export interface JdbcConnectionRef {
  readonly name: string;
  readonly url: string;
  readonly user?: string;
  readonly driver?: string;
  /** Resolved when the plan runs, like every secret. */
  readonly password?: Secret;
}

export interface OutputReport {
  table: string;
  format: string;
  location?: string;
  snapshotId?: string;
  metrics?: Record<string, number>;
}

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
}

/**
 * Every step may say it carries config-supplied logic (a tenant's expression or SQL): `untrusted`
 * lists those config paths, and the executor checks the step's plan against the tenant read policy
 * (src/spark/policy) before it runs it; a refusal names these paths (78).
 */
export type Step = StepKind & { readonly untrusted?: readonly string[] };

type StepKind =
  /** Run a command (DDL, write, MERGE). */
  | { readonly kind: 'command'; readonly id: string; readonly title: string; readonly command: Cmd }
  /** Create a table unless it exists (probed by analysing its schema; a concurrent create is fine). */
  | { readonly kind: 'ensureTable'; readonly id: string; readonly title: string; readonly table: TableName; readonly create: Cmd }
  /**
   * Compare the columns a query produces with a table's columns (both as Spark reports them); the
   * pure function decides: fail, or commands to run first (e.g. add the new columns).
   */
  | {
      readonly kind: 'compareSchemas';
      readonly id: string;
      readonly title: string;
      readonly source: Query;
      readonly table: TableName;
      readonly interpret: (diff: SchemaDiff) => { fail?: LakehouseError; commands?: Cmd[] };
    }
  /** Run a query and interpret its rows with a pure function. */
  | { readonly kind: 'query'; readonly id: string; readonly title: string; readonly query: Query; readonly interpret: (rows: Row[]) => StepEffect };

export interface JobPlan {
  readonly steps: readonly Step[];
  /** Spark session settings the steps rely on, set before the first step. */
  readonly sessionConf?: Readonly<Record<string, string>>;
}
