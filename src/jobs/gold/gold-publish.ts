import { z } from 'zod';
import { ConfigError, DataError } from '../../core/errors.js';
import { type IsoDate, addDays } from '../../core/instant.js';
import { catalogName, columnName, name, tableName } from '../../core/config/validate.js';
import { type TableName, displayTable, tableParts } from '../../core/naming.js';
import type { ExpectationReport } from '../../core/status.js';
import {
  type Expr,
  alias,
  and,
  cast,
  col,
  eq,
  eqNullSafe,
  fn,
  isInBoundDates,
  isNotNull,
  isNull,
  lit,
  not,
  or,
  over,
  star,
} from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import { sql } from '../../spark/plan/sql.js';
import type { Cmd } from '../../spark/plan/commands.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import type { CatalogRef, Facts, JobContext, JobPlan, PositionMapper, Row, RowsStep, SchemaDiff, SqlOrigin, Step } from '../template.js';
import { type QueryStep, queryStep } from '../steps.js';
import { CHANGE, type IncrementalRead, incrementalRead, sourceRead } from '../incremental.js';
import { outputColumns } from '../../spark/plan/columns.js';
import { createNamespaceStep, createTable, readCommitStep, tableCatalog, tableProperties } from '../tables.js';
import { type TableShape, tableShape, tableShapeKeys } from '../table-shape.js';
import { LAKE_INTERNAL_PREFIX, type RequiredColumn, checkSourceColumns } from '../source-columns.js';
import {
  type Expectation,
  GRAIN_UNIQUE,
  type RowExpectation,
  UNIQUE_COUNT,
  expectationSchema,
  flagColumn,
  isRowCheck,
  refColumn,
  rowFailure,
  uniqueColumns,
} from './expectations.js';
import {
  type GrantedTableRef,
  type Screened,
  type TableRef,
  type TransformParameter,
  composeStepsWithOrigin,
  rewriteTransform,
  sentPositionMapper,
  screenTransform,
} from './transform-sql.js';

/**
 * gold-publish: run the tenant's transform (one SELECT, or named steps each a SELECT over the
 * earlier ones) over its own silver and gold tables, check the declared expectations on the result
 * in one pass, and publish it into a gold Iceberg or Delta table `<catalog>.<tenant>_gold.<table>`
 * at `<storage-root>/gold/<table>`: replace the logical date's range, merge on the grain, or replace
 * the whole table, each one atomic commit. Failing rows are warned about, dropped or quarantined into
 * `<table>__quarantine`; a failing `fail` expectation stops the run (65) before anything is written.
 *
 * The transform is tenant SQL on a shared server: it is screened when the config is loaded
 * (transform-sql.ts), its table names are rewritten to the tenant's namespaces, its parameters are
 * bound as DATE literals of a validated date, and every step that carries it is checked on the server by the tenant policy.
 */

const TEMPLATE = 'gold-publish';
export const QUARANTINE_SUFFIX = '__quarantine';
const MODES = ['replace-range', 'merge', 'full-refresh'] as const;
type Mode = (typeof MODES)[number];

/** Internal columns of the checked rows (all of LAKE_INTERNAL_PREFIX, reserved): never written. */
const HASH = '__lake_hash';
const OLD_HASH = '__lake_old_hash';
const DROP = '__lake_drop';
const QUARANTINE = '__lake_quarantine';
const FAILED = '__lake_failed';
const SOURCE = '__source';
const grainCopy = (i: number) => `__lake_g${i}`;
/** Columns of the quarantine table besides the result's. */
export const QUARANTINE_COLUMNS = { failed: '_lake_failed_checks', logicalDate: '_lake_logical_date', runId: '_lake_run_id' } as const;

// ---------------------------------------------------------------------------------------------
// Config schema

const MAX_SQL = 100_000;
const sqlText = () => z.string().min(1, 'must not be empty').max(MAX_SQL, `is longer than ${MAX_SQL} characters`);

const transform = z
  .object({
    sql: sqlText()
      .optional()
      .describe('One query (SELECT or WITH) over silver.<table> and gold.<table>; :logical_date, :range_start and :range_end are bound as DATE values.'),
    steps: z
      .array(
        z
          .object({
            name: name().describe('Names the step, so later steps can read its result; not silver or gold.'),
            sql: sqlText().describe('One query (SELECT or WITH) over silver.<table>, gold.<table> and the earlier steps; at most 100,000 characters.'),
          })
          .strict(),
      )
      .min(1)
      .max(50)
      .optional()
      .describe('Named steps, each a query that may read the earlier steps by name; the last one is the result.'),
    catalogs: z
      .object({
        silver: catalogName().optional().describe("The catalog of silver.<table> (default: the target's)."),
        gold: catalogName().optional().describe("The catalog of gold.<table> (default: the target's)."),
      })
      .strict()
      .optional()
      .describe("The platform catalog each layer's tables are read from (default: the target's catalog)."),
  })
  .strict()
  .superRefine((t, ctx) => {
    if ((t.sql === undefined) === (t.steps === undefined)) ctx.addIssue({ code: 'custom', path: [], message: 'give either transform.sql or transform.steps' });
    if (t.sql !== undefined) for (const p of screenProblems(t.sql, [])) ctx.addIssue({ code: 'custom', path: ['sql'], message: p });
    const seen: string[] = [];
    for (const [i, s] of (t.steps ?? []).entries()) {
      if (seen.includes(s.name)) ctx.addIssue({ code: 'custom', path: ['steps', i, 'name'], message: `"${s.name}" names two steps` });
      else if (s.name === 'silver' || s.name === 'gold')
        ctx.addIssue({ code: 'custom', path: ['steps', i, 'name'], message: 'a layer name cannot name a step' });
      for (const p of screenProblems(s.sql, seen)) ctx.addIssue({ code: 'custom', path: ['steps', i, 'sql'], message: p });
      seen.push(s.name);
    }
  })
  .describe("The query that computes the gold table from the tenant's silver and gold tables: either sql or steps.");

