import { z } from 'zod';
import { DataError } from '../../core/errors.js';
import { type Instant, instant, instantText, parseInstant } from '../../core/instant.js';
import { type TableName, displayTable, tableParts } from '../../core/naming.js';
import { catalogName, columnName, expression, isoDate, name, tableName } from '../../core/config/validate.js';
import type { ConfigExpression } from '../../core/expression/index.js';
import { type Expr, alias, col, eq, fn, isNull, lit, not, or, star } from '../../spark/plan/expressions.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import { Query } from '../../spark/plan/query.js';
import type { CatalogRef, Facts, JobContext, JobPlan, Row, Step } from '../template.js';
import { type IncrementalRead, checkSourceRead, incrementalRead, sourceRead } from '../incremental.js';
import { materializeStep, queryStep } from '../steps.js';
import { createNamespaceStep, createTable, readCommitStep, tableCatalog } from '../tables.js';
import { type TableShape, tableShape, tableShapeKeys } from '../table-shape.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { BRONZE_SESSION_CONF, BRONZE_STAMPS, bronzeRef, readBronze } from '../layers/bronze.js';
import { type RequiredColumn, checkSourceColumns, reservedIn } from '../source-columns.js';
import { silverRef } from '../layers/silver.js';
import {
  BREACHES,
  type BatchInput,
  DIM_KEY,
  HISTORY_COLUMNS,
  type HistorySpec,
  INTERNAL_PREFIX,
  MERGE,
  batchRows,
  closeMissing,
  combined,
  invariantBreaches,
  mergeCounts,
  mergeSource,
  pointChecks,
  pointsOfRows,
  shapeOf,
  storedOfBatch,
  storedPoints,
  versions,
} from './scd2-dim-load.history.js';

/**
 * scd2-dim-load: keep a Kimball SCD type 2 dimension in the tenant's gold layer from a silver table
 * (or a bronze snapshot). v1 is the seed project's shape: the source is the current state, dated by
 * `effective-at`. v2 adds history from events (`sequence-by`): deletes, late events placed where they
 * belong, type-1 columns, tombstone versions and `close-missing` for full snapshots.
 *
 * Every load computes the new history of the keys it touches, checks the invariants of the
 * dimension before and of the new state, then commits it with one MERGE (closing a version and
 * opening the next is one commit); a breach fails the run (65) with the table untouched.
 */

const TEMPLATE = 'scd2-dim-load';
const SOURCE = '__scd_source';
/** The batch's rows, packed (`batchRows`), kept by check-batch for the run. */
const BATCH = '__scd_batch';
/** The stored versions the load compares with (the touched keys', or all with close-missing), kept by check-dimension. */
const STORED = '__scd_stored';
/** The batch's and the stored points in one history (`combined`), kept by check-history. */
const POINTS = '__scd_points';
/** The new state of the touched keys (`versions`), kept by check-result: what measure counts. */
const NEW_STATE = '__scd_new_state';

// ---------------------------------------------------------------------------------------------
// Config schemas

const columnList = () => z.array(columnName()).min(1);

/** An instant with its zone, e.g. 2026-07-09T00:00:00Z: a version boundary means the same everywhere. */
const instantField = () =>
  z.iso
    .datetime({ offset: true, message: 'must be an ISO-8601 instant with a zone, e.g. 2026-07-09T00:00:00Z' })
    // Spark keeps microseconds: a seventh digit would be dropped without a word.
    .refine((v) => !/\.\d{7,}/.test(v) || parseInstant(v) !== undefined, 'has more fractional digits than the microseconds Spark keeps')
    .describe('The version boundary of this load (snapshot sources). Default: --logical-date at 00:00 UTC, else the time the plan is built.');

const dimensionV1 = z
  .object({
    'natural-key': columnList().describe('The business key columns'),
    'tracked-columns': columnList().optional().describe('Type-2 columns: a change in any opens a new version (default: every column that is not a key)'),
    'exclude-columns': columnList().optional().describe('Columns kept out of the dimension'),
    'effective-at': instantField().optional(),
  })
  .strict()
  .describe("The dimension's key and the roles of its columns");

