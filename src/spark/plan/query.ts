import type { Cmd, MergeAction } from './commands.js';
import { type Expr, type SortOrder, col } from './expressions.js';
import type { Extension, JoinType, OptionValue, Rel } from './relations.js';
import type { SqlText } from './sql.js';

/**
 * An immutable query builder in the style of a DataFrame: every method returns a new `Query`
 * around a new frozen node; nothing talks to Spark. `compile.ts` turns the node into protobuf.
 */
export class Query {
  private constructor(readonly rel: Rel) {
    Object.freeze(this);
  }

  static of(rel: Rel): Query {
    return new Query(Object.freeze(rel));
  }

  /** A query written with the `sql` tag (sql.ts). */
  static sql(text: SqlText): Query {
    return Query.of({ kind: 'sql', query: text.text, reads: text.reads });
  }

  static table(parts: readonly string[], options: Record<string, OptionValue> = {}): Query {
    return Query.of({ kind: 'table', parts: Object.freeze([...parts]), options: Object.freeze({ ...options }) });
  }

  static read(format: string, opts: { paths?: string[]; options?: Record<string, OptionValue>; schema?: string } = {}): Query {
    return Query.of({
      kind: 'source',
      format,
      paths: Object.freeze([...(opts.paths ?? [])]),
      options: Object.freeze({ ...(opts.options ?? {}) }),
      ...(opts.schema === undefined ? {} : { schema: opts.schema }),
    });
  }

  /** A relation a plugin of the Spark Connect server computes (spark-plugins/). */
  static extension(x: Extension): Query {
    return Query.of({ kind: 'extension', ...freezeExtension(x) });
  }

  /** A streaming source (Structured Streaming), e.g. Kafka topics; written with `writeStreamTo`. */
  static readStream(format: string, opts: { options?: Record<string, OptionValue>; schema?: string } = {}): Query {
    return Query.of({
      kind: 'source',
      format,
      paths: Object.freeze([]),
      options: Object.freeze({ ...(opts.options ?? {}) }),
      ...(opts.schema === undefined ? {} : { schema: opts.schema }),
      streaming: true,
    });
  }

  /** The rows the run's `materialize` step of this name kept on the server (see Step 'materialize'). */
  static materialized(name: string): Query {
    return Query.of({ kind: 'materialized', name });
  }

  static range(start: bigint, end: bigint, step = 1n, partitions?: number): Query {
    return Query.of({ kind: 'range', start, end, step, ...(partitions === undefined ? {} : { partitions }) });
  }

  filter(condition: Expr): Query {
    return Query.of({ kind: 'filter', input: this.rel, condition });
  }

  select(...exprs: (Expr | string)[]): Query {
    return Query.of({ kind: 'project', input: this.rel, exprs: Object.freeze(exprs.map((e) => (typeof e === 'string' ? col(e) : e))) });
  }

  withColumns(columns: Record<string, Expr> | readonly (readonly [string, Expr])[]): Query {
    const list = Array.isArray(columns) ? columns : Object.entries(columns);
    return Query.of({ kind: 'withColumns', input: this.rel, columns: Object.freeze(list.map(([n, e]) => Object.freeze([n, e] as const))) });
  }

  drop(...columns: string[]): Query {
    return Query.of({ kind: 'drop', input: this.rel, columns: Object.freeze(columns) });
  }

  /** Distinct rows, or one row per value of `columns`. */
  deduplicate(columns?: string[]): Query {
    return Query.of({ kind: 'deduplicate', input: this.rel, ...(columns ? { columns: Object.freeze([...columns]) } : {}) });
  }

  join(right: Query, on: Expr | readonly string[], type: JoinType = 'inner'): Query {
    const cond = Array.isArray(on) ? { using: Object.freeze([...(on as string[])]) } : { on: on as Expr };
    return Query.of({ kind: 'join', left: this.rel, right: right.rel, type, ...cond });
  }

  /** The rows of both, matched by column name (UNION ALL BY NAME); `allowMissing`: a column one side lacks is NULL there. */
  unionByName(other: Query, allowMissing = false): Query {
    return Query.of({ kind: 'union', left: this.rel, right: other.rel, allowMissing });
  }

  aggregate(groupBy: Expr[], aggregates: Expr[]): Query {
    return Query.of({ kind: 'aggregate', input: this.rel, groupBy: Object.freeze(groupBy), aggregates: Object.freeze(aggregates) });
  }

  sort(...orders: SortOrder[]): Query {
    return Query.of({ kind: 'sort', input: this.rel, orders: Object.freeze(orders) });
  }