/** The screen when the config is loaded: the platform's grants are not known yet (the plan checks three-part names). */
function screenProblems(sql: string, known: readonly string[]): readonly string[] {
  const s = screenTransform(sql, { known });
  return s.ok ? [] : s.problems;
}

const target = z
  .object({
    table: tableName().describe('The gold table: <catalog>.<tenant>_gold.<table> at <storage-root>/gold/<table>.'),
    catalog: catalogName()
      .optional()
      .describe(
        "A catalog of the platform config (default: its default catalog); the transform's tables resolve in it too unless transform.catalogs names their layer's.",
      ),
    format: z.enum(['iceberg', 'delta']).optional().describe("iceberg or delta; must be the catalog's (checked against the platform config)."),
    grain: z.array(columnName()).min(1).describe('The unique key of the result: merged on, and checked to be unique.'),
    mode: z
      .enum(MODES)
      .describe('replace-range: replace the rows of the logical-date range; merge: upsert on the grain; full-refresh: replace the whole table.'),
    'range-column': columnName()
      .optional()
      .describe('replace-range: the DATE column whose range [logical date, + range-days) is replaced (the table is partitioned by it).'),
    'range-days': z.number().int().min(1).max(366).default(1).describe("replace-range: the range's length in days (default 1, at most 366)."),
    ...tableShapeKeys,
  })
  .strict()
  .superRefine((t, ctx) => {
    if (t.mode === 'replace-range' && t['range-column'] === undefined)
      ctx.addIssue({ code: 'custom', path: ['range-column'], message: 'is required with mode = replace-range' });
    if (t.mode !== 'replace-range' && t['range-column'] !== undefined)
      ctx.addIssue({ code: 'custom', path: ['range-column'], message: 'is only used with mode = replace-range' });
    const range = t['range-column'];
    // Replacing a range commits whole partitions: the range column is one of them, as itself.
    if (
      t.mode === 'replace-range' &&
      range !== undefined &&
      t['partition-by'] &&
      !t['partition-by'].some((f) => f.trim().toLowerCase() === range.toLowerCase())
    )
      ctx.addIssue({
        code: 'custom',
        path: ['partition-by'],
        message: `must include the range column ${range} (replace-range replaces whole partitions of it)`,
      });
    t.grain.forEach((g, i) => {
      if (t.grain.indexOf(g) !== i) ctx.addIssue({ code: 'custom', path: ['grain', i], message: `"${g}" appears twice` });
    });
  })
  .describe('The gold table the result is published to, its grain and how it is written.');

const source = z
  .object({
    table: z
      .string()
      .regex(/^(silver|gold)\.[a-z][a-z0-9_]*$/, 'must name a table the transform reads, as it reads it: silver.<table> or gold.<table>')
      .describe(
        'The table of the transform whose commits the run follows, as the transform names it (silver.<table> or gold.<table>): an Iceberg or Delta table.',
      ),
    'date-column': columnName().describe(
      "Its column (DATE, or a TIMESTAMP taken as its UTC date) that says which date of target.range-column a row counts towards: a row the source's new commits added, changed or removed touches its date.",
    ),
    read: sourceRead
      .unwrap()
      .describe(
        'incremental: the dates the source commits since the one gold last recorded touched are recomputed and replaced, and the position recorded in the same commit. full: every date is recomputed and replaced, recording the newest commit (--set source.read=full resumes after a lost position).',
      ),
  })
  .strict()
  .optional()
  .describe(
    'source.read = incremental (replace-range only): each run recomputes exactly the dates the source commits since the last publish touched, and replaces them in one commit that records the position (docs/templates/gold-publish.md, "Incremental inputs").',
  );

const v1 = defineVersion(1, {
  sections: {
    transform,
    target,
    source,
    expectations: z
      .array(expectationSchema)
      .max(100)
      .default([])
      .describe('Up to 100 checks of the result, each with what a failure does (warn, drop, quarantine or fail); default none.'),
  },
  refine: (c, ctx) => {
    if (c.source && c.target.mode !== 'replace-range')
      ctx.addIssue({
        code: 'custom',
        path: ['source', 'read'],
        message: `recomputes the dates the source's changes touch and replaces them: it needs target.mode = replace-range (not ${c.target.mode})`,
      });
    const names = new Set<string>();
    for (const [i, e] of c.expectations.entries()) {
      if (names.has(e.name)) ctx.addIssue({ code: 'custom', path: ['expectations', i, 'name'], message: `"${e.name}" names two expectations` });
      names.add(e.name);
      if (e.type === 'unique' && e.action === 'warn' && c.target.mode === 'merge' && (e.columns === undefined || sameSet(e.columns, c.target.grain)))
        ctx.addIssue({ code: 'custom', path: ['expectations', i, 'action'], message: 'a merge needs a unique grain: use fail, drop or quarantine' });
    }
  },
});

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));

export type GoldPublishSpec = SpecOf<typeof v1.sections>;

// ---------------------------------------------------------------------------------------------
// The transform

interface Publish {
  mode: Mode;
  logicalDate?: IsoDate | undefined;
  /** replace-range: [start, end) is replaced; [previous, start) is the previous publish. */
  range?: { column: string; start: IsoDate; end: IsoDate; previous: IsoDate } | undefined;
  /**
   * source.read: the dates of the range column this run replaces, as one condition over a column:
   * the dates the source's new commits touched, bound when the run has found them (all: a full read).
   */
  dates?: { column: string; scope: (column: Expr) => Expr } | undefined;
}