const v1Sections = {
  source: z
    .object({
      table: name().describe('The silver table holding the current state (in <tenant>_silver)'),
      catalog: catalogName().optional().describe("The platform's catalog of the source (default: its default catalog)"),
      where: expression('source.where').optional().describe('Rows of the source to load (a filter expression)'),
    })
    .strict()
    .describe('The silver table the dimension is loaded from'),
  dimension: dimensionV1,
  target: z
    .object({
      table: tableName().describe("The dimension's name (in <tenant>_gold)"),
      catalog: catalogName().optional().describe("The platform's catalog of the dimension (default: its default catalog)"),
    })
    .strict()
    .describe('The gold dimension'),
};

const sourceV2 = z
  .object({
    table: name().describe('The source table (in <tenant>_silver or <tenant>_bronze)'),
    layer: z.enum(['silver', 'bronze']).default('silver').describe('silver (a table of the tenant) or bronze (what jdbc-snapshot-ingest wrote)'),
    format: z
      .enum(['parquet', 'iceberg', 'delta'])
      .optional()
      .describe("silver: iceberg or delta (default: the catalog's); bronze: parquet (default), iceberg or delta"),
    catalog: catalogName().optional().describe("The platform's catalog of the source (iceberg and delta)"),
    'snapshot-date': isoDate().optional().describe('bronze only: the snapshot date to read, e.g. --set source.snapshot-date={{ ds }}'),
    where: expression('source.where').optional().describe('Rows of the source to load (a filter expression)'),
    read: sourceRead,
  })
  .strict()
  .describe('The silver table or bronze snapshot the dimension is loaded from')
  .superRefine((s, ctx) => {
    checkSourceRead(s, ctx, 'source.read');
    if (s.layer === 'silver' && s.format === 'parquet') ctx.addIssue({ code: 'custom', path: ['format'], message: 'silver tables are iceberg or delta' });
    if (s.layer === 'silver' && s['snapshot-date'] !== undefined)
      ctx.addIssue({ code: 'custom', path: ['snapshot-date'], message: 'applies to bronze sources (source.layer = bronze)' });
    if (s.layer === 'bronze' && (s.format ?? 'parquet') === 'parquet' && s.catalog !== undefined)
      ctx.addIssue({ code: 'custom', path: ['catalog'], message: 'applies to iceberg and delta tables; parquet files need no catalog' });
  });

const v2 = defineVersion(2, {
  sections: {
    source: sourceV2,
    dimension: dimensionV1
      .extend({
        'type1-columns': columnList().optional().describe('Overwritten in place in every version of the key with the latest value; never open a version'),
      })
      .describe("The dimension's key and the roles of its columns"),
    history: z
      .object({
        'sequence-by': columnName().optional().describe('The column (a timestamp) that dates each event: the source is a change feed, every row an event'),
        'op-column': columnName().optional().describe('The column holding the operation of each row (a delete value deletes the key)'),
        'delete-values': z.array(z.string().min(1)).min(1).optional().describe('Values of history.op-column that delete the key (default: ["d"])'),
        'delete-when': expression('history.delete-when').optional().describe('A filter expression: rows it holds for delete the key'),
        tombstones: z.boolean().default(false).describe('A delete opens a tombstone version (_scd_deleted = true) instead of only closing the current one'),
        'close-missing': z.boolean().default(false).describe('Snapshot sources: keys absent from the snapshot are deleted at effective-at'),
        'late-events': z
          .enum(['place', 'refuse'])
          .default('place')
          .describe("place: an event older than the key's latest version splits the interval it falls into; refuse: 65"),
      })
      .strict()
      .describe('How the history is built: change feeds, deletes, tombstones, late events')
      .default({ tombstones: false, 'close-missing': false, 'late-events': 'place' }),
    target: z
      .object({
        table: tableName().describe("The dimension's name (in <tenant>_gold)"),
        catalog: catalogName().optional().describe("The platform's catalog of the dimension (default: its default catalog)"),
        format: z.enum(['iceberg', 'delta']).optional().describe('iceberg or delta, checked against the catalog'),
        ...tableShapeKeys,
      })
      .strict()
      .describe('The gold dimension'),
  },
  refine: (c, ctx) => {
    checkColumns(c, ctx);
    if (c.source.read !== undefined && c.history['close-missing'])
      ctx.addIssue({
        code: 'custom',
        path: ['history', 'close-missing'],
        message: 'cannot be combined with source.read: an incremental batch holds only the changed rows, so every other key would be closed',
      });
  },
});

