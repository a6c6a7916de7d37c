import { z } from 'zod';
import { DataError } from '../../core/errors.js';
import { type TableName, displayTable, quoteIdentifier, quoteName, tableParts } from '../../core/naming.js';
import { catalogName, columnName, expression, isoDate, jobSection, name, tenantSection } from '../../core/config/validate.js';
import {
  type Expr,
  alias,
  and,
  col,
  desc,
  eq,
  eqNullSafe,
  fn,
  gt,
  isIn,
  isNotNull,
  isNull,
  lit,
  not,
  or,
  over,
  star,
} from '../../spark/plan/expressions.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import type { ConfigExpression } from '../../core/expression/index.js';
import { Query, sqlCommand } from '../../spark/plan/query.js';
import type { Facts, JobContext, JobPlan, JobTemplate, Row, Step, TemplateVersion } from '../template.js';
import { createNamespaceStep, tableCatalog, tableProperties } from '../tables.js';
import { SNAPSHOT_DATE } from '../bronze/jdbc-snapshot-ingest.js';

/**
 * cdc-silver-merge: resolve a batch of CDC events from the tenant's bronze layer to the latest
 * event per business key and MERGE it into a silver Iceberg or Delta table, creating namespace and
 * table on first run. v1 is the seed project's shape; v2 adds ordered sequences, `delete-when`,
 * column selection, schema evolution and the table format.
 *
 * Semantics (both versions):
 * - a batch with a NULL key or sequence value is rejected (65) before anything is written;
 * - within the batch the highest sequence per key wins; equal sequences with identical payloads are
 *   one event, with different payloads the batch is rejected naming the key;
 * - an event changes silver only when its sequence is greater than what silver holds for the key,
 *   including deleted keys: deletes leave a tombstone (key + sequence) in `<table>__cdc_tombstones`,
 *   kept for `tombstone-retention-days`, so late or replayed events never move a row backwards and
 *   never resurrect a delete; rerunning any batch changes nothing.
 */

/** Bronze metadata columns never reach silver. */
export const BRONZE_METADATA_COLUMNS = ['_lake_tenant', '_lake_source', '_lake_ingested_at', '_snapshot_date'] as const;
/** Suffix of the tombstone table next to each silver table (a reserved name). */
export const TOMBSTONE_SUFFIX = '__cdc_tombstones';

const TEMPLATE = 'cdc-silver-merge';
const SOURCE = '__source';
const RESOLVED = '__resolved';
const TOMB = '__tomb';
const ROW = '__row';
const DELETE_FLAG = '__lake_delete';
const AFTER_TOMBSTONE = '__lake_after_tombstone';
const ROW_NUMBER = '__lake_rn';
const DELETED_AT = '_cdc_deleted_at';
const RUN_ID = '_lake_run_id';

// ---------------------------------------------------------------------------------------------
// Config schemas

const cdcChecks = (cdc: { keys: string[]; sequence: string[]; op?: string | undefined }, ctx: z.RefinementCtx, seqPath: string) => {
  cdc.keys.forEach((k, i) => {
    if (cdc.keys.indexOf(k) !== i) ctx.addIssue({ code: 'custom', path: ['primary-key', i], message: `"${k}" appears twice` });
  });
  for (const s of cdc.sequence) if (cdc.keys.includes(s)) ctx.addIssue({ code: 'custom', path: [seqPath], message: `"${s}" is a primary-key column` });
  if (cdc.op !== undefined && (cdc.keys.includes(cdc.op) || cdc.sequence.includes(cdc.op)))
    ctx.addIssue({ code: 'custom', path: ['op-column'], message: 'must differ from the key and sequence columns' });
  for (const c of [...cdc.keys, ...cdc.sequence, ...(cdc.op ? [cdc.op] : [])])
    if ((BRONZE_METADATA_COLUMNS as readonly string[]).includes(c))
      ctx.addIssue({ code: 'custom', path: [], message: `"${c}" is a bronze metadata column and cannot be a CDC column` });
};

const source = z.object({ table: name(), where: expression('source.where').optional() }).strict();