/** The bound name of the dates an incremental publish replaces. */
const DATES = 'gold.dates';

/** The logical date's UTC date, as the transform's parameters and the range need it (bound as a DATE). */
function publishOf(ctx: JobContext, spec: GoldPublishSpec, parameters: readonly TransformParameter[], sqlPath: string): Publish {
  const date = ctx.logicalDate?.date;
  const mode = spec.target.mode;
  if (spec.source) {
    const ranged = parameters.find((p) => p !== 'logical_date');
    if (ranged !== undefined)
      throw new ConfigError([
        {
          path: sqlPath,
          message: `uses :${ranged}, which source.read leaves unbound: the run replaces the dates the source's changes touched, not a range; compute every date (the run keeps the rows of those dates)`,
        },
      ]);
    if (parameters.length && date === undefined)
      throw new ConfigError([{ path: sqlPath, message: `uses :${parameters[0]} but the run has no logical date (--logical-date)` }]);
    const column = spec.target['range-column']!;
    return { mode, logicalDate: date, dates: { column, scope: (c) => isInBoundDates(c, DATES) } };
  }
  if (mode === 'replace-range' && date === undefined)
    throw new ConfigError([{ path: 'target.mode', message: 'replace-range needs the logical date (--logical-date)' }]);
  if (parameters.length && date === undefined)
    throw new ConfigError([{ path: sqlPath, message: `uses :${parameters[0]} but the run has no logical date (--logical-date)` }]);
  if (mode !== 'replace-range' && parameters.some((p) => p !== 'logical_date'))
    throw new ConfigError([{ path: sqlPath, message: ':range_start and :range_end are only bound with target.mode = replace-range' }]);
  if (mode !== 'replace-range' || date === undefined) return { mode, logicalDate: date };
  const days = spec.target['range-days'];
  return { mode, logicalDate: date, range: { column: spec.target['range-column']!, start: date, end: addDays(date, days), previous: addDays(date, -days) } };
}

/**
 * The transform as one query: each query screened (again: the plan does not trust that the schema
 * ran), now with the tenant's read grants, and its tables rewritten to the tenant's namespaces;
 * steps become CTEs. The origin maps a position of the text sent back to the tenant's SQL.
 */
function transformQuery(
  ctx: JobContext,
  spec: GoldPublishSpec,
  catalog: string,
): {
  parameters: TransformParameter[];
  path: string;
  tables: TableRef[];
  granted: GrantedTableRef[];
  text: (publish: Publish) => { text: string; origin: SqlOrigin };
} {
  const resolve = (ref: TableRef) => tableParts(layerTable(ctx, spec, catalog, ref));
  const readNamespaces = ctx.access?.readNamespaces ?? [];
  const screen = (sql: string, known: readonly string[], path: string): Extract<Screened, { ok: true }> => {
    const s = screenTransform(sql, { known, readNamespaces });
    if (!s.ok) throw new ConfigError(s.problems.map((message) => ({ path, message })));
    return s;
  };
  if (spec.transform.sql !== undefined) {
    const s = screen(spec.transform.sql, [], 'transform.sql');
    return {
      text: (p) => rewriteTransform(s, resolve, (name) => parameterValue(name, p), 'transform.sql'),
      parameters: [...s.parameters],
      path: 'transform.sql',
      tables: [...s.tables],
      granted: [...s.granted],
    };
  }
  const steps = spec.transform.steps ?? [];
  const screened = steps.map((st, i) =>
    screen(
      st.sql,
      steps.slice(0, i).map((x) => x.name),
      `transform.steps[${i}].sql`,
    ),
  );
  return {
    text: (p) =>
      composeStepsWithOrigin(
        steps.map((st, i) => {
          const { text, origin } = rewriteTransform(screened[i]!, resolve, (name) => parameterValue(name, p), `transform.steps[${i}].sql`);
          return { name: st.name, sql: text, origin };
        }),
      ),
    parameters: [...new Set(screened.flatMap((s) => s.parameters))],
    path: 'transform.steps',
    tables: screened.flatMap((s) => s.tables),
    granted: screened.flatMap((s) => s.granted),
  };
}

/**
 * A layer's table in the catalog where that layer lives: silver is often kept in another catalog
 * (and format) than gold, so `transform.catalogs` names it; by default the target's catalog. The
 * name is the tenant's namespace of that catalog either way, and the catalog must be the platform's.
 */
function layerTable(ctx: JobContext, spec: GoldPublishSpec, targetCatalog: string, ref: TableRef): TableName {
  const named = spec.transform.catalogs?.[ref.layer];
  const catalog = named === undefined ? targetCatalog : ctx.catalog(named, `transform.catalogs.${ref.layer}`).name;
  return ctx.tenant.table(catalog, ref.layer, ref.table);
}

/** A parameter's value: a date checked by publishOf (the logical date) or computed from it. */
function parameterValue(p: TransformParameter, publish: Publish): string {
  const date = p === 'range_start' ? publish.range?.start : p === 'range_end' ? publish.range?.end : publish.logicalDate;
  if (date === undefined) throw new ConfigError([{ path: 'logical-date', message: `:${p} needs the logical date (--logical-date)` }]);
  return date;
}

// ---------------------------------------------------------------------------------------------
// The plan