/** The spec the plan is built from: the newest version's config. */
export type Scd2DimLoadSpec = SpecOf<typeof v2.sections>;

/** v1: a silver table's current state, dated by effective-at; no deletes; a late effective-at is refused. */
const v1 = defineVersion(1, { sections: v1Sections, refine: (c, ctx) => checkColumns(c, ctx) }).migrate((c): Scd2DimLoadSpec => ({
  tenant: c.tenant,
  source: { table: c.source.table, layer: 'silver', catalog: c.source.catalog, where: c.source.where },
  dimension: c.dimension,
  history: { tombstones: false, 'close-missing': false, 'late-events': 'refuse' },
  target: c.target,
}));

interface ColumnRoles {
  dimension: {
    'natural-key': string[];
    'tracked-columns'?: string[] | undefined;
    'exclude-columns'?: string[] | undefined;
    'type1-columns'?: string[] | undefined;
    'effective-at'?: string | undefined;
  };
  history?: {
    'sequence-by'?: string | undefined;
    'op-column'?: string | undefined;
    'delete-values'?: string[] | undefined;
    'delete-when'?: unknown;
    'close-missing'?: boolean;
  };
}

/** Each column has one role; reserved names are refused; the history options fit together. */
function checkColumns(c: ColumnRoles, ctx: z.RefinementCtx): void {
  const d = c.dimension;
  const h = c.history ?? {};
  const roles: [string, readonly string[]][] = [
    ['dimension.natural-key', d['natural-key']],
    ['dimension.tracked-columns', d['tracked-columns'] ?? []],
    ['dimension.type1-columns', d['type1-columns'] ?? []],
    ['dimension.exclude-columns', d['exclude-columns'] ?? []],
    ['history.sequence-by', h['sequence-by'] ? [h['sequence-by']] : []],
    ['history.op-column', h['op-column'] ? [h['op-column']] : []],
  ];
  const seen = new Map<string, string>();
  for (const [path, cols] of roles)
    cols.forEach((x, i) => {
      const at: (string | number)[] = [...path.split('.'), ...(cols.length > 1 || path.startsWith('dimension') ? [i] : [])];
      if (reservedIn([x], { names: [...HISTORY_COLUMNS, ...BRONZE_STAMPS], prefixes: [INTERNAL_PREFIX] }).length)
        ctx.addIssue({ code: 'custom', path: at, message: `"${x}" is a reserved column name (history, internal or bronze metadata)` });
      const other = seen.get(x.toLowerCase());
      if (other !== undefined) ctx.addIssue({ code: 'custom', path: at, message: `"${x}" is already in ${other}` });
      else seen.set(x.toLowerCase(), path);
    });
  if (h['sequence-by'] !== undefined && d['effective-at'] !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['dimension', 'effective-at'],
      message: 'dates snapshot sources; with history.sequence-by each event is dated by its own column',
    });
  if (h['close-missing'] && h['sequence-by'] !== undefined)
    ctx.addIssue({ code: 'custom', path: ['history', 'close-missing'], message: 'applies to full snapshots, not to change feeds (history.sequence-by)' });
  if (h['delete-values'] && h['op-column'] === undefined)
    ctx.addIssue({ code: 'custom', path: ['history', 'delete-values'], message: 'needs history.op-column (which column holds the operation?)' });
  if (h['delete-when'] !== undefined && h['op-column'] !== undefined)
    ctx.addIssue({ code: 'custom', path: ['history', 'delete-when'], message: 'use either history.delete-when or history.op-column/delete-values, not both' });
}