/** v2: which bronze partitions to read (`--set source.snapshot-date={{ ds }}`); without it, all of them. */
const sourceV2 = source.extend({
  'snapshot-date': z
    .union([isoDate(), z.array(isoDate()).min(1)])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .refine((dates) => new Set(dates).size === dates.length, 'lists a date twice')
    .optional()
    .describe(
      'The bronze snapshot date(s) to merge, e.g. --set source.snapshot-date={{ ds }}: exactly <bronze>/_snapshot_date=<date> is read for each, no other partition is listed or read; a date without a partition skips the run (99). Without it, every partition is read.',
    ),
});

const v1Schema = z
  .object({
    job: jobSection(TEMPLATE, 1),
    tenant: tenantSection(),
    source,
    cdc: z
      .object({
        'primary-key': z.array(columnName()).min(1, 'needs at least one key column'),
        'sequence-by': columnName(),
        'op-column': columnName().optional(),
        'delete-values': z.array(z.string().min(1)).min(1).optional(),
      })
      .strict()
      .superRefine((cdc, ctx) => {
        cdcChecks({ keys: cdc['primary-key'], sequence: [cdc['sequence-by']], op: cdc['op-column'] }, ctx, 'sequence-by');
        if (cdc['delete-values'] && cdc['op-column'] === undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-values'], message: 'needs cdc.op-column (which column holds the operation?)' });
      }),
    target: z.object({ table: name(), catalog: catalogName().optional() }).strict(),
  })
  .strict();

const v2Schema = z
  .object({
    job: jobSection(TEMPLATE, 2),
    tenant: tenantSection(),
    source: sourceV2,
    cdc: z
      .object({
        'primary-key': z.array(columnName()).min(1, 'needs at least one key column'),
        'sequence-by': z.union([columnName(), z.array(columnName()).min(1)]).transform((v) => (Array.isArray(v) ? v : [v])),
        'op-column': columnName().optional(),
        'delete-values': z.array(z.string().min(1)).min(1).optional(),
        'delete-when': expression('cdc.delete-when').optional(),
        'tombstone-retention-days': z.number().int().min(1).max(36_500).default(30),
      })
      .strict()
      .superRefine((cdc, ctx) => {
        cdcChecks({ keys: cdc['primary-key'], sequence: cdc['sequence-by'], op: cdc['op-column'] }, ctx, 'sequence-by');
        if (cdc['delete-values'] && cdc['op-column'] === undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-values'], message: 'needs cdc.op-column (which column holds the operation?)' });
        if (cdc['delete-when'] !== undefined && cdc['op-column'] !== undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-when'], message: 'use either cdc.delete-when or cdc.op-column/delete-values, not both' });
      }),
    columns: z
      .object({ include: z.array(columnName()).min(1).optional(), exclude: z.array(columnName()).min(1).optional() })
      .strict()
      .refine((c) => !(c.include && c.exclude), 'use either columns.include or columns.exclude, not both')
      .optional(),
    'schema-evolution': z.enum(['fail', 'add-columns']).default('fail'),
    target: z.object({ table: name(), catalog: catalogName().optional(), format: z.enum(['iceberg', 'delta']).optional() }).strict(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const protectedCols = [...c.cdc['primary-key'], ...c.cdc['sequence-by']];
    for (const [i, x] of (c.columns?.exclude ?? []).entries())
      if (protectedCols.includes(x)) ctx.addIssue({ code: 'custom', path: ['columns', 'exclude', i], message: `"${x}" is a key or sequence column and cannot be excluded` });
  });

export type CdcSilverMergeV1 = z.infer<typeof v1Schema>;
export type CdcSilverMergeV2 = z.infer<typeof v2Schema>;

/** Both versions, normalised: what the plan is built from. */
interface MergeSpec {
  sourceTable: string;
  where?: ConfigExpression | undefined;
  /** The bronze partitions to read; all of them when undefined. */
  snapshotDates?: string[] | undefined;
  keys: string[];
  sequence: string[];
  isDelete: Expr;
  /** Columns of bronze that never reach silver besides the bronze metadata (the op column). */
  cdcOnly: string[];
  include?: string[] | undefined;
  exclude?: string[] | undefined;
  schemaEvolution: 'fail' | 'add-columns';
  tombstoneRetentionDays: number;
  target: { table: string; catalog?: string | undefined; format?: 'iceberg' | 'delta' | undefined };
  /** Config paths whose expressions the plan carries: those steps are checked by the tenant read policy. */
  untrusted: string[];
}

function opDelete(op: string | undefined, values: string[] | undefined): Expr {
  // A NULL op is an upsert: only an explicit delete value deletes.
  return op ? fn('coalesce', isIn(col(op), (values ?? ['d']).map(lit)), lit(false)) : lit(false);
}

const fromV1 = (c: CdcSilverMergeV1): MergeSpec => ({
  sourceTable: c.source.table,
  where: c.source.where,
  keys: c.cdc['primary-key'],
  sequence: [c.cdc['sequence-by']],
  isDelete: opDelete(c.cdc['op-column'], c.cdc['delete-values']),
  cdcOnly: c.cdc['op-column'] ? [c.cdc['op-column']] : [],
  schemaEvolution: 'fail',
  tombstoneRetentionDays: 30,
  target: c.target,
  untrusted: c.source.where !== undefined ? ['source.where'] : [],
});

const fromV2 = (c: CdcSilverMergeV2): MergeSpec => ({
  sourceTable: c.source.table,
  where: c.source.where,
  snapshotDates: c.source['snapshot-date'],
  keys: c.cdc['primary-key'],
  sequence: c.cdc['sequence-by'],
  isDelete: c.cdc['delete-when'] ? fn('coalesce', configExpr(c.cdc['delete-when']), lit(false)) : opDelete(c.cdc['op-column'], c.cdc['delete-values']),
  cdcOnly: c.cdc['op-column'] ? [c.cdc['op-column']] : [],
  include: c.columns?.include,
  exclude: c.columns?.exclude,
  schemaEvolution: c['schema-evolution'],
  tombstoneRetentionDays: c.cdc['tombstone-retention-days'],
  target: c.target,
  untrusted: [...(c.source.where !== undefined ? ['source.where'] : []), ...(c.cdc['delete-when'] !== undefined ? ['cdc.delete-when'] : [])],
});

// ---------------------------------------------------------------------------------------------
// The plan

/** `a > b` for sequences compared left to right: (a1 > b1) or (a1 = b1 and a2 > b2) … */
export function sequenceGreater(columns: string[], a: string, b: string): Expr {
  const [first, ...rest] = columns;
  if (first === undefined) return lit(false);
  const head = gt(col(a, first), col(b, first));
  return rest.length === 0 ? head : or(head, and(eq(col(a, first), col(b, first)), sequenceGreater(rest, a, b)));
}

function plan(ctx: JobContext, spec: MergeSpec): JobPlan {
  const { tenant } = ctx;
  const catalog = tableCatalog(ctx, spec.target.catalog, spec.target.format);
  const target = tenant.table(catalog.name, 'silver', spec.target.table);
  const tombstones = tenant.table(catalog.name, 'silver', `${spec.target.table}${TOMBSTONE_SUFFIX}`);
  const location = tenant.location('silver', spec.target.table);
  const bronzePath = tenant.location('bronze', spec.sourceTable);
  const { keys, sequence } = spec;
  const keyAndSeq = [...keys, ...sequence];

  // Exactly the selected partitions, as literal paths with basePath at the bronze dir (so
  // _snapshot_date stays a column): another date's files are never listed, let alone read, so a
  // bad old partition cannot break this date's run. Without a selection, every partition.
  const partitions = spec.snapshotDates?.map((d) => tenant.location('bronze', spec.sourceTable, `${SNAPSHOT_DATE}=${d}`));
  // mergeSchema: bronze partitions written before and after a source schema change must all show
  // their columns; without it Spark takes one file's schema and new columns silently vanish.
  let events = partitions
    ? Query.read('parquet', { paths: partitions, options: { mergeSchema: 'true', basePath: bronzePath } })
    : Query.read('parquet', { paths: [bronzePath], options: { mergeSchema: 'true' } });
  if (spec.where) events = events.filter(configExpr(spec.where));
  const payload = events.drop(...BRONZE_METADATA_COLUMNS);

  // The latest event per key, with its delete flag; only silver columns (plus the flag) remain.
  let latest = payload
    .withColumns([
      [ROW_NUMBER, over(fn('row_number'), keys.map((k) => col(k)), sequence.map((s) => desc(col(s))))],
      [DELETE_FLAG, spec.isDelete],
    ])
    .filter(eq(col(ROW_NUMBER), lit(1)))
    .drop(ROW_NUMBER, ...spec.cdcOnly);
  if (spec.include) latest = latest.select(...[...new Set([...keyAndSeq, ...spec.include])], DELETE_FLAG);
  if (spec.exclude) latest = latest.drop(...spec.exclude);
  const silverColumns = latest.drop(DELETE_FLAG);

  // Tombstones known before this run decide whether an upsert is newer than a delete.
  const knownTombstones = Query.table(tableParts(tombstones)).select(...keyAndSeq).as(TOMB);
  const tombstoneMatch = and(...keys.map((k) => eqNullSafe(col(RESOLVED, k), col(TOMB, k))));
  const source = latest
    .as(RESOLVED)
    .join(knownTombstones, tombstoneMatch, 'left')
    .select(star(RESOLVED), alias(or(isNull(col(TOMB, keys[0]!)), sequenceGreater(sequence, RESOLVED, TOMB)), AFTER_TOMBSTONE));

  const newerThanRow = sequenceGreater(sequence, SOURCE, target.table);
  const untrusted = spec.untrusted.length ? { untrusted: spec.untrusted } : {};
  // The steps that read the events without their delete flag carry source.where, not cdc.delete-when.
  const whereOnly = spec.untrusted.includes('source.where') ? { untrusted: ['source.where'] } : {};
  const steps: Step[] = [
    ...(partitions ? [probePartitions(partitions, spec.snapshotDates!, bronzePath)] : []),
    {
      kind: 'query',
      id: 'check-batch',
      ...whereOnly,
      title: `Check the CDC batch in ${bronzePath}: events, NULL keys or sequences, ambiguous ties`,
      query: batchChecks(payload, keyAndSeq),
      interpret: (rows) => {
        const r = rows[0] ?? {};
        const events = Number(r.events ?? 0);
        if (events === 0) return { skip: `no CDC events in ${spec.sourceTable}${spec.where ? ' matching source.where' : ''}` };
        if (Number(r.null_groups ?? 0) > 0)
          return {
            fail: new DataError(`CDC events have a NULL in cdc.primary-key or cdc.sequence-by, e.g. ${String(r.null_example)}`, { code: 'CDC_NULL_KEY' }),
          };
        if (Number(r.ties ?? 0) > 0)
          return {
            fail: new DataError(
              `${Number(r.ties)} key(s) have different CDC events at the same sequence (which is latest cannot be told), e.g. ${String(r.tie_example)}`,
              { code: 'CDC_AMBIGUOUS_SEQUENCE' },
            ),
          };
        return { metrics: { rowsRead: events } };
      },
    },
    createNamespaceStep(target),
    {
      kind: 'ensureTable',
      id: 'create-table',
      ...untrusted,
      title: `Create ${displayTable(target)} at ${location} if missing`,
      table: target,
      location,
      configPath: 'target.table',
      create: silverColumns.limit(0).writeTo(tableParts(target), 'create', { provider: catalog.format, properties: tableProperties(catalog.format, location) }),
    },
    {
      kind: 'ensureTable',
      id: 'create-tombstones',
      ...untrusted,
      title: `Create ${displayTable(tombstones)} if missing`,
      table: tombstones,
      location: tenant.location('silver', tombstones.table),
      configPath: 'target.table',
      create: latest
        .select(...keyAndSeq, alias(fn('current_timestamp'), DELETED_AT), alias(lit(ctx.runId), RUN_ID))
        .limit(0)
        .writeTo(tableParts(tombstones), 'create', { provider: catalog.format, properties: tableProperties(catalog.format, tenant.location('silver', tombstones.table)) }),
    },
    {
      kind: 'compareSchemas',
      id: 'check-schema',
      ...untrusted,
      title: `Compare the batch's columns with ${displayTable(target)}`,
      source: silverColumns,
      table: target,
      interpret: (diff) => {
        if (diff.missing.length)
          return { fail: new DataError(`the batch lacks columns that ${displayTable(target)} has: ${diff.missing.join(', ')}`, { code: 'SCHEMA_CHANGED' }) };
        if (!diff.added.length) return {};
        if (spec.schemaEvolution === 'fail')
          return {
            fail: new DataError(
              `the batch has new columns ${diff.added.map((f) => `${f.name} ${f.type}`).join(', ')}; set schema-evolution = add-columns (schema-version 2) to add them`,
              { code: 'SCHEMA_CHANGED' },
            ),
          };
        const columns = diff.added.map((f) => `${quoteIdentifier(f.name)} ${f.type}`).join(', ');
        return { commands: [sqlCommand(`ALTER TABLE ${quoteName(tableParts(target))} ADD COLUMNS (${columns})`)] };
      },
    },
    {
      kind: 'query',
      id: 'measure',
      ...untrusted,
      title: 'Count the inserts, updates, deletes, tombstones and late events of this batch',
      query: measure(source, target, keys, sequence),
      interpret: (rows) => {
        const r = rows[0] ?? {};
        const metrics = { inserted: Number(r.inserted ?? 0), updated: Number(r.updated ?? 0), deleted: Number(r.deleted ?? 0), late: Number(r.late ?? 0) };
        const changes = metrics.inserted + metrics.updated + metrics.deleted;
        return {
          output: { table: displayTable(target), format: catalog.format, location, committed: changes + Number(r.tombstones ?? 0) > 0, metrics },
          metrics: { rowsWritten: changes },
        };
      },
    },
    {
      // Tombstones first: if the run dies between the two merges, a rerun still deletes the rows.
      kind: 'command',
      id: 'record-tombstones',
      ...untrusted,
      title: `Record the deleted keys in ${displayTable(tombstones)}`,
      when: (facts) => fact(facts, 'measure', 'tombstones') > 0,
      command: latest
        .filter(col(DELETE_FLAG))
        .select(...keyAndSeq, alias(fn('current_timestamp'), DELETED_AT), alias(lit(ctx.runId), RUN_ID))
        .as(SOURCE)
        .mergeInto(tableParts(tombstones), and(...keys.map((k) => eqNullSafe(col(tombstones.table, k), col(SOURCE, k)))), {
          whenMatched: [{ action: 'updateAll', condition: sequenceGreater(sequence, SOURCE, tombstones.table) }],
          whenNotMatched: [{ action: 'insertAll' }],
        }),
    },
    {
      kind: 'command',
      id: 'merge',
      ...untrusted,
      title: `MERGE the latest event per key into ${displayTable(target)}`,
      // A rerun of an applied batch changes no row: no MERGE, so no new snapshot or version.
      when: (facts) => fact(facts, 'measure', 'inserted') + fact(facts, 'measure', 'updated') + fact(facts, 'measure', 'deleted') > 0,
      command: source.as(SOURCE).mergeInto(tableParts(target), and(...keys.map((k) => eqNullSafe(col(target.table, k), col(SOURCE, k)))), {
        whenMatched: [
          { action: 'delete', condition: and(col(SOURCE, DELETE_FLAG), newerThanRow) },
          { action: 'updateAll', condition: and(not(col(SOURCE, DELETE_FLAG)), newerThanRow, col(SOURCE, AFTER_TOMBSTONE)) },
        ],
        whenNotMatched: [{ action: 'insertAll', condition: and(not(col(SOURCE, DELETE_FLAG)), col(SOURCE, AFTER_TOMBSTONE)) }],
      }),
    },
    {
      // The merge decided on the tombstones as they were when it started. A run that recorded a
      // newer tombstone for one of our keys and deleted the row just before our merge committed
      // could not see our insert; we could not see its tombstone. Looking again now, after our
      // commit, closes that window: its tombstone is visible to us, or its merge comes after ours
      // and deletes the row itself. Also heals a run that died between its two merges.
      kind: 'query',
      id: 'find-resurrected',
      ...whereOnly,
      title: `Look for rows of this batch's keys that a newer tombstone deletes`,
      query: resurrected(payload, target, tombstones, keys, sequence).aggregate([], [alias(fn('count', lit(1)), 'rows')]),
      interpret: (rows) => {
        const n = Number(rows[0]?.rows ?? 0);
        return n > 0 ? { output: { table: displayTable(target), format: catalog.format, committed: true, metrics: { repaired: n } } } : {};
      },
    },
    {
      kind: 'command',
      id: 'delete-resurrected',
      ...whereOnly,
      title: `Delete the rows of ${displayTable(target)} that a newer tombstone deletes`,
      when: (facts) => fact(facts, 'find-resurrected', 'rows') > 0,
      command: resurrected(payload, target, tombstones, keys, sequence)
        .as(SOURCE)
        .mergeInto(tableParts(target), and(...keys.map((k) => eqNullSafe(col(target.table, k), col(SOURCE, k)))), {
          whenMatched: [{ action: 'delete', condition: sequenceGreater(sequence, SOURCE, target.table) }],
        }),
    },
    {
      kind: 'query',
      id: 'count-expired',
      title: `Count tombstones older than ${spec.tombstoneRetentionDays} days`,
      query: Query.table(tableParts(tombstones)).filter(expired(spec.tombstoneRetentionDays)).aggregate([], [alias(fn('count', lit(1)), 'rows')]),
      interpret: () => ({}),
    },
    {
      kind: 'command',
      id: 'expire-tombstones',
      title: `Forget tombstones older than ${spec.tombstoneRetentionDays} days`,
      when: (facts) => fact(facts, 'count-expired', 'rows') > 0,
      // The number of days is a validated integer; no text from config enters this statement.
      command: sqlCommand(
        `DELETE FROM ${quoteName(tableParts(tombstones))} WHERE ${quoteIdentifier(DELETED_AT)} < current_timestamp() - make_dt_interval(${Math.trunc(spec.tombstoneRetentionDays)})`,
      ),
    },
    catalog.format === 'iceberg' ? icebergSnapshotStep(target) : deltaVersionStep(target),
  ];
  return { steps };
}

/** A selected snapshot date whose partition is not there (yet): nothing to merge, skip (99) rather than fail. */
function probePartitions(partitions: string[], dates: string[], bronzePath: string): Step {
  return {
    kind: 'probePaths',
    id: 'probe-partitions',
    title: `Check that the bronze partitions of ${dates.join(', ')} exist in ${bronzePath}`,
    paths: partitions,
    interpret: (missing) =>
      missing.length === 0
        ? {}
        : { skip: `no bronze partition for source.snapshot-date ${dates.filter((_, i) => missing.includes(partitions[i]!)).join(', ')} in ${bronzePath}` },
  };
}

/** A number from the one row of an earlier query step (0 when absent). */
function fact(facts: Facts, step: string, column: string): number {
  return Number(facts[step]?.[0]?.[column] ?? 0);
}

/** Tombstones past the retention period. */
function expired(days: number): Expr {
  return fn('<', col(DELETED_AT), fn('-', fn('current_timestamp'), fn('make_dt_interval', lit(Math.trunc(days)))));
}

/**
 * The tombstones of this batch's keys that are newer than the key's row in silver, read now: rows
 * that a concurrent run brought back after another run deleted them (key and the tombstone's
 * sequence, one row per key). The batch's keys are those of its events: the same set as the keys
 * of the latest event per key, without the window that picks the latest (a sort of the batch).
 */
function resurrected(events: Query, target: TableName, tombstones: TableName, keys: string[], sequence: string[]): Query {
  const batchKeys = events.select(...keys).as(RESOLVED);
  const rows = Query.table(tableParts(target))
    .select(...keys, ...sequence)
    .as(ROW);
  return Query.table(tableParts(tombstones))
    .select(...keys, ...sequence)
    .as(TOMB)
    .join(batchKeys, and(...keys.map((k) => eqNullSafe(col(TOMB, k), col(RESOLVED, k)))), 'left_semi')
    .join(rows, and(...keys.map((k) => eqNullSafe(col(TOMB, k), col(ROW, k)))), 'inner')
    .filter(sequenceGreater(sequence, TOMB, ROW))
    .select(...[...keys, ...sequence].map((c) => alias(col(TOMB, c), c)));
}

/**
 * Every check of a batch in one scan: group the events by key and sequence (one shuffle), then one
 * row with the number of events, the groups with a NULL key or sequence, and the groups whose events
 * differ (min and max of the payload's JSON differ), each with an example.
 */
function batchChecks(payload: Query, keyAndSeq: string[]): Query {
  const asJson = fn('to_json', fn('struct', star()));
  const perGroup = payload.aggregate(
    keyAndSeq.map((c) => col(c)),
    [alias(fn('count', lit(1)), '__n'), alias(not(eq(fn('min', asJson), fn('max', asJson))), '__tie')],
  );
  const nullish = or(...keyAndSeq.map((c) => isNull(col(c))));
  const example = (cond: Expr) => fn('max', fn('if', cond, fn('to_json', fn('named_struct', ...keyAndSeq.flatMap((c) => [lit(c), col(c)]))), lit(null)));
  return perGroup.aggregate(
    [],
    [
      alias(fn('coalesce', fn('sum', col('__n')), lit(0)), 'events'),
      alias(fn('count_if', nullish), 'null_groups'),
      alias(example(nullish), 'null_example'),
      alias(fn('count_if', col('__tie')), 'ties'),
      alias(example(col('__tie')), 'tie_example'),
    ],
  );
}

/**
 * Join the resolved batch (with its tombstone flag) to the target's keys and sequences: what the
 * merge will insert, update and delete, and which events it ignores because silver or a tombstone
 * already holds a newer or equal sequence for the key (late or replayed events).
 */
function measure(source: Query, target: TableName, keys: string[], sequence: string[]): Query {
  const present = '__lake_present';
  const existing = Query.table(tableParts(target))
    .select(...keys.map((k) => col(k)), ...sequence.map((s) => col(s)), alias(lit(true), present))
    .as(ROW);
  const joined = source.as(SOURCE).join(existing, and(...keys.map((k) => eqNullSafe(col(SOURCE, k), col(ROW, k)))), 'left');
  const matched = isNotNull(col(ROW, present));
  const newer = sequenceGreater(sequence, SOURCE, ROW);
  const afterTomb = col(SOURCE, AFTER_TOMBSTONE);
  const del = col(SOURCE, DELETE_FLAG);
  const countIf = (cond: Expr) => fn('count_if', cond);
  return joined.aggregate(
    [],
    [
      alias(countIf(and(not(matched), not(del), afterTomb)), 'inserted'),
      alias(countIf(and(matched, newer, not(del), afterTomb)), 'updated'),
      alias(countIf(and(matched, newer, del)), 'deleted'),
      alias(countIf(or(and(matched, not(newer)), and(not(del), not(afterTomb)), and(not(matched), del, not(afterTomb)))), 'late'),
      // Deletes newer than the key's tombstone (or without one): what record-tombstones writes.
      alias(countIf(and(del, afterTomb)), 'tombstones'),
    ],
  );
}

function icebergSnapshotStep(target: TableName): Step {
  return {
    kind: 'query',
    id: 'read-snapshot',
    title: `Read the current snapshot of ${displayTable(target)}`,
    query: Query.table([...tableParts(target), 'snapshots'])
      .select('snapshot_id', 'committed_at')
      .sort(desc(col('committed_at')))
      .limit(1),
    interpret: (rows: Row[]) => {
      const id = rows[0]?.snapshot_id;
      return id === undefined || id === null ? {} : { output: { table: displayTable(target), format: 'iceberg', snapshotId: String(id) } };
    },
  };
}

function deltaVersionStep(target: TableName): Step {
  return {
    kind: 'query',
    id: 'read-version',
    title: `Read the current version of ${displayTable(target)}`,
    query: Query.sql(`DESCRIBE HISTORY ${quoteName(tableParts(target))}`).select('version').sort(desc(col('version'))).limit(1),
    interpret: (rows: Row[]) => {
      const v = rows[0]?.version;
      return v === undefined || v === null ? {} : { output: { table: displayTable(target), format: 'delta', snapshotId: String(v) } };
    },
  };
}

const v1: TemplateVersion<CdcSilverMergeV1> = {
  version: 1,
  schema: v1Schema,
  example: 'configs/examples/cdc-silver-merge.v1.conf',
  plan: (ctx, c) => plan(ctx, fromV1(c)),
};

const v2: TemplateVersion<CdcSilverMergeV2> = {
  version: 2,
  schema: v2Schema,
  example: 'configs/examples/cdc-silver-merge.v2.conf',
  plan: (ctx, c) => plan(ctx, fromV2(c)),
};

export const cdcSilverMerge: JobTemplate = {
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Resolve CDC events from bronze to the latest event per business key and MERGE them into a silver Iceberg or Delta table: deletes applied (with tombstones), updates upserted, late and replayed events ignored, namespace and table created on first run.',
  stability: 'beta',
  versions: [v1, v2],
};