/** The columns of the result the config names (grain, range, expectations), at their paths: the result must have each (78). */
function resultColumns(spec: GoldPublishSpec): RequiredColumn[] {
  const t = spec.target;
  return [
    ...t.grain.map((column, i) => ({ path: `target.grain[${i}]`, column })),
    ...(t['range-column'] !== undefined ? [{ path: 'target.range-column', column: t['range-column'] }] : []),
    ...spec.expectations.flatMap((e, i): RequiredColumn[] => {
      if (e.type === 'not-null' || e.type === 'unique') return (e.columns ?? []).map((column, j) => ({ path: `expectations[${i}].columns[${j}]`, column }));
      if ('column' in e) return [{ path: `expectations[${i}].column`, column: e.column }];
      return [];
    }),
  ];
}

/** The expectations the plan checks: the config's, plus the grain's uniqueness unless declared. */
function allExpectations(spec: GoldPublishSpec): Expectation[] {
  const declared = spec.expectations;
  const grain = spec.target.grain;
  const grainChecked = declared.some((e) => e.type === 'unique' && sameSet(uniqueColumns(e, grain), grain));
  return grainChecked ? declared : [...declared, { name: GRAIN_UNIQUE, type: 'unique', action: 'fail' }];
}

/** What every step carrying tenant logic is marked with: its config paths, and where its SQL came from. */
interface Flagged {
  readonly untrusted: string[];
  readonly sqlOrigin: SqlOrigin;
  readonly mapPosition: PositionMapper;
}

/** The gold table and its quarantine, in the target's catalog. */
interface Gold {
  readonly catalog: CatalogRef;
  readonly target: TableName;
  readonly location: string;
  /** The gold table's partitioning (by default: the range column) and properties, as configured. */
  readonly shape: TableShape;
  readonly quarantine: { readonly table: TableName; readonly location: string };
}

/**
 * The plan, phase by phase as docs/templates/gold-publish.md tells it: judge the tenant's SQL and
 * expressions (before anything is created), create the gold table (and its quarantine) if missing,
 * check every expectation in one pass, then write the quarantine and publish, each one commit.
 */
export function plan(ctx: JobContext, spec: GoldPublishSpec): JobPlan {
  const catalog = tableCatalog(ctx, spec.target.catalog, spec.target.format);
  const qName = `${spec.target.table}${QUARANTINE_SUFFIX}`;
  const gold: Gold = {
    catalog,
    target: ctx.tenant.table(catalog.name, 'gold', spec.target.table),
    location: ctx.tenant.location('gold', spec.target.table),
    shape: tableShape(
      spec.target,
      catalog.format,
      spec.target.mode === 'replace-range' && spec.target['range-column'] ? [{ kind: 'identity', column: spec.target['range-column'] }] : [],
    ),
    quarantine: { table: ctx.tenant.table(catalog.name, 'gold', qName), location: ctx.tenant.location('gold', qName) },
  };
  const transformed = transformQuery(ctx, spec, catalog.name);
  const publish = publishOf(ctx, spec, transformed.parameters, transformed.path);
  const sent = transformed.text(publish);
  // The tables the transform reads, its granted ones included: what plan, validate and lineage list.
  const reads = [
    ...transformed.tables.map((t) => tableParts(layerTable(ctx, spec, catalog.name, t))),
    ...transformed.granted.map((t) => [t.catalog, t.namespace, t.table]),
  ];
  const result = Query.sql(sql.screened(sent.text, reads));
  const expectations = allExpectations(spec);
  const quarantines = expectations.some((e) => e.action === 'quarantine');
  // Every step that carries the transform or an expression is judged by the tenant policy.
  const untrusted = [transformed.path, ...spec.expectations.flatMap((e, i) => (e.type === 'expression' ? [`expectations[${i}].expr`] : []))];
  const flagged: Flagged = { untrusted, sqlOrigin: sent.origin, mapPosition: sentPositionMapper(sent.origin) };
  const pass = checkedRows(ctx, spec, gold, result, expectations, publish);
  const followed = spec.source ? followSource(ctx, spec, catalog, gold, transformed.tables) : undefined;
  const check = queryStep({
    id: 'check',
    ...flagged,
    title: `Check ${expectations.length} expectation(s) on the ${followed ? "touched dates' rows of the " : ''}result in one pass`,
    query: pass.checkQuery,
    columns: outputColumns(pass.checkQuery.rel)!,
    interpret: ([r], facts) => {
      const out = { table: displayTable(gold.target), format: catalog.format, location: gold.location };
      const dates = followed && facts ? followed.dates(facts) : undefined;
      return judge(r ?? {}, expectations, publish, out, dates === undefined ? undefined : dates === '*' ? Number(r?.dates ?? 0) : dates.length);
    },
    // diff: the rows behind each failing row check, as they would be checked.
    samples: ([r]) =>
      expectations.flatMap((e, i) =>
        isRowCheck(e) && Number(r?.[`failed_${i}`] ?? 0) > 0 ? [{ table: displayTable(gold.target), expectation: e.name, rows: pass.failing(i) }] : [],
      ),
  });
  const steps: Step[] = [
    ...(followed ? [...followed.read.steps, followed.touched] : []),
    ...judgePhase(result, pass.judged, transformed.path, resultColumns(spec), quarantines, flagged),
    ...createPhase(gold, result, pass.quarantined, publish, quarantines, flagged),
    check,
    ...writePhase(gold, spec, pass, publish, quarantines, check, flagged, followed?.read),
    // A publish that changes no row still records the position, so the next run does not read the same commits again.
    ...(followed ? [followed.read.recordStep({ when: (facts) => noOp(facts.rows(check)?.[0], publish.mode) })] : []),
    readCommitStep(gold.target, catalog.format),
  ];
  if (!followed) return { steps };
  const { read, dates } = followed;
  const bound = (facts: Facts) => {
    const d = dates(facts);
    return d === undefined || d === '*' ? d : JSON.stringify(d);
  };
  return { steps, bind: (facts) => ({ ...read.bind(facts), [DATES]: bound(facts) }) };
}

