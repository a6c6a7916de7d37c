import { z } from 'zod';
import { catalogName, columnName, expression, isoDate, name } from '../../core/config/validate.js';
import { ConfigError, DataError, InputMissingError, type LakehouseError } from '../../core/errors.js';
import type { ConfigExpression } from '../../core/expression/index.js';
import { LAYERS, displayTable, tableParts } from '../../core/naming.js';
import type { DaySide, ExpectationReport, OutputReport, ReconcileReport } from '../../core/status.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import { type Expr, alias, and, asc, cast, col, fn, lit } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import { jdbcRows, jdbcSource } from '../bronze/jdbc-snapshot-ingest.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { tableCatalog } from '../tables.js';
import type { JobContext, JobPlan, TypedRow } from '../template.js';
import { queryStep } from '../steps.js';

/**
 * reconcile: does a lakehouse table hold what its JDBC source holds? Per day of a date column, the
 * row count and the sums of listed numeric columns on both sides, compared within tolerances; exit
 * 65 naming the days that differ (the first 10, and how many). Both sides are aggregated by Spark
 * (the source through its JDBC reader, credentials by reference), in one query; it writes nothing.
 */

const TEMPLATE = 'reconcile';
/** Days a failure names; the status lists as many. */
const SHOWN = 10;

const tolerance = z
  .object({
    absolute: z.number().min(0).default(0).describe("the largest accepted difference, in rows (or in the sum column's units); default 0"),
    relative: z.number().min(0).max(1).default(0).describe("the largest accepted difference as a fraction of the source's value (0.001 = 0.1%); default 0"),
  })
  .strict();

const v1 = defineVersion(1, {
  sections: {
    table: z
      .object({
        layer: z.enum(LAYERS).describe("the table's layer: the table is <catalog>.<tenant>_<layer>.<table>"),
        table: name().describe("the table's name in that layer"),
        catalog: catalogName().optional().describe("the platform's catalog (default: its default catalog)"),
        format: z.enum(['iceberg', 'delta']).optional().describe("checked against the catalog's format"),
        where: expression('table.where').optional().describe("a condition on the table's rows (docs/expressions.md), e.g. one bronze snapshot"),
      })
      .strict()
      .describe('the lakehouse table compared'),
    source: jdbcSource,
    compare: z
      .object({
        'date-column': columnName().describe('the date (or timestamp: its UTC day) both sides are grouped by, as the table names it'),
        'source-date-column': columnName().optional().describe('the same column as the source names it (default: date-column)'),
        sums: z.array(columnName()).max(20).default([]).describe('numeric columns summed per day on both sides (the same names on both)'),
        from: isoDate().optional().describe('the first day compared (inclusive; default: the earliest either side has)'),
        to: isoDate().optional().describe('the last day compared (inclusive; default: the latest either side has)'),
      })
      .strict()
      .describe('what is compared, per day'),
    tolerance: z
      .object({
        rows: tolerance.default({ absolute: 0, relative: 0 }).describe("the row counts' tolerance; default exact"),
        sums: tolerance.default({ absolute: 0, relative: 0 }).describe("the sums' tolerance; default exact"),
      })
      .strict()
      .default({ rows: { absolute: 0, relative: 0 }, sums: { absolute: 0, relative: 0 } })
      .describe('a day differs when |table - source| is above both absolute and relative × |source|'),
  },
  refine: (c, ctx) => {
    const { from, to, sums } = c.compare;
    if (from && to && from > to) ctx.addIssue({ code: 'custom', path: ['compare', 'to'], message: `is before compare.from (${from})` });
    sums.forEach((s, i) => {
      if (sums.indexOf(s) !== i) ctx.addIssue({ code: 'custom', path: ['compare', 'sums', i], message: `"${s}" appears twice` });
    });
  },
});

export type ReconcileSpec = SpecOf<typeof v1.sections>;

// ---------------------------------------------------------------------------------------------
// The plan

const sumColumn = (side: 't' | 's', i: number) => `${side}_sum_${i}`;

function plan(ctx: JobContext, spec: ReconcileSpec): JobPlan {
  const t = spec.table;
  const catalog = tableCatalog(ctx, t.catalog, t.format, 'table');
  const table = ctx.tenant.table(catalog.name, t.layer, t.table);
  const name = displayTable(table);
  const { rows: sourceRows, origin, untrusted } = jdbcRows(ctx, spec.source, 'source');
  const c = spec.compare;
  const sums = c.sums;

  const side = (rows: Query, dateColumn: string, prefix: 't' | 's'): Query => {
    const day = cast(col(dateColumn), 'date');
    const inRange: Expr[] = [...(c.from ? [fn('>=', day, lit({ date: c.from }))] : []), ...(c.to ? [fn('<=', day, lit({ date: c.to }))] : [])];
    const scoped = inRange.length ? rows.filter(and(...inRange)) : rows;
    return scoped.aggregate(
      [alias(day, 'day')],
      [
        alias(fn('count', lit(1)), `${prefix}_rows`),
        // Summed as decimals where the column is one (exact), as Spark sums the column's own type otherwise.
        ...sums.map((s, i) => alias(cast(fn('sum', col(s)), 'string'), sumColumn(prefix, i))),
      ],
    );
  };
  let lake = Query.table(tableParts(table));
  if (t.where) lake = lake.filter(configExpr(t.where as ConfigExpression));
  const query = side(lake, c['date-column'], 't')
    .join(side(sourceRows, c['source-date-column'] ?? c['date-column'], 's'), ['day'], 'full')
    .select(
      alias(cast(col('day'), 'string'), 'day'),
      alias(fn('coalesce', col('t_rows'), lit(0)), 't_rows'),
      alias(fn('coalesce', col('s_rows'), lit(0)), 's_rows'),
      ...sums.flatMap((_, i) => [col(sumColumn('t', i)), col(sumColumn('s', i))]),
    )
    .sort(asc(col('day')));
  const columns = ['day', 't_rows', 's_rows', ...sums.flatMap((_, i) => [sumColumn('t', i), sumColumn('s', i)])];
  const paths = [...(t.where ? ['table.where'] : []), ...(untrusted.untrusted ?? [])];

  const step = queryStep({
    id: 'compare-days',
    title: `Compare ${name} with ${origin} per day of ${c['date-column']}: rows${sums.length ? ` and the sums of ${sums.join(', ')}` : ''}`,
    query,
    columns,
    ...(paths.length ? { untrusted: paths } : {}),
    explainFailure: (e) => explainFailure(e, name, spec),
    interpret: (rows) => judge(rows, { name, format: catalog.format, origin, spec }),
  });
  return { steps: [step] };
}