// ---------------------------------------------------------------------------------------------
// The plan

/** The source columns the config names (not exclude-columns: excluding a column the source lacks changes nothing). */
function requiredColumns(spec: Scd2DimLoadSpec): RequiredColumn[] {
  const { dimension: d, history: h } = spec;
  const list = (path: string, cols: readonly string[] | undefined) => (cols ?? []).map((column, i) => ({ path: `${path}[${i}]`, column }));
  return [
    ...list('dimension.natural-key', d['natural-key']),
    ...list('dimension.tracked-columns', d['tracked-columns']),
    ...list('dimension.type1-columns', d['type1-columns']),
    ...(h['sequence-by'] ? [{ path: 'history.sequence-by', column: h['sequence-by'] }] : []),
    ...(h['op-column'] ? [{ path: 'history.op-column', column: h['op-column'] }] : []),
  ];
}

/**
 * The boundary of a snapshot load, to the microsecond: effective-at, else the logical date (a
 * date's midnight UTC), else the run's clock to the second.
 */
function snapshotInstant(ctx: JobContext, effectiveAt: string | undefined): Instant {
  if (effectiveAt !== undefined) return parseInstant(effectiveAt)!;
  if (ctx.logicalDate) return ctx.logicalDate.instant;
  return instant(ctx.clock.micros - (ctx.clock.micros % 1_000_000n));
}

function opDelete(op: string | undefined, values: string[] | undefined): Expr {
  // A NULL op is an upsert: only an explicit delete value deletes.
  return op ? fn('coalesce', fn('in', col(op), ...(values ?? ['d']).map((v) => lit(v))), lit(false)) : lit(false);
}

/** Where the dimension is, and what the load is made of (docs/templates/scd2-dim-load.md, "Semantics"). */
interface Load {
  readonly catalog: CatalogRef;
  readonly target: TableName;
  readonly location: string;
  /** The dimension's partitioning and properties, as configured. */
  readonly shape: TableShape;
  readonly hs: HistorySpec;
  /** Change feed (history.sequence-by): each event dated by its own column. */
  readonly events: boolean;
  /** A snapshot's instant (effective-at, the logical date, the run's clock), at microseconds. */
  readonly at: Instant | undefined;
  /** close-missing with a snapshot: keys absent from it are deleted at `at`. */
  readonly closing: boolean;
  readonly sourceName: string;
}

/**
 * The plan, phase by phase: read and check the batch (the one step with config logic), create the
 * dimension if missing, check it as stored, place the batch in its history and check the new state,
 * measure, then commit the new history with one MERGE and read the commit the load left.
 */
