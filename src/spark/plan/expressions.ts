import type { Instant } from '../../core/instant.js';
import type { Secret } from '../../core/secrets.js';

/**
 * Expression nodes: tiny, frozen values with a `kind` tag. Templates assemble them; `compile.ts`
 * turns them into protobuf. Column names from config become `col` nodes (one identifier each),
 * values become `lit` nodes, and a config's own expression is parsed by our grammar into these
 * same nodes (config-expression.ts). There is deliberately no node for SQL expression text: nothing
 * a config writes reaches Spark's expression parser, and nothing is concatenated into SQL text.
 */

export type LiteralValue =
  | null
  | boolean
  | string
  | number
  | bigint
  | { readonly decimal: string; readonly precision: number; readonly scale: number }
  /** A DOUBLE even when the value is whole (a bare number that is whole becomes an INT or BIGINT). */
  | { readonly double: number }
  | { readonly date: string }
  /** An instant at Spark's precision (microseconds). */
  | { readonly timestamp: Instant }
  | { readonly secret: Secret };

export type Expr =
  | { readonly kind: 'col'; readonly parts: readonly string[] }
  | { readonly kind: 'lit'; readonly value: LiteralValue }
  | { readonly kind: 'fn'; readonly name: string; readonly args: readonly Expr[]; readonly distinct?: boolean }
  | { readonly kind: 'alias'; readonly expr: Expr; readonly name: string }
  /** `try`: a value that does not convert becomes NULL (TRY_CAST) instead of failing the query. */
  | { readonly kind: 'cast'; readonly expr: Expr; readonly type: string; readonly try?: boolean }
  | { readonly kind: 'star'; readonly qualifier?: string }
  | { readonly kind: 'window'; readonly fn: Expr; readonly partitionBy: readonly Expr[]; readonly orderBy: readonly SortOrder[] }
  /**
   * `expr IN (DATE …, …)` of dates an earlier step of the run found, bound by name (JobPlan.bind)
   * as a JSON array of ISO dates, or `*` for every row: a table format's overwrite by filter needs
   * literals, which a plan made before the run cannot hold.
   */
  | { readonly kind: 'inBoundDates'; readonly expr: Expr; readonly bound: string };

export interface SortOrder {
  readonly expr: Expr;
  readonly descending: boolean;
  readonly nullsFirst: boolean;
}

const freeze = <T extends object>(v: T): T => Object.freeze(v);

/** A column, optionally qualified: `col('s', 'id')` is `s`.`id`. */
export const col = (...parts: string[]): Expr => freeze({ kind: 'col', parts: freeze([...parts]) });
export const lit = (value: LiteralValue): Expr => freeze({ kind: 'lit', value });
export const fn = (name: string, ...args: Expr[]): Expr => freeze({ kind: 'fn', name, args: freeze(args) });
export const alias = (expr: Expr, name: string): Expr => freeze({ kind: 'alias', expr, name });
export const cast = (expr: Expr, type: string): Expr => freeze({ kind: 'cast', expr, type });
export const tryCast = (expr: Expr, type: string): Expr => freeze({ kind: 'cast', expr, type, try: true });
export const star = (qualifier?: string): Expr => freeze(qualifier === undefined ? { kind: 'star' } : { kind: 'star', qualifier });
export const asc = (expr: Expr): SortOrder => freeze({ expr, descending: false, nullsFirst: true });
export const desc = (expr: Expr): SortOrder => freeze({ expr, descending: true, nullsFirst: false });
export const over = (windowFn: Expr, partitionBy: Expr[], orderBy: SortOrder[]): Expr =>
  freeze({ kind: 'window', fn: windowFn, partitionBy: freeze(partitionBy), orderBy: freeze(orderBy) });

/** Shorthands for the operators templates use; each is an ordinary Spark function call. */
export const and = (...xs: Expr[]): Expr => xs.reduce((a, b) => fn('and', a, b));
export const or = (...xs: Expr[]): Expr => xs.reduce((a, b) => fn('or', a, b));
export const not = (x: Expr): Expr => fn('not', x);
export const eq = (a: Expr, b: Expr): Expr => fn('==', a, b);
/** Null-safe equality: NULL <=> NULL is true. */
export const eqNullSafe = (a: Expr, b: Expr): Expr => fn('<=>', a, b);
export const gt = (a: Expr, b: Expr): Expr => fn('>', a, b);
export const isNull = (a: Expr): Expr => fn('isnull', a);
export const isNotNull = (a: Expr): Expr => fn('isnotnull', a);
export const isIn = (a: Expr, values: Expr[]): Expr => fn('in', a, ...values);
/** `a IN (…)` of the dates the run binds under `bound` (`*`: TRUE). */
export const isInBoundDates = (a: Expr, bound: string): Expr => freeze({ kind: 'inBoundDates', expr: a, bound });
export const coalesce = (...xs: Expr[]): Expr => fn('coalesce', ...xs);