/**
 * source.read: the source's commits since the position gold recorded, and the dates their rows
 * touch. A row counts once per side (added, removed); a row that is on both sides the same number
 * of times (Iceberg: the unchanged rows of a rewritten file) changed nothing, and its date is not
 * touched by it. The dates are the source's `date-column` values of what changed, as DATEs.
 */
function followSource(ctx: JobContext, spec: GoldPublishSpec, target: CatalogRef, gold: Gold, reads: readonly TableRef[]) {
  const src = spec.source!;
  const [layer, table] = src.table.split('.') as ['silver' | 'gold', string];
  if (!reads.some((r) => r.layer === layer && r.table === table))
    throw new ConfigError([
      { path: 'source.table', message: `${src.table} is not a table the transform reads (${reads.map((r) => `${r.layer}.${r.table}`).join(', ') || 'none'})` },
    ]);
  if (layer === 'gold' && table === spec.target.table)
    throw new ConfigError([{ path: 'source.table', message: 'is the target itself: a publish cannot follow its own commits' }]);
  const named = spec.transform.catalogs?.[layer];
  const format = named === undefined ? target.format : ctx.catalog(named, `transform.catalogs.${layer}`).format;
  const sourceTable = layerTable(ctx, spec, target.name, { layer, table });
  const read = incrementalRead({ table: sourceTable, format }, { table: gold.target, format: target.format }, src.read, 'source', 'changes');
  const query = read
    .changes(cast(col(src['date-column']), 'date'))
    .aggregate([col(CHANGE.at), col(CHANGE.row)], [alias(fn('sum', col(CHANGE.sign)), 'n')])
    .filter(and(not(eq(col('n'), lit(0))), isNotNull(col(CHANGE.at))))
    .aggregate([col(CHANGE.at)], [])
    .select(alias(cast(col(CHANGE.at), 'string'), 'date'));
  const touched: QueryStep<'date'> = queryStep({
    id: 'read-touched-dates',
    title: `Find the dates of ${src['date-column']} that the rows ${displayTable(sourceTable)}'s new commits added, changed or removed hold`,
    when: (facts) => read.position(facts)?.mode === 'incremental',
    query,
    columns: ['date'],
    interpret: () => ({}),
  });
  /** The dates this run replaces: `*` every date (a full read), else those the changes touched; undefined before they are known. */
  const dates = (facts: Facts): readonly string[] | '*' | undefined => {
    const position = read.position(facts);
    if (!position) return undefined;
    if (position.mode === 'full') return '*';
    const rows = facts.rows(touched);
    return rows?.map((r) => String(r.date)).sort();
  };
  return { read, touched, dates };
}

/**
 * The checked rows: the result with a hash of each row, the lookups the checks need, and one flag
 * per row check; what is written, what is quarantined, and the one-pass check query over them.
 */
function checkedRows(ctx: JobContext, spec: GoldPublishSpec, gold: Gold, result: Query, expectations: Expectation[], publish: Publish) {
  const { target } = gold;
  const grain = spec.target.grain;
  const internal: string[] = [HASH];
  const rowChecks = expectations.flatMap((e, i) => (isRowCheck(e) ? [{ e, i }] : []));
  // The row hash and the tenant's expressions in one node right above the transform: the policy
  // analyses that node with the transform below it, and nothing of the template's joins.
  const custom = rowChecks.filter(({ e }) => e.type === 'expression');
  const judged = result.withColumns([[HASH, rowHash()], ...custom.map(({ e, i }) => [flagColumn(i), rowFailure(e, i)] as const)]);
  // source.read: only the touched dates' rows are checked and written (the filter reaches the source's scan where it can).
  let rows = publish.dates ? judged.filter(publish.dates.scope(col(publish.dates.column))) : judged;
  expectations.forEach((e, i) => {
    if (e.type === 'relationship') {
      const keys = Query.table(tableParts(layerTable(ctx, spec, gold.catalog.name, e.to)))
        .select(alias(col(e['to-column']), refColumn(i)))
        .deduplicate();
      rows = rows.join(keys, eq(col(e.column), col(refColumn(i))), 'left');
      internal.push(refColumn(i));
    }
    if (e.type === 'unique') {
      rows = rows.withColumns([
        [
          UNIQUE_COUNT(i),
          over(
            fn('count', lit(1)),
            uniqueColumns(e, grain).map((c) => col(c)),
            [],
          ),
        ],
      ]);
      internal.push(UNIQUE_COUNT(i));
    }
  });
  if (publish.mode === 'merge') {
    // The table's row for the same grain (its hash): a merge that would change no row is not sent.
    const current = Query.table(tableParts(target)).select(...grain.map((g, j) => alias(col(g), grainCopy(j))), alias(rowHash(), OLD_HASH));
    rows = rows.join(current, and(...grain.map((g, j) => eqNullSafe(col(g), col(grainCopy(j))))), 'left').drop(...grain.map((_, j) => grainCopy(j)));
    internal.push(OLD_HASH);
  }
  const own = rowChecks.filter(({ e }) => e.type !== 'expression');
  if (own.length) rows = rows.withColumns(own.map(({ e, i }) => [flagColumn(i), rowFailure(e, i)] as const));
  const anyOf = (action: RowExpectation['action']) => {
    const flags = rowChecks.filter(({ e }) => e.action === action).map(({ i }) => col(flagColumn(i)));
    return flags.length ? or(...flags) : lit(false);
  };
  internal.push(...rowChecks.map(({ i }) => flagColumn(i)), DROP, QUARANTINE, FAILED);
  const checked = rows.withColumns([
    [DROP, anyOf('drop')],
    [QUARANTINE, anyOf('quarantine')],
    [FAILED, fn('array_compact', fn('array', ...rowChecks.map(({ e, i }) => fn('if', col(flagColumn(i)), lit(e.name), cast(lit(null), 'string')))))],
  ]);
  const kept = and(not(col(DROP)), not(col(QUARANTINE)));
  const quarantined = checked
    .filter(col(QUARANTINE))
    .withColumns([
      [QUARANTINE_COLUMNS.failed, col(FAILED)],
      [QUARANTINE_COLUMNS.logicalDate, cast(lit(publish.logicalDate === undefined ? null : { date: publish.logicalDate }), 'date')],
      [QUARANTINE_COLUMNS.runId, lit(ctx.runId)],
    ])
    .drop(...internal);
  const quarantines = expectations.some((e) => e.action === 'quarantine');
  const checkQuery = checkPass(checked, kept, expectations, rowChecks, publish).join(
    previousPublish(target, publish, quarantines ? gold.quarantine.table : undefined),
    lit(true),
    'inner',
  );
  const failing = (i: number) => checked.filter(col(flagColumn(i))).drop(...internal);
  return { judged: custom.length ? judged : undefined, written: checked.filter(kept).drop(...internal), quarantined, checkQuery, failing };
}