function plan(ctx: JobContext, spec: Scd2DimLoadSpec): JobPlan {
  const { dimension: d, history: h } = spec;
  const catalog = tableCatalog(ctx, spec.target.catalog, spec.target.format, 'target');
  const source = readSource(ctx, spec, { table: ctx.tenant.table(catalog.name, 'gold', spec.target.table), format: catalog.format });
  const events = h['sequence-by'] !== undefined;
  const at = events ? undefined : snapshotInstant(ctx, d['effective-at']);
  const deleteWhen: ConfigExpression | undefined = h['delete-when'];
  const load: Load = {
    catalog,
    target: ctx.tenant.table(catalog.name, 'gold', spec.target.table),
    location: ctx.tenant.location('gold', spec.target.table),
    shape: tableShape(spec.target, catalog.format),
    hs: {
      keys: d['natural-key'],
      tracked: d['tracked-columns'],
      type1: d['type1-columns'] ?? [],
      tombstones: h.tombstones,
      gapsAllowed: !h.tombstones && (h['op-column'] !== undefined || deleteWhen !== undefined || h['close-missing']),
    },
    events,
    at,
    closing: h['close-missing'] && at !== undefined,
    sourceName: source.name,
  };
  const batch: BatchInput = {
    rows: source.rows,
    ts: events ? col(h['sequence-by']!) : lit({ timestamp: at! }),
    deletes: deleteWhen ? fn('coalesce', configExpr(deleteWhen), lit(false)) : opDelete(h['op-column'], h['delete-values']),
    drop: [
      ...(spec.source.layer === 'bronze' ? BRONZE_STAMPS : []),
      ...(h['op-column'] ? [h['op-column']] : []),
      ...(events ? [h['sequence-by']!] : []),
      ...(d['exclude-columns'] ?? []),
    ],
  };
  const untrusted = [...(spec.source.where ? ['source.where'] : []), ...(deleteWhen ? ['history.delete-when'] : [])];
  const measured = measureStep(load);
  const changes = (facts: Facts) => facts.count(measured.col('inserted')) + facts.count(measured.col('updated')) + facts.count(measured.col('deleted'));
  const { incremental } = source;
  const steps: Step[] = [
    ...source.checks,
    checkBatchStep(load, batch, untrusted, spec.source.where !== undefined, incremental !== undefined),
    ...createPhase(load),
    ...historyPhase(load, h['late-events']),
    measured,
    mergeStep(load, changes, incremental),
    // Incremental, a batch that changes no version: its position still needs a commit of the dimension.
    ...(incremental ? [incremental.recordStep({ when: (facts) => changes(facts) === 0 })] : []),
    readCommitStep(load.target, catalog.format),
  ];
  return {
    steps,
    ...(spec.source.layer === 'bronze' ? { sessionConf: BRONZE_SESSION_CONF } : {}),
    ...(incremental ? { bind: incremental.bind } : {}),
  };
}

/** The source: a silver table, or bronze (files or a table), filtered by source.where; its columns checked first. */
function readSource(
  ctx: JobContext,
  spec: Scd2DimLoadSpec,
  target: { table: TableName; format: 'iceberg' | 'delta' },
): { rows: Query; checks: Step[]; name: string; incremental?: IncrementalRead } {
  const s = spec.source;
  let rows: Query;
  let checks: Step[];
  let name: string;
  let incremental: IncrementalRead | undefined;
  if (s.layer === 'silver') {
    const ref = silverRef(ctx, { table: s.table, catalog: s.catalog, format: s.format === 'parquet' ? undefined : s.format }, 'source');
    // source.read: the commits since the position the dimension recorded (docs/contracts.md, "Incremental reads").
    if (s.read !== undefined) incremental = incrementalRead({ table: ref.table, format: ref.catalog.format }, target, s.read);
    rows = incremental ? incremental.rows : Query.table(tableParts(ref.table));
    checks = incremental ? incremental.steps : [];
    name = displayTable(ref.table);
  } else {
    const ref = bronzeRef(ctx, { table: s.table, format: s.format ?? 'parquet', catalog: s.catalog }, 'source');
    if (s.read !== undefined && ref.kind === 'table') incremental = incrementalRead({ table: ref.table, format: ref.format }, target, s.read);
    const read = incremental ? { rows: incremental.rows, checks: incremental.steps } : readBronze(ref, s['snapshot-date'] ? [s['snapshot-date']] : undefined);
    rows = read.rows;
    checks = read.checks;
    name = ref.name;
  }
  // The source's columns before any config logic: one named like the dimension's history columns
  // or the plan's internal ones (`__scd_…`) would be replaced or shadowed by the template's.
  const columns = checkSourceColumns({
    source: rows,
    sourceName: name,
    configPath: 'source.table',
    template: TEMPLATE,
    reserved: { names: HISTORY_COLUMNS, prefixes: [INTERNAL_PREFIX] },
    required: requiredColumns(spec),
  });
  return { rows: s.where ? rows.filter(configExpr(s.where)) : rows, checks: [...checks, columns], name, ...(incremental ? { incremental } : {}) };
}

