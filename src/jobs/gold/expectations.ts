import { z } from 'zod';
import { columnName, expression, isoDate, name } from '../../core/config/validate.js';
import { NAME_PATTERN } from '../../core/naming.js';
import type { ConfigExpression } from '../../core/expression/index.js';
import { type Expr, and, fn, isIn, isNotNull, isNull, lit, not, or } from '../../spark/plan/expressions.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import { col } from '../../spark/plan/expressions.js';

/**
 * Expectations of a gold publish (like dbt tests and Lakeflow expectations): declared checks of the
 * transform's result, each with what a failure does. Row checks judge each row (not-null, unique,
 * accepted-values, range, relationship, expression); table checks judge the publish as a whole
 * (row-count against the previous publish, freshness). All of them are computed in one aggregate
 * over the result (gold-publish.ts), never one scan per check.
 */

export const ACTIONS = ['warn', 'drop', 'quarantine', 'fail'] as const;
export type Action = (typeof ACTIONS)[number];
const TABLE_ACTIONS = ['warn', 'fail'] as const;

const base = { name: name().describe('Names the check in the status and in the quarantine table (_lake_failed_checks).') };
const kind = <T extends string>(t: T, what: string) => z.literal(t).describe(`The kind of check: ${t}, ${what}.`);
const rowAction = {
  action: z
    .enum(ACTIONS)
    .default('fail')
    .describe(
      'What a failing row does: warn (counted, published), drop (not published), quarantine (to <table>__quarantine) or fail (the run, 65); default fail.',
    ),
};
const tableAction = {
  action: z.enum(TABLE_ACTIONS).default('fail').describe('What a failing table check does: warn (counted in the status) or fail (the run, 65); default fail.'),
};

/** A bound of a range check: a number or an ISO date. */
const bound = z.union([z.number(), isoDate()]);
/** A value of accepted-values: a string, a number or a boolean. */
const value = z.union([z.string(), z.number(), z.boolean()]);
/** A tenant table as the transform names it: `silver.<table>` or `gold.<table>`. */
export const layerTable = () =>
  z
    .string()
    .regex(new RegExp(`^(silver|gold)\\.${NAME_PATTERN.source.slice(1, -1)}$`), 'must be silver.<table> or gold.<table> (one of your tables)')
    .transform((v) => {
      const [layer, table] = v.split('.') as ['silver' | 'gold', string];
      return { layer, table };
    });

export const expectationSchema = z.discriminatedUnion('type', [
  z
    .object({
      ...base,
      type: kind('not-null', 'fails a row where any of the columns is NULL'),
      columns: z.array(columnName()).min(1).describe('The columns that must not be NULL.'),
      ...rowAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('unique', 'fails every row of a key another row shares'),
      columns: z.array(columnName()).min(1).optional().describe('The key columns that must be unique (default: the target grain).'),
      ...rowAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('accepted-values', 'fails a row whose non-NULL value is not listed'),
      column: columnName().describe('The column checked.'),
      values: z.array(value).min(1).describe('The accepted values (strings, numbers or booleans).'),
      ...rowAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('range', 'fails a row whose non-NULL value is outside [min, max]'),
      column: columnName().describe('The column checked.'),
      min: bound.optional().describe('The lowest accepted value, inclusive: a number or an ISO date (min, max or both).'),
      max: bound.optional().describe('The highest accepted value, inclusive: a number or an ISO date (min, max or both).'),
      ...rowAction,
    })
    .strict()
    .refine((r) => r.min !== undefined || r.max !== undefined, 'needs min, max or both'),
  z
    .object({
      ...base,
      type: kind('relationship', "fails a row whose non-NULL value has no match in the tenant's table"),
      column: columnName().describe('The column checked.'),
      to: layerTable().describe("The tenant's table the value must exist in: silver.<table> or gold.<table>."),
      'to-column': columnName().describe('The column of that table the value is looked up in.'),
      ...rowAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('expression', 'fails a row where the expression is not true (false or NULL)'),
      expr: expression('expr').describe('A config expression (docs/expressions.md) every row must satisfy.'),
      ...rowAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('row-count', "fails when the rows published differ from the previous publish's by more than max-change-percent"),
      'max-change-percent': z
        .number()
        .min(0)
        .max(1_000_000)
        .describe('The largest accepted change of the row count against the previous publish, in percent; no previous rows passes.'),
      ...tableAction,
    })
    .strict(),
  z
    .object({
      ...base,
      type: kind('freshness', 'fails when the newest value is too old, or there are no rows'),
      column: columnName().describe('The timestamp column whose newest value is checked.'),
      'max-age-hours': z
        .number()
        .positive()
        .max(1_000_000)
        .describe("The newest value's largest accepted age, in hours, before the end of the logical date's range (without a logical date: now)."),
      ...tableAction,
    })
    .strict(),
]);

export type Expectation = z.infer<typeof expectationSchema>;
export type RowExpectation = Exclude<Expectation, { type: 'row-count' | 'freshness' }>;

export const isRowCheck = (e: Expectation): e is RowExpectation => e.type !== 'row-count' && e.type !== 'freshness';

/** The implicit uniqueness check of the grain when the config declares none (a duplicate grain fails the publish). */
export const GRAIN_UNIQUE = 'grain_unique';

/** The column names the plan gives each check's per-row flag and aggregate. */
export const flagColumn = (i: number) => `__lake_f${i}`;
export const refColumn = (i: number) => `__lake_ref${i}`;
export const UNIQUE_COUNT = (i: number) => `__lake_u${i}`;

function boundLit(b: number | string) {
  return typeof b === 'number' ? lit(Number.isInteger(b) ? b : { double: b }) : lit({ date: b });
}

/**
 * A row check's failure as a boolean of the row (never NULL): what the plan's flag column holds.
 * NULLs pass every check except not-null (and a custom expression, which must be true).
 */
export function rowFailure(e: RowExpectation, i: number): Expr {
  switch (e.type) {
    case 'not-null':
      return or(...e.columns.map((c) => isNull(col(c))));
    case 'unique':
      // The number of rows sharing the key, from a window the plan adds (UNIQUE_COUNT).
      return fn('>', col(UNIQUE_COUNT(i)), lit(1));
    case 'accepted-values':
      return and(
        isNotNull(col(e.column)),
        not(
          isIn(
            col(e.column),
            e.values.map((v) => lit(v)),
          ),
        ),
      );
    case 'range': {
      const below = e.min === undefined ? undefined : fn('<', col(e.column), boundLit(e.min));
      const above = e.max === undefined ? undefined : fn('>', col(e.column), boundLit(e.max));
      return and(isNotNull(col(e.column)), or(...[below, above].filter((x): x is Expr => x !== undefined)));
    }
    case 'relationship':
      return and(isNotNull(col(e.column)), isNull(col(refColumn(i))));
    case 'expression':
      return not(fn('coalesce', configExpr(e.expr as ConfigExpression), lit(false)));
  }
}

/** The columns a unique check keys on: its own, or the grain. */
export const uniqueColumns = (e: Extract<Expectation, { type: 'unique' }>, grain: readonly string[]): readonly string[] => e.columns ?? grain;