/**
 * The tenant's SQL (and its expressions) judged before any namespace or table is created: the
 * result's columns are analysed (a `SELECT *` carries a silver table's, which come from the source
 * data): one named like the plan's internal columns (`__lake_…`) would be replaced by the
 * template's and dropped from what is written, or make its references ambiguous; with a
 * quarantine, one named like a quarantine column would be overwritten there.
 */
function judgePhase(
  result: Query,
  judged: Query | undefined,
  path: string,
  required: readonly RequiredColumn[],
  quarantines: boolean,
  flagged: Flagged,
): Step[] {
  const checkColumns: Step = {
    ...checkSourceColumns({
      source: result,
      sourceName: "the transform's result",
      configPath: path,
      template: TEMPLATE,
      reserved: { names: quarantines ? Object.values(QUARANTINE_COLUMNS) : [], prefixes: [LAKE_INTERNAL_PREFIX] },
      required,
    }),
    ...flagged,
  };
  if (!judged) return [checkColumns];
  return [
    checkColumns,
    {
      kind: 'checkColumns',
      id: 'check-expectations',
      ...flagged,
      title: "Analyse the expectations' expressions over the result (reads no row)",
      source: judged,
      interpret: () => ({}),
    },
  ];
}

/** Namespace, gold table (partitioned by the range column) and quarantine on first run; then gold's columns are fixed. */
function createPhase(gold: Gold, result: Query, quarantined: Query, publish: Publish, quarantines: boolean, flagged: Flagged): Step[] {
  const { catalog, target, location, quarantine } = gold;
  return [
    createNamespaceStep(target),
    {
      kind: 'ensureTable',
      id: 'create-table',
      ...flagged,
      title: `Create ${displayTable(target)} at ${location} if missing`,
      table: target,
      location,
      configPath: 'target.table',
      // Replacing a range commits whole partitions (Iceberg overwrites by filter file by file).
      create: createTable(result, target, catalog.format, location, gold.shape),
      shape: gold.shape,
    },
    ...(quarantines
      ? [
          {
            kind: 'ensureTable',
            id: 'create-quarantine',
            ...flagged,
            title: `Create ${displayTable(quarantine.table)} if missing`,
            table: quarantine.table,
            location: quarantine.location,
            configPath: 'target.table',
            create: quarantined.limit(0).writeTo(tableParts(quarantine.table), 'create', {
              provider: catalog.format,
              properties: tableProperties(catalog.format, quarantine.location),
              partitionBy: [col(QUARANTINE_COLUMNS.logicalDate)],
            }),
          } satisfies Step,
        ]
      : []),
    {
      kind: 'compareSchemas',
      id: 'check-schema',
      ...flagged,
      title: `Compare the result's columns with ${displayTable(target)}`,
      source: result,
      table: target,
      interpret: (diff) => schemaDecision(diff, displayTable(target)),
    },
  ];
}

/** This publish's quarantine rows, then the publish itself: each only when it changes something. */
function writePhase(
  gold: Gold,
  spec: GoldPublishSpec,
  pass: { written: Query; quarantined: Query },
  publish: Publish,
  quarantines: boolean,
  check: RowsStep<string>,
  flagged: Flagged,
  read: IncrementalRead | undefined,
): Step[] {
  const { target, quarantine } = gold;
  const rangeFilter = publish.range
    ? and(fn('>=', col(publish.range.column), lit({ date: publish.range.start })), fn('<', col(publish.range.column), lit({ date: publish.range.end })))
    : publish.dates?.scope(col(publish.dates.column));
  return [
    ...(quarantines
      ? [
          {
            kind: 'command',
            id: 'write-quarantine',
            ...flagged,
            title: `Replace this publish's rows of ${displayTable(quarantine.table)}`,
            when: (facts: Facts) => facts.count(check.col('quarantined')) + facts.count(check.col('prev_quarantined')) > 0,
            command: pass.quarantined.writeTo(tableParts(quarantine.table), 'overwrite', { overwriteCondition: quarantineScope(publish) }),
          } satisfies Step,
        ]
      : []),
    {
      kind: 'command',
      id: 'publish',
      ...flagged,
      title: `${publish.mode === 'merge' ? 'MERGE the result into' : publish.mode === 'full-refresh' ? 'Replace the whole of' : publish.dates ? 'Replace the touched dates of' : 'Replace the range of'} ${displayTable(target)}`,
      when: (facts) => !noOp(facts.rows(check)?.[0], publish.mode),
      // source.read: the position rides in the same commit as the dates it was computed from.
      ...(read ? { stamp: read.stamp } : {}),
      command: publishCommand(pass.written, target, publish, spec.target.grain, rangeFilter),
    },
  ];
}