/**
 * The batch is read, filtered and packed once and kept for the run: every later step reads those
 * rows, not the source. Only this step carries config logic (source.where, history.delete-when), so
 * it is the one the tenant policy judges, before anything is created.
 */
function checkBatchStep(load: Load, batch: BatchInput, untrusted: string[], filtered: boolean, incremental: boolean): Step {
  return materializeStep({
    id: 'check-batch',
    ...(untrusted.length ? { untrusted } : {}),
    title: `Check the batch in ${load.sourceName}: rows, NULL keys${load.events ? ' or sequences' : ''}, different rows for one key and instant`,
    name: BATCH,
    query: batchRows(load.hs, batch),
    check: batchChecks(load.hs, Query.materialized(BATCH)),
    columns: ['rows', 'null_groups', 'null_example', 'ties', 'tie_example'],
    interpret: ([r]) => interpretBatch(r ?? {}, load.sourceName, filtered, load.events, incremental),
  });
}

const fromBatch = (load: Load) => pointsOfRows(load.hs, Query.materialized(BATCH));

/** Namespace and dimension on first run, from the batch's shape; then its columns are fixed. */
function createPhase(load: Load): Step[] {
  const { target, location, catalog } = load;
  const shape = shapeOf(load.hs, fromBatch(load));
  return [
    createNamespaceStep(target),
    {
      kind: 'ensureTable',
      id: 'create-table',
      title: `Create ${displayTable(target)} at ${location} if missing`,
      table: target,
      location,
      configPath: 'target.table',
      create: createTable(shape, target, catalog.format, location, load.shape),
      shape: load.shape,
    },
    {
      kind: 'compareSchemas',
      id: 'check-schema',
      title: `Compare the batch's columns with ${displayTable(target)}`,
      source: shape,
      table: target,
      interpret: (diff) => {
        const problems = [
          ...diff.missing.map((c) => `${c} is missing from the batch`),
          ...diff.added.map((c) => `${c.name} ${c.type} is new`),
          ...diff.changed.map((c) => `${c.name} is ${c.sourceType} in the batch but ${c.tableType} in the dimension`),
        ];
        return problems.length
          ? {
              fail: new DataError(
                `the batch's columns differ from ${displayTable(target)}: ${problems.join('; ')}; a dimension's columns are fixed when it is created`,
                { code: 'SCHEMA_CHANGED' },
              ),
            }
          : {};
      },
    },
  ];
}

/** The stored versions of the keys this load touches (with close-missing: every key). */
const storedOf = (load: Load, dimension: Query) => (load.closing ? dimension : storedOfBatch(load.hs, dimension, fromBatch(load)));

/** The change set from a copy of the stored versions: the batch placed in their history, the new state, what the MERGE does. */
function changeSet(load: Load, stored: Query) {
  const newPoints = load.closing ? closeMissing(load.hs, fromBatch(load), stored, lit({ timestamp: load.at! })) : fromBatch(load);
  const points = combined(load.hs, storedPoints(load.hs, stored), newPoints);
  const newState = versions(load.hs, points);
  return { points, newState, source: mergeSource(newState, stored) };
}

/**
 * The checks read the stored versions check-dimension kept (one scan of the dimension for all of
 * them), and each keeps what it derived for the next: check-history the points, check-result the
 * new state. Three queries rather than one: a single plan holding the history three times takes
 * Spark's planner minutes (it grows faster than the plan), three plans a third each.
 */