  /** The same rows, with aggregates the server reports per micro-batch (or per query) under `name`. */
  observe(name: string, ...metrics: Expr[]): Query {
    return Query.of({ kind: 'observe', input: this.rel, name, metrics: Object.freeze(metrics) });
  }

  limit(n: number): Query {
    return Query.of({ kind: 'limit', input: this.rel, n });
  }

  as(name: string): Query {
    return Query.of({ kind: 'alias', input: this.rel, name });
  }

  // ---- commands ----

  /** DataFrameWriter (v1) to files at `path`. */
  writeFiles(
    path: string,
    format: string,
    opts: { mode: 'append' | 'overwrite' | 'error' | 'ignore'; partitionBy?: string[]; options?: Record<string, OptionValue> },
  ): Cmd {
    return Object.freeze({
      kind: 'write',
      input: this.rel,
      format,
      mode: opts.mode,
      path,
      partitionBy: Object.freeze([...(opts.partitionBy ?? [])]),
      options: Object.freeze({ ...(opts.options ?? {}) }),
    });
  }

  /** DataFrameWriterV2 to a catalog table. */
  writeTo(
    table: readonly string[],
    mode: Extract<Cmd, { kind: 'writeV2' }>['mode'],
    opts: { provider?: string; partitionBy?: Expr[]; properties?: Record<string, string>; options?: Record<string, string>; overwriteCondition?: Expr } = {},
  ): Cmd {
    return Object.freeze({
      kind: 'writeV2',
      input: this.rel,
      table: Object.freeze([...table]),
      mode,
      partitionBy: Object.freeze([...(opts.partitionBy ?? [])]),
      properties: Object.freeze({ ...(opts.properties ?? {}) }),
      options: Object.freeze({ ...(opts.options ?? {}) }),
      ...(opts.provider === undefined ? {} : { provider: opts.provider }),
      ...(opts.overwriteCondition === undefined ? {} : { overwriteCondition: opts.overwriteCondition }),
    });
  }

  /** MERGE this query (the source) into `target`. */
  mergeInto(
    target: readonly string[],
    on: Expr,
    actions: { whenMatched?: MergeAction[]; whenNotMatched?: MergeAction[]; whenNotMatchedBySource?: MergeAction[]; schemaEvolution?: boolean },
  ): Cmd {
    return Object.freeze({
      kind: 'merge',
      target: Object.freeze([...target]),
      source: this.rel,
      on,
      whenMatched: Object.freeze([...(actions.whenMatched ?? [])]),
      whenNotMatched: Object.freeze([...(actions.whenNotMatched ?? [])]),
      whenNotMatchedBySource: Object.freeze([...(actions.whenNotMatchedBySource ?? [])]),
      schemaEvolution: actions.schemaEvolution ?? false,
    });
  }

  /** Start this streaming query into a catalog table, `availableNow`: it ends when it caught up. */
  writeStreamTo(
    table: readonly string[],
    opts: { checkpointLocation: string; queryName?: string; format?: string; options?: Record<string, string> },
  ): Extract<Cmd, { kind: 'writeStream' }> {
    return Object.freeze({
      kind: 'writeStream',
      input: this.rel,
      table: Object.freeze([...table]),
      trigger: 'availableNow',
      outputMode: 'append',
      ...(opts.queryName === undefined ? {} : { queryName: opts.queryName }),
      ...(opts.format === undefined ? {} : { format: opts.format }),
      options: Object.freeze({ ...(opts.options ?? {}), checkpointLocation: opts.checkpointLocation }),
    });
  }

  createView(name: string, replace = true): Cmd {
    return Object.freeze({ kind: 'createView', input: this.rel, name, replace });
  }
}

function freezeExtension(x: Extension): Extension {
  return Object.freeze({
    typeUrl: x.typeUrl,
    fields: Object.freeze(x.fields.map((f) => Object.freeze({ ...f }))),
    reads: Object.freeze(x.reads.map((t) => Object.freeze([...t]))),
    writes: Object.freeze(x.writes.map((t) => Object.freeze([...t]))),
  });
}

/** A command a plugin of the Spark Connect server runs (spark-plugins/). */
export const extensionCommand = (x: Extension): Cmd => Object.freeze({ kind: 'extension', ...freezeExtension(x) });

/** A statement written with the `sql` tag (sql.ts). */
export const sqlCommand = (text: SqlText): Cmd => Object.freeze({ kind: 'sqlCommand', query: text.text, reads: text.reads, writes: text.writes });