/** A hash of the whole row (its columns by name and value, NULLs included): what a no-op is recognised by. */
function rowHash(): Expr {
  return fn('xxhash64', fn('to_json', fn('struct', star())));
}

const hashSum = (cond: Expr | undefined): Expr =>
  cast(fn('coalesce', fn('sum', fn('if', cond ?? lit(true), cast(col(HASH), 'decimal(38,0)'), lit(0))), lit(0)), 'string');

/**
 * Every expectation in one aggregate over the checked rows: per row check the failing rows, the
 * rows kept, dropped and quarantined, the newest timestamp of each freshness check, rows outside
 * the replaced range, and the sum of the kept rows' hashes (a no-op is a publish whose rows and
 * hash sum equal what it replaces).
 */
function checkPass(checked: Query, kept: Expr, expectations: Expectation[], rowChecks: { e: RowExpectation; i: number }[], publish: Publish): Query {
  const countIf = (x: Expr) => fn('count_if', x);
  const aggs: Expr[] = [
    alias(fn('count', lit(1)), 'rows'),
    alias(countIf(kept), 'written'),
    alias(countIf(col(QUARANTINE)), 'quarantined'),
    alias(countIf(and(col(DROP), not(col(QUARANTINE)))), 'dropped'),
    alias(fn('if', fn('>', fn('count', lit(1)), lit(0)), hashSum(kept), lit('0')), 'written_hash'),
    ...rowChecks.map(({ i }) => alias(countIf(col(flagColumn(i))), `failed_${i}`)),
  ];
  if (publish.range) {
    const c = col(publish.range.column);
    aggs.push(
      alias(countIf(and(kept, or(isNull(c), fn('<', c, lit({ date: publish.range.start })), fn('>=', c, lit({ date: publish.range.end }))))), 'out_of_range'),
    );
  }
  // A full read replaces every date: the status counts those the result has.
  if (publish.dates) aggs.push(alias({ kind: 'fn', name: 'count', args: [col(publish.dates.column)], distinct: true }, 'dates'));
  if (publish.mode === 'merge') aggs.push(alias(countIf(and(kept, not(eqNullSafe(col(OLD_HASH), col(HASH))))), 'changed'));
  expectations.forEach((e, i) => {
    if (e.type !== 'freshness') return;
    // Measured against the end of the logical date (a rerun of an old date judges it as it was), else now.
    const end = publish.range?.end ?? (publish.logicalDate ? addDays(publish.logicalDate, 1) : undefined);
    const reference = end ? cast(lit({ date: end }), 'timestamp') : fn('current_timestamp');
    const newest = fn('max', col(e.column));
    const limit = fn('-', reference, fn('make_dt_interval', lit(0), lit(0), lit(0), lit(Math.round(e['max-age-hours'] * 3600))));
    aggs.push(alias(cast(newest, 'string'), `newest_${i}`), alias(fn('coalesce', fn('>=', newest, limit), lit(false)), `fresh_${i}`));
  });
  return checked.aggregate([], aggs);
}

/**
 * What the table holds now, in one aggregate over it: the rows and hash sum of what this publish
 * replaces (for the no-op), the rows of the previous publish (for row-count: the previous range,
 * or the whole table), and the quarantined rows of this publish's logical date.
 */
function previousPublish(target: TableName, publish: Publish, quarantine: TableName | undefined): Query {
  const withHash = Query.table(tableParts(target)).withColumns([[HASH, rowHash()]]);
  let scope: Expr | undefined;
  let previous: Expr | undefined;
  if (publish.range) {
    const c = col(publish.range.column);
    scope = and(fn('>=', c, lit({ date: publish.range.start })), fn('<', c, lit({ date: publish.range.end })));
    previous = and(fn('>=', c, lit({ date: publish.range.previous })), fn('<', c, lit({ date: publish.range.start })));
  }
  // source.read: the touched dates as the table holds them now are both what is replaced and what row-count compares with.
  if (publish.dates) scope = previous = publish.dates.scope(col(publish.dates.column));
  const table = withHash.aggregate(
    [],
    [
      alias(scope ? fn('count_if', scope) : fn('count', lit(1)), 'scope_rows'),
      alias(fn('if', fn('>', fn('count', lit(1)), lit(0)), hashSum(scope), lit('0')), 'scope_hash'),
      alias(previous ? fn('count_if', previous) : fn('count', lit(1)), 'prev_rows'),
    ],
  );
  if (!quarantine) return table;
  const q = Query.table(tableParts(quarantine)).aggregate([], [alias(fn('count_if', quarantineScope(publish)), 'prev_quarantined')]);
  return table.join(q, lit(true), 'inner');
}

/** The quarantine rows a publish replaces: its logical date's (all of them for a full refresh). */
function quarantineScope(publish: Publish): Expr {
  if (publish.mode === 'full-refresh') return lit(true);
  // source.read: the quarantined rows of the dates recomputed (the quarantine has the result's columns).
  if (publish.dates) return publish.dates.scope(col(publish.dates.column));
  const c = col(QUARANTINE_COLUMNS.logicalDate);
  return publish.logicalDate === undefined ? isNull(c) : eq(c, lit({ date: publish.logicalDate }));
}