function historyPhase(load: Load, late: 'place' | 'refuse'): Step[] {
  const { target, hs } = load;
  const table = Query.table(tableParts(target));
  const checked = changeSet(load, Query.materialized(STORED));
  const when = load.at ? ` at ${instantText(load.at)}` : '';
  return [
    materializeStep({
      id: 'check-dimension',
      title: `Check the invariants of ${displayTable(target)} as stored`,
      name: STORED,
      query: storedOf(load, table),
      // With close-missing the kept rows are the whole dimension: checked there, not read again.
      check: invariantBreaches(hs, load.closing ? Query.materialized(STORED) : table),
      columns: BREACH_COLUMNS,
      interpret: ([r]) =>
        breachEffect(r ?? {}, `${displayTable(target)} already breaks the SCD2 invariants (it was changed outside this template); nothing was written`),
    }),
    materializeStep({
      id: 'check-history',
      title: `Place the batch's points${when} in the stored history: conflicts${late === 'refuse' ? ' and late points' : ''}`,
      name: POINTS,
      query: checked.points,
      check: pointChecks(hs, Query.materialized(POINTS)),
      columns: ['conflicts', 'conflict_example', 'late', 'late_example'],
      interpret: ([r]) => interpretPoints(r ?? {}, late, load.events),
    }),
    materializeStep({
      id: 'check-result',
      title: 'Check the invariants of the new history before committing it',
      name: NEW_STATE,
      query: versions(hs, Query.materialized(POINTS)),
      check: invariantBreaches(hs, Query.materialized(NEW_STATE)),
      columns: BREACH_COLUMNS,
      interpret: ([r]) => breachEffect(r ?? {}, `the new history of ${displayTable(target)} would break the SCD2 invariants; nothing was written`),
    }),
  ];
}

const BREACH_COLUMNS = [...BREACHES, 'example'] as const;

/** What the MERGE will insert, update (close) and remove: the kept new state against the kept versions. */
function measureStep(load: Load) {
  const { target, catalog, location } = load;
  return queryStep({
    id: 'measure',
    title: 'Count the versions this load inserts, updates (closes) and removes',
    query: mergeCounts(mergeSource(Query.materialized(NEW_STATE), Query.materialized(STORED))),
    columns: ['inserted', 'updated', 'deleted'],
    interpret: ([r]) => {
      const m = { inserted: Number(r?.inserted ?? 0), updated: Number(r?.updated ?? 0), deleted: Number(r?.deleted ?? 0) };
      const changes = m.inserted + m.updated + m.deleted;
      return {
        output: { table: displayTable(target), format: catalog.format, location, committed: changes > 0, metrics: m },
        metrics: { rowsWritten: changes },
      };
    },
  });
}

/**
 * Closing a version and opening the next in one commit. The MERGE derives its source again from the
 * live table, not from the kept copy: it is judged against the dimension as it is at its commit (a
 * concurrent commit is the table format's optimistic conflict, 75). Without a concurrent writer both
 * are the same rows, so what was checked and measured is what is written.
 */
function mergeStep(load: Load, changes: (facts: Facts) => number, incremental: IncrementalRead | undefined): Step {
  const { target } = load;
  const live = changeSet(load, storedOf(load, Query.table(tableParts(target))));
  return {
    kind: 'command',
    id: 'merge',
    title: `MERGE the new history into ${displayTable(target)} (one commit)`,
    // An unchanged state writes nothing: no MERGE, no snapshot.
    when: (facts) => changes(facts) > 0,
    // Incremental: the MERGE's commit records the source commit the batch was read up to.
    ...(incremental ? { stamp: incremental.stamp } : {}),
    command: live.source.as(SOURCE).mergeInto(tableParts(target), eq(col(target.table, DIM_KEY), col(SOURCE, MERGE.key)), {
      whenMatched: [
        { action: 'delete', condition: eq(col(SOURCE, MERGE.action), lit('delete')) },
        { action: 'updateAll', condition: eq(col(SOURCE, MERGE.action), lit('update')) },
      ],
      whenNotMatched: [{ action: 'insertAll', condition: eq(col(SOURCE, MERGE.action), lit('insert')) }],
    }),
  };
}

