import type { Expr, SortOrder } from './expressions.js';

/** Relation nodes: what a query reads and how it transforms it. Frozen, built by `query.ts`. */
export type Rel =
  /** SQL text, written with the `sql` tag (sql.ts): the tables it names are what it reads. */
  | { readonly kind: 'sql'; readonly query: string; readonly reads: readonly (readonly string[])[] }
  | { readonly kind: 'table'; readonly parts: readonly string[]; readonly options: Readonly<Record<string, OptionValue>> }
  | {
      readonly kind: 'source';
      readonly format: string;
      readonly paths: readonly string[];
      readonly options: Readonly<Record<string, OptionValue>>;
      readonly schema?: string;
      /** A streaming source (Structured Streaming): only a `writeStream` command can run it. */
      readonly streaming?: boolean;
    }
  | { readonly kind: 'range'; readonly start: bigint; readonly end: bigint; readonly step: bigint; readonly partitions?: number }
  | { readonly kind: 'filter'; readonly input: Rel; readonly condition: Expr }
  | { readonly kind: 'project'; readonly input: Rel; readonly exprs: readonly Expr[] }
  | { readonly kind: 'withColumns'; readonly input: Rel; readonly columns: readonly (readonly [string, Expr])[] }
  | { readonly kind: 'drop'; readonly input: Rel; readonly columns: readonly string[] }
  | { readonly kind: 'deduplicate'; readonly input: Rel; readonly columns?: readonly string[] }
  | {
      readonly kind: 'join';
      readonly left: Rel;
      readonly right: Rel;
      readonly on?: Expr;
      readonly using?: readonly string[];
      readonly type: JoinType;
    }
  /** UNION ALL by column name; `allowMissing`: a column only one side has is NULL on the other. */
  | { readonly kind: 'union'; readonly left: Rel; readonly right: Rel; readonly allowMissing: boolean }
  | { readonly kind: 'aggregate'; readonly input: Rel; readonly groupBy: readonly Expr[]; readonly aggregates: readonly Expr[] }
  | { readonly kind: 'sort'; readonly input: Rel; readonly orders: readonly SortOrder[] }
  | { readonly kind: 'limit'; readonly input: Rel; readonly n: number }
  | { readonly kind: 'alias'; readonly input: Rel; readonly name: string }
  /**
   * The rows unchanged, with named aggregates over them that the server reports beside the result
   * (a streaming query: in each micro-batch's progress, `observedMetrics.<name>`).
   */
  | { readonly kind: 'observe'; readonly input: Rel; readonly name: string; readonly metrics: readonly Expr[] }
  | ({ readonly kind: 'extension' } & Extension)
  /**
   * Rows an earlier `materialize` step of the same run computed and the server keeps (a local
   * checkpoint), by the step's name: reading them runs nothing that produced them again.
   */
  | { readonly kind: 'materialized'; readonly name: string }
  /**
   * A tenant's logic (config expressions' nodes, tenant SQL) with everything below it, sent to the
   * server's tenant policy plugin to be judged and run as judged (src/spark/policy/tenant-logic.ts);
   * refusals and analysis errors are reported at `configPaths`.
   */
  | { readonly kind: 'tenantLogic'; readonly input: Rel; readonly configPaths: readonly string[] };

/**
 * A message for a plugin of the Spark Connect server (spark-plugins/), sent as a
 * google.protobuf.Any in `Relation.extension` or `Command.extension`: its type URL and a message
 * of string fields (each encoded as a length-delimited field of that number, repeatable).
 */
export interface Extension {
  readonly typeUrl: string;
  readonly fields: readonly { readonly field: number; readonly name: string; readonly value: string }[];
  /** The tables (multi-part names) it reads and writes: what `plan` and `validate` list. */
  readonly reads: readonly (readonly string[])[];
  readonly writes: readonly (readonly string[])[];
}

export type JoinType = 'inner' | 'left' | 'right' | 'full' | 'left_semi' | 'left_anti' | 'cross';

/**
 * Data source options may carry secrets (a JDBC password); see `Secret`. A `bound` option's value
 * is known only when the run reaches the step (an incremental read's snapshot ids, found by an
 * earlier step): the executor compiles it from the run's bound values, and leaves the option out
 * when the run bound none; `plan` shows its name.
 */
export type OptionValue = string | { readonly secret: import('../../core/secrets.js').Secret } | { readonly bound: string };