function publishCommand(written: Query, target: TableName, publish: Publish, grain: readonly string[], rangeFilter: Expr | undefined): Cmd {
  switch (publish.mode) {
    case 'full-refresh':
      return written.writeTo(tableParts(target), 'overwrite', { overwriteCondition: lit(true) });
    case 'replace-range':
      return written.writeTo(tableParts(target), 'overwrite', { overwriteCondition: rangeFilter! });
    case 'merge':
      return written.as(SOURCE).mergeInto(tableParts(target), and(...grain.map((g) => eqNullSafe(col(target.table, g), col(SOURCE, g)))), {
        whenMatched: [{ action: 'updateAll' }],
        whenNotMatched: [{ action: 'insertAll' }],
      });
  }
}

/** Would the publish change nothing? Then it is not sent: no empty commit on a rerun. */
export function noOp(r: Row | undefined, mode: Mode): boolean {
  if (!r) return false;
  if (mode === 'merge') return Number(r.changed ?? 1) === 0;
  return Number(r.written) === Number(r.scope_rows) && String(r.written_hash) === String(r.scope_hash);
}

/** The check pass's row, judged: the status's expectations, and a failure (65) if a `fail` expectation failed. */
export function judge(r: Row, expectations: Expectation[], publish: Publish, out: { table: string; format: string; location: string }, dates?: number) {
  const n = (k: string) => Number(r[k] ?? 0);
  const reports = expectations.map((e, i): ExpectationReport => {
    if (e.type === 'row-count') {
      const [rows, previous] = [n('written'), n('prev_rows')];
      const changePercent = previous === 0 ? null : Math.round((Math.abs(rows - previous) / previous) * 10_000) / 100;
      const failed = changePercent !== null && changePercent > e['max-change-percent'];
      return {
        name: e.name,
        type: e.type,
        action: e.action,
        outcome: failed ? outcomeOf(e.action) : 'passed',
        failedRows: 0,
        observed: { rows, previous, changePercent },
      };
    }
    if (e.type === 'freshness') {
      const failed = r[`fresh_${i}`] !== true;
      const newest = r[`newest_${i}`];
      return {
        name: e.name,
        type: e.type,
        action: e.action,
        outcome: failed ? outcomeOf(e.action) : 'passed',
        failedRows: 0,
        observed: { newest: newest === null || newest === undefined ? null : String(newest) },
      };
    }
    const failedRows = n(`failed_${i}`);
    return { name: e.name, type: e.type, action: e.action, outcome: failedRows > 0 ? outcomeOf(e.action) : 'passed', failedRows };
  });
  const metrics = { rows: n('rows'), written: n('written'), dropped: n('dropped'), quarantined: n('quarantined'), ...(dates === undefined ? {} : { dates }) };
  const changes = publish.mode === 'merge' ? n('changed') > 0 : !noOp(r, publish.mode);
  const output = { ...out, committed: changes, metrics, expectations: reports };
  const failed = reports.filter((x) => x.outcome === 'failed');
  // A stopped publish wrote, dropped and quarantined nothing: its metrics say so (the expectations say what it found).
  const none = { ...output, committed: false, metrics: { ...metrics, written: 0, dropped: 0, quarantined: 0 } };
  if (failed.length) {
    const what = failed.map((x) => (x.failedRows ? `${x.name} (${x.type}): ${x.failedRows} row(s)` : `${x.name} (${x.type}): ${JSON.stringify(x.observed)}`));
    return {
      output: none,
      fail: new DataError(`expectation(s) failed, nothing was published: ${what.join('; ')}`, { code: 'EXPECTATION_FAILED' }),
    };
  }
  if (publish.range && n('out_of_range') > 0)
    return {
      output: none,
      fail: new DataError(
        `the result has ${n('out_of_range')} row(s) whose ${publish.range.column} is outside [${publish.range.start}, ${publish.range.end}), the range this publish replaces; nothing was published (filter the transform on :range_start and :range_end)`,
        { code: 'OUT_OF_RANGE' },
      ),
    };
  return { output, metrics: { rowsRead: metrics.rows, rowsWritten: changes ? metrics.written : 0 } };
}

const outcomeOf = (action: string): ExpectationReport['outcome'] =>
  action === 'warn' ? 'warned' : action === 'drop' ? 'dropped' : action === 'quarantine' ? 'quarantined' : 'failed';

/** Gold's columns are fixed when it is created: a result with other columns or types stops the run (65). */
export function schemaDecision(diff: SchemaDiff, table: string): { fail?: DataError } {
  const parts = [
    ...(diff.added.length ? [`new columns ${diff.added.map((f) => `${f.name} ${f.type}`).join(', ')}`] : []),
    ...(diff.missing.length ? [`lacks ${diff.missing.join(', ')}`] : []),
    ...(diff.changed.length ? [`changes the type of ${diff.changed.map((c) => `${c.name} (${c.tableType} -> ${c.sourceType})`).join(', ')}`] : []),
  ];
  if (!parts.length) return {};
  return {
    fail: new DataError(
      `the result's columns differ from ${table}: it ${parts.join('; ')}. Gold's columns are fixed when it is created (cast in the transform, or publish to a new table)`,
      {
        code: 'SCHEMA_CHANGED',
      },
    ),
  };
}

export const goldPublish = defineTemplate({
  name: TEMPLATE,
  layer: 'gold',
  summary:
    "Run the tenant's SQL transform over its silver and gold tables (screened, rewritten to its namespaces, checked by the tenant read policy), check expectations in one pass (warn, drop, quarantine, fail) and publish the result into a gold Iceberg or Delta table: replace the logical date's range, merge on the grain, or replace the whole table, atomically.",
  stability: 'experimental',
  newest: v1,
  plan,
});