/** The lakehouse table missing is 66; a column either side lacks is the config's mistake (78). */
function explainFailure(e: LakehouseError, name: string, spec: ReconcileSpec): LakehouseError | undefined {
  const r = e.report();
  if (r.code === 'INPUT_MISSING') return new InputMissingError(`table: ${name} does not exist`, { cause: e });
  if (/^UNRESOLVED_COLUMN/.test(r.sparkErrorClass ?? '')) {
    const c = spec.compare;
    const named = [c['date-column'], c['source-date-column'], ...c.sums].filter((x): x is string => x !== undefined);
    const missing = named.find((n) => new RegExp(`\`${n}\``).test(e.message));
    return new ConfigError([
      {
        path: 'compare',
        message: `${missing ? `the column "${missing}"` : 'a column it names'} is not in ${name} or in the source (${e.message.split('\n')[0]})`,
      },
    ]);
  }
  return undefined;
}

/** Whether two figures differ beyond a tolerance: above both the absolute and the relative bound. */
export function beyond(table: number, source: number, tol: { absolute: number; relative: number }): boolean {
  const d = Math.abs(table - source);
  return d > tol.absolute && d > tol.relative * Math.abs(source);
}

function judge(
  rows: readonly TypedRow<string>[],
  at: { name: string; format: string; origin: string; spec: ReconcileSpec },
): { output: OutputReport; fail?: DataError } {
  const { spec } = at;
  const sums = spec.compare.sums;
  const tol = spec.tolerance;
  const differing: ReconcileReport['days'] = [];
  let tableRows = 0;
  let sourceRows = 0;
  const sumsDiffering = sums.map(() => 0);
  let rowsDiffering = 0;
  for (const r of rows) {
    const figures = (p: 't' | 's'): DaySide => ({
      rows: Number(r[`${p}_rows`] ?? 0),
      sums: Object.fromEntries(sums.map((s, i) => [s, r[sumColumn(p, i)] === null || r[sumColumn(p, i)] === undefined ? null : String(r[sumColumn(p, i)])])),
    });
    const [a, b] = [figures('t'), figures('s')];
    tableRows += a.rows;
    sourceRows += b.rows;
    const differs: string[] = [];
    if (beyond(a.rows, b.rows, tol.rows)) {
      differs.push('rows');
      rowsDiffering++;
    }
    sums.forEach((s, i) => {
      if (beyond(Number(a.sums[s] ?? 0), Number(b.sums[s] ?? 0), tol.sums)) {
        differs.push(`sum.${s}`);
        sumsDiffering[i]!++;
      }
    });
    if (differs.length) differing.push({ day: String(r.day), table: a, source: b, differs });
  }
  const expectation = (checkName: string, failedDays: number, column?: string): ExpectationReport => ({
    name: checkName,
    type: 'reconcile',
    ...(column ? { column } : {}),
    action: 'fail',
    outcome: failedDays ? 'failed' : 'passed',
    failedRows: 0,
    observed: { daysCompared: rows.length, daysDiffering: failedDays },
  });
  const output: OutputReport = {
    table: at.name,
    format: at.format,
    committed: false,
    metrics: { daysCompared: rows.length, daysDiffering: differing.length, tableRows, sourceRows },
    expectations: [expectation('reconcile.rows', rowsDiffering), ...sums.map((s, i) => expectation(`reconcile.sum.${s}`, sumsDiffering[i]!, s))],
    reconcile: { source: at.origin, dateColumn: spec.compare['date-column'], daysDiffering: differing.length, days: differing.slice(0, SHOWN) },
  };
  if (!differing.length) return { output };
  const shown = differing
    .slice(0, SHOWN)
    .map(
      (d) =>
        `${d.day} (${d.differs.map((x) => (x === 'rows' ? `rows ${d.table.rows} vs ${d.source.rows}` : `${x} ${d.table.sums[x.slice(4)]} vs ${d.source.sums[x.slice(4)]}`)).join(', ')})`,
    );
  const more = differing.length > SHOWN ? `; the first ${SHOWN}: ` : ': ';
  return {
    output,
    fail: new DataError(`${differing.length} of ${rows.length} day(s) differ between ${at.name} and ${at.origin} (table vs source)${more}${shown.join('; ')}`, {
      code: 'RECONCILE_MISMATCH',
    }),
  };
}

export const reconcile = defineTemplate({
  name: TEMPLATE,
  layer: 'ops',
  summary:
    "Reconcile a tenant's Iceberg or Delta table with its JDBC source: per day of a date column, row counts and sums of numeric columns on both sides, within absolute and relative tolerances; 65 naming the days that differ (the first 10 and their count); the comparison in the status and as OpenLineage data-quality assertions; credentials by reference; writes nothing.",
  stability: 'beta',
  newest: v1,
  plan,
});