/** One scan of the batch: its rows, NULL keys or instants, and instants of a key with different rows. */
function batchChecks(spec: HistorySpec, packed: Query): Query {
  const ts = col('__scd_ctrl', 'ts');
  const keyAndTs = [...spec.keys.map((k) => col(k)), alias(ts, '__scd_at')];
  const asJson = fn('to_json', fn('struct', star()));
  const perInstant = packed.aggregate(keyAndTs, [alias(fn('count', lit(1)), '__n'), alias(not(eq(fn('min', asJson), fn('max', asJson))), '__tie')]);
  const nullish = or(...[...spec.keys, '__scd_at'].map((c) => isNull(col(c))));
  const example = (cond: Expr) =>
    fn(
      'max',
      fn('if', cond, fn('to_json', fn('named_struct', ...[...spec.keys, '__scd_at'].flatMap((c) => [lit(c.replace('__scd_at', 'at')), col(c)]))), lit(null)),
    );
  return perInstant.aggregate(
    [],
    [
      alias(fn('coalesce', fn('sum', col('__n')), lit(0)), 'rows'),
      alias(fn('count_if', nullish), 'null_groups'),
      alias(example(nullish), 'null_example'),
      alias(fn('count_if', col('__tie')), 'ties'),
      alias(example(col('__tie')), 'tie_example'),
    ],
  );
}

function interpretBatch(r: Row, source: string, filtered: boolean, events: boolean, incremental: boolean) {
  const rows = Number(r.rows ?? 0);
  // Incremental: new commits without rows still move the dimension's position (record-position).
  if (rows === 0 && !incremental) return { skip: `no rows in ${source}${filtered ? ' matching source.where' : ''}` };
  if (Number(r.null_groups ?? 0) > 0)
    return {
      fail: new DataError(`the batch has a NULL in dimension.natural-key${events ? ' or history.sequence-by' : ''}, e.g. ${String(r.null_example)}`, {
        code: 'SCD2_NULL_KEY',
      }),
    };
  if (Number(r.ties ?? 0) > 0)
    return {
      fail: new DataError(
        `${Number(r.ties)} key(s) have different rows at the same instant (which one is the state cannot be told), e.g. ${String(r.tie_example)}`,
        {
          code: 'SCD2_AMBIGUOUS',
        },
      ),
    };
  return { metrics: { rowsRead: rows } };
}

function interpretPoints(r: Row, late: 'place' | 'refuse', events: boolean): { fail?: DataError } {
  if (Number(r.conflicts ?? 0) > 0)
    return {
      fail: new DataError(
        `${Number(r.conflicts)} point(s) of the batch say something else than the dimension holds for the same key and instant, e.g. ${String(r.conflict_example)}; a key has one state per instant`,
        { code: 'SCD2_CONFLICT', hint: 'a correction needs its own instant (a later effective-at or sequence)' },
      ),
    };
  if (late === 'refuse' && Number(r.late ?? 0) > 0)
    return {
      fail: new DataError(
        `${Number(r.late)} key(s) already have a version starting after this load's ${events ? 'event' : 'effective-at'}, e.g. ${String(r.late_example)}; loading it would rewrite history`,
        { code: 'SCD2_LATE', hint: 'use a later dimension.effective-at, or schema-version 2 (history.late-events = place) to place it in the history' },
      ),
    };
  return {};
}

function breachEffect(r: Row, message: string): { fail?: DataError } {
  const found = BREACHES.filter((b) => Number(r[b] ?? 0) > 0);
  if (!found.length) return {};
  return {
    fail: new DataError(`${message}: ${found.map((b) => `${b.replaceAll('_', ' ')} (${Number(r[b])})`).join(', ')}, e.g. key ${String(r.example)}`, {
      code: 'SCD2_INVARIANT',
    }),
  };
}

export const scd2DimLoad = defineTemplate({
  name: TEMPLATE,
  layer: 'gold',
  summary:
    'Maintain a Kimball SCD type 2 dimension in gold from a silver table or bronze snapshot: a new version per tracked change, closed and opened in one commit; v2 builds history from change feeds (deletes, late events placed in the history, type-1 columns, close-missing).',
  stability: 'beta',
  newest: v2,
  older: [v1],
  plan,
});
