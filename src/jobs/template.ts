import type { z } from 'zod';
import type { SecretRef } from '../core/config/platform.js';
import type { Instant, LogicalDate } from '../core/instant.js';
import type { Layer } from '../core/naming.js';
import type { Secret } from '../core/secrets.js';
import type { TenantContext } from '../core/tenant.js';

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
  /**
   * A schema registry of the platform config (`schema-registries.<name>`, or its default registry).
   * Throws a ConfigError naming `path` when unknown.
   */
  schemaRegistry(name: string | undefined, path: string): SchemaRegistryRef;
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

/** A schema registry (Confluent's API); its URL and password are resolved only when the run fetches a schema. */
export interface SchemaRegistryRef {
  readonly name: string;
  readonly url: Secret;
  readonly basicAuth?: { readonly username: string; readonly password: Secret };
}

export interface JdbcConnectionRef {
  readonly name: string;
  readonly url: string;
  readonly user?: string;
  readonly driver?: string;
  /** Resolved when the plan runs, like every secret. */
  readonly password?: Secret;
}

export type { OutputReport } from '../core/status.js';
export type {
  ColumnRef,
  Facts,
  MaterializeStep,
  PositionMapper,
  QueryStep,
  RegisteredSchema,
  Row,
  RowsStep,
  Sample,
  SchemaDiff,
  SqlOrigin,
  SqlPosition,
  Step,
  StepEffect,
  StepKind,
  StepOf,
  StreamProgress,
  TypedRow,
} from './steps.js';
export { sameColumnType } from './steps.js';
import type { Facts, Step } from './steps.js';

export interface JobPlan {
  readonly steps: readonly Step[];
  /** Spark session settings the steps rely on, set before the first step. */
  readonly sessionConf?: Readonly<Record<string, string>>;
  /** Optional lineage the steps cannot show (src/runner/lineage derives datasets from the steps themselves). */
  readonly lineage?: PlanLineage;
  /**
   * The values of the plan's `bound` options, from what the steps that ran found (an incremental
   * read's snapshot ids): asked before each step is sent; an undefined value leaves its option out.
   */
  readonly bind?: (facts: Facts) => Readonly<Record<string, string | undefined>>;
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
   * Datasets the steps do not show (SQL text names its tables through the `sql` tag, so no template
   * needs this today): added to those found in the plan.
   */
  readonly datasets?: { readonly inputs?: readonly DatasetRef[]; readonly outputs?: readonly DatasetRef[] };
  columns?(output: DatasetRef, fields: readonly string[]): Readonly<Record<string, readonly ColumnSource[]>> | undefined;
}
