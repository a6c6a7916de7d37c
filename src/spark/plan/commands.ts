import type { Expr } from './expressions.js';
import type { Extension, OptionValue, Rel } from './relations.js';

/** Command nodes: statements that change something. */
export type Cmd =
  /** A SQL statement, written with the `sql` tag (sql.ts), with the tables it names. */
  | {
      readonly kind: 'sqlCommand';
      readonly query: string;
      readonly reads: readonly (readonly string[])[];
      readonly writes: readonly (readonly string[])[];
    }
  | {
      /** DataFrameWriter (v1): files at a path, or a session-catalog table. */
      readonly kind: 'write';
      readonly input: Rel;
      readonly format: string;
      readonly mode: 'append' | 'overwrite' | 'error' | 'ignore';
      readonly path?: string;
      readonly table?: readonly string[];
      readonly partitionBy: readonly string[];
      readonly options: Readonly<Record<string, OptionValue>>;
    }
  | {
      /** DataFrameWriterV2: catalog tables (Iceberg, Delta). */
      readonly kind: 'writeV2';
      readonly input: Rel;
      readonly table: readonly string[];
      readonly provider?: string;
      readonly mode: 'create' | 'create_or_replace' | 'replace' | 'append' | 'overwrite' | 'overwrite_partitions';
      readonly partitionBy: readonly Expr[];
      readonly properties: Readonly<Record<string, string>>;
      readonly options: Readonly<Record<string, string>>;
      readonly overwriteCondition?: Expr;
    }
  | {
      readonly kind: 'merge';
      readonly target: readonly string[];
      readonly source: Rel;
      readonly on: Expr;
      readonly whenMatched: readonly MergeAction[];
      readonly whenNotMatched: readonly MergeAction[];
      readonly whenNotMatchedBySource: readonly MergeAction[];
      readonly schemaEvolution: boolean;
    }
  | { readonly kind: 'createView'; readonly input: Rel; readonly name: string; readonly replace: boolean }
  /** A server plugin's command (spark-plugins/). */
  | ({ readonly kind: 'extension' } & Extension)
  | {
      /**
       * DataStreamWriter.toTable: a Structured Streaming query from a streaming `input` into a
       * catalog table. Only `availableNow` is offered: the query takes what the source holds when it
       * starts and then ends by itself, so a job run is bounded. `checkpointLocation` (in options)
       * is where the query keeps its progress across runs and failures.
       */
      readonly kind: 'writeStream';
      readonly input: Rel;
      readonly table: readonly string[];
      readonly trigger: 'availableNow';
      readonly outputMode: 'append';
      readonly queryName?: string;
      /** The sink's data source; Spark's default (parquet) unless named. */
      readonly format?: string;
      readonly options: Readonly<Record<string, string>>;
    };

export type MergeAction =
  | { readonly action: 'delete'; readonly condition?: Expr }
  | { readonly action: 'update'; readonly condition?: Expr; readonly set: readonly (readonly [string, Expr])[] }
  | { readonly action: 'updateAll'; readonly condition?: Expr }
  | { readonly action: 'insert'; readonly condition?: Expr; readonly values: readonly (readonly [string, Expr])[] }
  | { readonly action: 'insertAll'; readonly condition?: Expr };
