import { z } from 'zod';
import { DataError, InternalError } from '../../core/errors.js';
import { type TableName, displayTable, tableParts } from '../../core/naming.js';
import { catalogName, columnName, columnTypeName, expression, isoDate, name, tableName } from '../../core/config/validate.js';
import {
  type Expr,
  alias,
  and,
  asc,
  cast,
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
import type { Cmd } from '../../spark/plan/commands.js';
import { Query, sqlCommand } from '../../spark/plan/query.js';
import { sql } from '../../spark/plan/sql.js';
import type { ColumnSource, DatasetRef, Facts, JobContext, JobPlan, PlanLineage, RowsStep, SchemaDiff, Step } from '../template.js';
import { type FingerprintStep, type Row, fingerprintStep, materializeStep, queryStep } from '../steps.js';
import { createNamespaceStep, createTable, readCommitStep, tableProperties } from '../tables.js';
import { type TableShapeSpec, tableShape, tableShapeKeys } from '../table-shape.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import {
  BRONZE_SESSION_CONF,
  BRONZE_STAMPS,
  type BronzeFormat,
  type BronzeRef,
  bronzeFormatKeys,
  bronzeRef,
  checkBronzeCatalog,
  readBronze,
} from '../layers/bronze.js';
import { SILVER_FORMATS, type SilverFormat, type SilverRef, silverCompanion, silverRef } from '../layers/silver.js';
import { type CommitWindow, commitWindow } from '../commit-window.js';
import { LAKE_INTERNAL_PREFIX, type RequiredColumn, checkSourceColumns, reservedIn } from '../source-columns.js';
import { type IncrementalRead, checkIncremental, incrementalRead, sourceRead } from '../incremental.js';

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

/** Suffix of the tombstone table next to each silver table (a reserved name). */
export const TOMBSTONE_SUFFIX = '__cdc_tombstones';

const TEMPLATE = 'cdc-silver-merge';
const SOURCE = '__source';
const RESOLVED = '__resolved';
const TOMB = '__tomb';
const ROW = '__row';
const DELETE_FLAG = '__lake_delete';
const AFTER_TOMBSTONE = '__lake_after_tombstone';
/** measure's copy of the known tombstone's sequence columns (prefix) and whether there is one. */
const TOMB_SEQ = '__lake_tomb_';
const HAS_TOMB = '__lake_has_tomb';
/** The resolved batch, kept on the server for the run (see `resolveBatch`). */
const BATCH = 'cdc-batch';
/**
 * Per event, carried by the resolved batch for check-batch: how many events of its key come up to
 * it (on the key's latest event: all of them), whether it is its key's latest event, whether it has
 * a NULL key or sequence, ties with its neighbour, or lists a column cdc.unavailable-columns does
 * not name. The batch keeps each key's latest event and every flagged one (none, in a batch that
 * passes its checks).
 */
const KEY_EVENTS = '__lake_key_events';
const KEY_LATEST = '__lake_key_latest';
const KEY_NULL = '__lake_key_null';
const KEY_TIE = '__lake_key_tie';
const KEY_UNLISTED = '__lake_key_unlisted';
const CHECK_COLUMNS = [KEY_EVENTS, KEY_LATEST, KEY_NULL, KEY_TIE, KEY_UNLISTED];
/** The columns of the resolved event that no event of the batch sent: silver keeps its value for them. */
const KEEP = '__lake_keep';
const AVAILABLE = '__lake_av_';
const CURRENT = '__lake_cur_';
/**
 * The session's settings: bronze's (text columns as text) and hashes over map values, which the
 * payload's hashes need when bronze has a map column (a map's hash follows its entries' order, as
 * its JSON did).
 */
const MERGE_SESSION_CONF: Readonly<Record<string, string>> = { ...BRONZE_SESSION_CONF, 'spark.sql.legacy.allowHashOnMapType': 'true' };
/** A hash of the payload's values: the sort and the tie check compare it first. */
const PAYLOAD_HASH = '__lake_h1';
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
    if ((BRONZE_STAMPS as readonly string[]).includes(c))
      ctx.addIssue({ code: 'custom', path: [], message: `"${c}" is a bronze metadata column and cannot be a CDC column` });
  // The key and sequence columns are the tombstone table's too, next to its own columns; a column
  // of one of their names (or of the plan's internal ones) failed with 70 after silver was created.
  const own = { names: [DELETED_AT, RUN_ID], prefixes: [LAKE_INTERNAL_PREFIX] };
  const ownMessage = (c: string) => `"${c}" is a column the template writes or uses itself (${DELETED_AT}, ${RUN_ID}, ${LAKE_INTERNAL_PREFIX}…)`;
  cdc.keys.forEach((k, i) => {
    if (reservedIn([k], own).length) ctx.addIssue({ code: 'custom', path: ['primary-key', i], message: ownMessage(k) });
  });
  for (const c of [...cdc.sequence, ...(cdc.op ? [cdc.op] : [])])
    if (reservedIn([c], own).length) ctx.addIssue({ code: 'custom', path: [c === cdc.op ? 'op-column' : seqPath], message: ownMessage(c) });
};

/** The descriptions v1 and v2 share (the JSON Schema shows them in editors). */
const CDC = 'How the events of one key are resolved: the latest by sequence-by wins; deletes by op-column/delete-values or delete-when.';
const PRIMARY_KEY = () =>
  z.array(columnName()).min(1, 'needs at least one key column').describe('The business key: one silver row per distinct value of these columns.');
const SEQUENCE_BY =
  'The column that orders the events of one key (a log sequence number, a commit timestamp): the highest wins; a tie or NULL fails the run (65).';
const OP_COLUMN = () => columnName().optional().describe('The column holding the operation (e.g. op = c/u/d); with delete-values, which events are deletes.');
const DELETE_VALUES = () => z.array(z.string().min(1)).min(1).optional().describe('The op-column values that mean a delete, e.g. ["d", "D"].');
const TARGET_TABLE = () => tableName().describe('The silver table: <catalog>.<tenant>_silver.<table>, stored at <storage-root>/silver/<table>.');
const TARGET_CATALOG = () => catalogName().optional().describe('A catalog of the platform config (its default when omitted).');

const source = z
  .object({
    table: name().describe(
      'The bronze table holding the CDC events: <storage-root>/bronze/<table> (parquet), or <catalog>.<tenant>_bronze.<table> with v2 source.format.',
    ),
    where: expression('source.where')
      .optional()
      .describe(
        'A config expression (docs/expressions.md) that keeps only matching events, e.g. "region = \'eu\'"; evaluated before the latest event per key is chosen.',
      ),
  })
  .strict()
  .describe('Where the CDC events come from.');

/**
 * A silver column type from config. It travels as a type name that Spark parses, so only these
 * forms pass: the scalar types and decimal(p,s).
 */
const SCALAR_TYPES = ['string', 'boolean', 'tinyint', 'smallint', 'int', 'bigint', 'float', 'double', 'date', 'timestamp', 'timestamp_ntz', 'binary'];
const columnType = () => columnTypeName(SCALAR_TYPES);

/**
 * v2: which bronze partitions to read (`--set source.snapshot-date={{ ds }}`), without it all of
 * them; and which bronze format (what jdbc-snapshot-ingest's target.format wrote).
 */
const sourceV2 = source
  .extend({
    ...bronzeFormatKeys,
    'snapshot-date': z
      .union([isoDate(), z.array(isoDate()).min(1)])
      .transform((v) => (Array.isArray(v) ? v : [v]))
      .refine((dates) => new Set(dates).size === dates.length, 'lists a date twice')
      .optional()
      .describe(
        'The bronze snapshot date(s) to merge, e.g. --set source.snapshot-date={{ ds }}: exactly <bronze>/_snapshot_date=<date> is read for each (a table: filtered by that literal date), no other partition is listed or read; a date without a partition skips the run (99). Without it, every partition is read.',
      ),
    read: sourceRead,
  })
  .superRefine(checkBronzeCatalog)
  .superRefine(checkIncremental)
  .describe('Where the CDC events come from.');

const v1Sections = {
  source,
  cdc: z
    .object({
      'primary-key': PRIMARY_KEY(),
      'sequence-by': columnName().describe(SEQUENCE_BY),
      'op-column': OP_COLUMN(),
      'delete-values': DELETE_VALUES(),
    })
    .strict()
    .superRefine((cdc, ctx) => {
      cdcChecks({ keys: cdc['primary-key'], sequence: [cdc['sequence-by']], op: cdc['op-column'] }, ctx, 'sequence-by');
      if (cdc['delete-values'] && cdc['op-column'] === undefined)
        ctx.addIssue({ code: 'custom', path: ['delete-values'], message: 'needs cdc.op-column (which column holds the operation?)' });
    })
    .describe(CDC),
  target: z.object({ table: TARGET_TABLE(), catalog: TARGET_CATALOG() }).strict().describe('The silver table the events are merged into.'),
};

const v2 = defineVersion(2, {
  sections: {
    source: sourceV2,
    cdc: z
      .object({
        'primary-key': PRIMARY_KEY(),
        'sequence-by': z
          .union([columnName(), z.array(columnName()).min(1)])
          .transform((v) => (Array.isArray(v) ? v : [v]))
          .describe(`${SEQUENCE_BY} Several columns order lexicographically (e.g. [lsn, tx_seq]).`),
        'op-column': OP_COLUMN(),
        'delete-values': DELETE_VALUES(),
        'delete-when': expression('cdc.delete-when')
          .optional()
          .describe('A config expression that marks an event as a delete (e.g. "__deleted = \'true\'"), instead of op-column/delete-values.'),
        'tombstone-retention-days': z
          .number()
          .int()
          .min(1)
          .max(36_500)
          .default(30)
          .describe('How long a deleted key keeps its tombstone (which stops a late, older event from resurrecting it), in days.'),
        'unavailable-columns': z
          .object({
            'listed-in': columnName().describe(
              "The bronze column (an array of column names) listing, per event, the columns whose value the source did not send: kafka-bronze-ingest's _cdc_unavailable (Debezium's unchanged TOASTed values). It never reaches silver.",
            ),
            columns: z
              .array(columnName())
              .min(1)
              .describe(
                "The columns it may list (PostgreSQL's TOASTable ones: long text, bytea, json): each keeps its latest known value, from an earlier event of the batch, else silver's. An event listing another column fails the run (65).",
              ),
          })
          .strict()
          .optional()
          .describe('Columns a source may leave out of an event (an unchanged TOASTed value): silver keeps their value, never a placeholder or NULL.'),
      })
      .strict()
      .superRefine((cdc, ctx) => {
        cdcChecks({ keys: cdc['primary-key'], sequence: cdc['sequence-by'], op: cdc['op-column'] }, ctx, 'sequence-by');
        if (cdc['delete-values'] && cdc['op-column'] === undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-values'], message: 'needs cdc.op-column (which column holds the operation?)' });
        if (cdc['delete-when'] !== undefined && cdc['op-column'] !== undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-when'], message: 'use either cdc.delete-when or cdc.op-column/delete-values, not both' });
        const u = cdc['unavailable-columns'];
        const cdcCols = [...cdc['primary-key'], ...cdc['sequence-by'], ...(cdc['op-column'] ? [cdc['op-column']] : [])];
        if (u && cdcCols.includes(u['listed-in']))
          ctx.addIssue({ code: 'custom', path: ['unavailable-columns', 'listed-in'], message: 'must differ from the key, sequence and op columns' });
        u?.columns.forEach((c, i) => {
          if (cdcCols.includes(c) || c === u['listed-in'])
            ctx.addIssue({ code: 'custom', path: ['unavailable-columns', 'columns', i], message: `"${c}" is a key, sequence or op column (always sent)` });
          if (u.columns.indexOf(c) !== i) ctx.addIssue({ code: 'custom', path: ['unavailable-columns', 'columns', i], message: `"${c}" appears twice` });
        });
      })
      .describe(CDC),
    columns: z
      .object({
        include: z.array(columnName()).min(1).optional().describe('Only these bronze columns reach silver (keys and sequence columns always do).'),
        exclude: z.array(columnName()).min(1).optional().describe('These bronze columns do not reach silver (never a key or sequence column).'),
        types: z
          .record(columnName(), columnType())
          .optional()
          .describe('Silver column types, e.g. { amount = "decimal(12,2)" }: every batch is cast to them, so silver is created with them and keeps them.'),
      })
      .strict()
      .refine((c) => !(c.include && c.exclude), 'use either columns.include or columns.exclude, not both')
      .optional()
      .describe('Which columns silver keeps, and their types.'),
    'schema-evolution': z
      .enum(['fail', 'add-columns'])
      .default('fail')
      .describe('A bronze column silver does not have: fail the run (65), or add it to silver (add-columns).'),
    target: z
      .object({
        table: TARGET_TABLE(),
        catalog: TARGET_CATALOG(),
        format: z.enum(SILVER_FORMATS).optional().describe("The table format; must be the catalog's (checked against the platform config)."),
        ...tableShapeKeys,
      })
      .strict()
      .describe('The silver table the events are merged into.'),
  },
  refine: (c, ctx) => {
    const protectedCols = [...c.cdc['primary-key'], ...c.cdc['sequence-by']];
    for (const [i, x] of (c.columns?.exclude ?? []).entries())
      if (protectedCols.includes(x))
        ctx.addIssue({ code: 'custom', path: ['columns', 'exclude', i], message: `"${x}" is a key or sequence column and cannot be excluded` });
    for (const x of Object.keys(c.columns?.types ?? {})) {
      const path = ['columns', 'types', x];
      if ((BRONZE_STAMPS as readonly string[]).includes(x))
        ctx.addIssue({ code: 'custom', path, message: `"${x}" is a bronze metadata column and never reaches silver` });
      else if (x === c.cdc['op-column']) ctx.addIssue({ code: 'custom', path, message: `"${x}" is cdc.op-column and never reaches silver` });
      else if (c.columns?.exclude?.includes(x)) ctx.addIssue({ code: 'custom', path, message: `"${x}" is excluded (columns.exclude)` });
      else if (c.columns?.include && !c.columns.include.includes(x) && !protectedCols.includes(x))
        ctx.addIssue({ code: 'custom', path, message: `"${x}" is not in columns.include` });
    }
  },
});

/** The spec the plan is built from: the newest version's config. */
export type CdcSilverMergeSpec = SpecOf<typeof v2.sections>;

/** v1 is the seed project's shape: parquet bronze, one sequence column, op values. */
const v1 = defineVersion(1, { sections: v1Sections }).migrate((c): CdcSilverMergeSpec => ({
  tenant: c.tenant,
  source: { ...c.source, format: 'parquet' },
  cdc: {
    'primary-key': c.cdc['primary-key'],
    'sequence-by': [c.cdc['sequence-by']],
    'op-column': c.cdc['op-column'],
    'delete-values': c.cdc['delete-values'],
    'tombstone-retention-days': 30,
  },
  'schema-evolution': 'fail',
  target: c.target,
}));

/** Both versions, normalised: what the plan is built from. */
interface MergeSpec {
  source: { table: string; format: BronzeFormat; catalog?: string | undefined };
  /** source.read: the commits since the position silver recorded, or all of them, recording it; undefined: all, nothing recorded. */
  read?: 'full' | 'incremental' | undefined;
  where?: ConfigExpression | undefined;
  /** The bronze partitions to read; all of them when undefined. */
  snapshotDates?: string[] | undefined;
  keys: string[];
  sequence: string[];
  isDelete: Expr;
  /** Columns of bronze that never reach silver besides the bronze metadata (the op column). */
  cdcOnly: string[];
  /** The column listing each event's unsent columns, and the columns it may list. */
  unavailable?: { listedIn: string; columns: string[] } | undefined;
  include?: string[] | undefined;
  exclude?: string[] | undefined;
  /** Declared silver column types (validated type names). */
  types: [string, string][];
  schemaEvolution: 'fail' | 'add-columns';
  tombstoneRetentionDays: number;
  target: { table: string; catalog?: string | undefined; format?: SilverFormat | undefined } & TableShapeSpec;
  /** Config paths whose expressions the plan carries: those steps are checked by the tenant policy. */
  untrusted: string[];
}

function opDelete(op: string | undefined, values: string[] | undefined): Expr {
  // A NULL op is an upsert: only an explicit delete value deletes.
  return op ? fn('coalesce', isIn(col(op), (values ?? ['d']).map(lit)), lit(false)) : lit(false);
}

const mergeSpec = (c: CdcSilverMergeSpec): MergeSpec => ({
  source: c.source,
  read: c.source.read,
  where: c.source.where,
  snapshotDates: c.source['snapshot-date'],
  keys: c.cdc['primary-key'],
  sequence: c.cdc['sequence-by'],
  isDelete: c.cdc['delete-when'] ? fn('coalesce', configExpr(c.cdc['delete-when']), lit(false)) : opDelete(c.cdc['op-column'], c.cdc['delete-values']),
  cdcOnly: [...(c.cdc['op-column'] ? [c.cdc['op-column']] : []), ...(c.cdc['unavailable-columns'] ? [c.cdc['unavailable-columns']['listed-in']] : [])],
  unavailable: c.cdc['unavailable-columns'] && { listedIn: c.cdc['unavailable-columns']['listed-in'], columns: c.cdc['unavailable-columns'].columns },
  include: c.columns?.include,
  exclude: c.columns?.exclude,
  types: Object.entries(c.columns?.types ?? {}),
  schemaEvolution: c['schema-evolution'],
  tombstoneRetentionDays: c.cdc['tombstone-retention-days'],
  target: c.target,
  untrusted: [...(c.source.where !== undefined ? ['source.where'] : []), ...(c.cdc['delete-when'] !== undefined ? ['cdc.delete-when'] : [])],
});

// ---------------------------------------------------------------------------------------------
// The plan

/**
 * The bronze columns the config names, at their paths: each must be a column of bronze (78
 * otherwise, before anything is written). Not columns.exclude: excluding a column a batch lacks
 * changes nothing.
 */
function requiredColumns(spec: MergeSpec): RequiredColumn[] {
  const list = (path: string, cols: readonly string[] | undefined) => (cols ?? []).map((column, i) => ({ path: `${path}[${i}]`, column }));
  return [
    ...list('cdc.primary-key', spec.keys),
    ...(spec.sequence.length === 1 ? [{ path: 'cdc.sequence-by', column: spec.sequence[0]! }] : list('cdc.sequence-by', spec.sequence)),
    ...spec.cdcOnly.map((column) => ({ path: 'cdc.op-column', column })),
    ...list('columns.include', spec.include),
    ...spec.types.map(([column]) => ({ path: `columns.types.${column}`, column })),
  ];
}

/** `a > b` for sequences compared left to right: (a1 > b1) or (a1 = b1 and a2 > b2) … */
export function sequenceGreater(columns: string[], a: string, b: string): Expr {
  return sequenceGreaterOf(
    columns.map((c) => col(a, c)),
    columns.map((c) => col(b, c)),
  );
}

/** `a > b` for two lists of sequence values of equal length, compared left to right. */
function sequenceGreaterOf(a: Expr[], b: Expr[]): Expr {
  const [x, ...xs] = a;
  const [y, ...ys] = b;
  if (x === undefined || y === undefined) return lit(false);
  const head = gt(x, y);
  return xs.length === 0 ? head : or(head, and(eq(x, y), sequenceGreaterOf(xs, ys)));
}

/** The tables a merge touches: silver, its tombstones, bronze. */
interface Tables {
  readonly silver: SilverRef;
  readonly tombstones: SilverRef;
  readonly bronze: BronzeRef;
  /** source.read = incremental: the commits of bronze since the position silver recorded. */
  readonly incremental?: IncrementalRead | undefined;
}

/**
 * The plan, phase by phase as docs/templates/cdc-silver-merge.md tells it: resolve and check the
 * batch (the one step with config logic), create what is missing, measure against silver and the
 * tombstones, commit (tombstones first), take the second look where it can find something, forget
 * expired tombstones, and read the commit the run left.
 */
function plan(ctx: JobContext, spec: MergeSpec): JobPlan {
  const silver = silverRef(ctx, spec.target);
  const bronze = bronzeRef(ctx, spec.source, 'source');
  const incremental =
    spec.read !== undefined && bronze.kind === 'table'
      ? incrementalRead({ table: bronze.table, format: bronze.format }, { table: silver.table, format: silver.catalog.format }, spec.read)
      : undefined;
  const tables: Tables = { silver, tombstones: silverCompanion(ctx, silver, TOMBSTONE_SUFFIX), bronze, incremental };
  const batch = resolvePhase(tables, spec);
  const measured = measurePhase(tables, spec, batch.fingerprint);
  const look = secondLookPhase(ctx, tables, spec, measured);
  const rest: Step[] = [
    ...batch.steps,
    ...createPhase(ctx, tables, spec),
    ...measured.steps,
    ...commitPhase(ctx, tables, spec, measured, batch),
    ...look.steps,
    ...expiryPhase(tables, spec, measured.measure),
    // window-commits already reported silver's commit: read it again only if the look wrote silver.
    readCommitStep(silver.table, silver.catalog.format, look.wroteSilver),
  ];
  // The batch silver's current commit applied, onto unchanged tables: every later step is provably
  // a no-op (docs/templates/cdc-silver-merge.md, "A rerun of an applied batch"), so none is sent.
  const fp = batch.fingerprint;
  const steps: Step[] = fp
    ? [...batch.checks, fp, ...rest.map((s): Step => ({ ...s, when: (facts) => facts.count(fp.col('unchanged')) === 0 && (s.when?.(facts) ?? true) }))]
    : [...batch.checks, ...rest];
  // Bronze columns that JDBC reported as varchar(n) (SQLite: varchar(0)) are text to silver: a
  // Delta table created from them would enforce the length on every write.
  const keyAndSeq = [...spec.keys, ...spec.sequence];
  return {
    steps,
    sessionConf: MERGE_SESSION_CONF,
    lineage: columnLineage(tables.bronze, silver.table, tables.tombstones.table, keyAndSeq, spec.types),
    ...(incremental ? { bind: incremental.bind } : {}),
  };
}

/** The resolved batch's rows, kept by check-batch: the latest event per key and its delete flag. */
const latest = (): Query =>
  Query.materialized(BATCH)
    .filter(col(KEY_LATEST))
    .drop(...CHECK_COLUMNS);
// KEEP (cdc.unavailable-columns) is the merge's, never silver's; dropping it where absent is a no-op.
const silverColumns = (): Query => latest().drop(DELETE_FLAG, KEEP);

/**
 * Read bronze once, resolve it to the latest event per key with its delete flag and the key's
 * checks, and keep that on the server for the run (check-batch): every later step reads those rows.
 * Only check-batch carries config logic (source.where, cdc.delete-when); the later steps add nothing
 * from the config but names and types.
 */
function resolvePhase(
  { bronze, incremental, silver, tombstones }: Tables,
  spec: MergeSpec,
): { checks: Step[]; steps: Step[]; check: RowsStep<(typeof BATCH_CHECKS)[number]>; fingerprint?: FingerprintStep | undefined } {
  const { keys, sequence } = spec;
  const keyAndSeq = [...keys, ...sequence];
  // Parquet bronze: exactly the selected partitions are listed and read; a bronze table: read
  // through its catalog, filtered by the literal dates. Without a selection, all of bronze.
  // Incremental: the commits since silver's position (found by the position steps first).
  const read = incremental ? { rows: incremental.rows, checks: incremental.steps } : readBronze(bronze, spec.snapshotDates);
  // Bronze's columns before any config logic: one named like the plan's internal columns
  // (`__lake_…`) would be replaced by the template's (and vanish from silver) or make its
  // references ambiguous.
  const checkColumns = checkSourceColumns({
    source: read.rows,
    sourceName: bronze.name,
    configPath: 'source.table',
    template: TEMPLATE,
    reserved: { names: [], prefixes: [LAKE_INTERNAL_PREFIX] },
    required: requiredColumns(spec),
  });
  let events = read.rows;
  if (spec.where) events = events.filter(configExpr(spec.where));
  const payload = events.drop(...BRONZE_STAMPS);
  let resolved = resolveBatch(payload, keys, sequence, spec.isDelete, spec.unavailable).drop(...spec.cdcOnly);
  const internal = [DELETE_FLAG, ...(spec.unavailable ? [KEEP] : []), ...CHECK_COLUMNS];
  if (spec.include) resolved = resolved.select(...[...new Set([...keyAndSeq, ...spec.include])], ...internal);
  if (spec.exclude) resolved = resolved.drop(...spec.exclude);
  // Declared types: silver is created with them, and every later batch is cast to them.
  if (spec.types.length) resolved = resolved.withColumns(spec.types.map(([c, t]) => [c, cast(col(c), t)] as const));
  const check = materializeStep({
    id: 'check-batch',
    ...(spec.untrusted.length ? { untrusted: spec.untrusted } : {}),
    title: `Resolve and check the CDC batch in ${bronze.name}: latest event per key, events, NULL keys or sequences, ambiguous ties`,
    name: BATCH,
    query: resolved,
    check: batchTotals(Query.materialized(BATCH)),
    columns: BATCH_CHECKS,
    interpret: ([r]) => {
      const events = Number(r?.events ?? 0);
      // Incremental: new commits without events still move silver's position (record-position).
      if (events === 0 && !incremental) return { skip: `no CDC events in ${bronze.name}${spec.where ? ' matching source.where' : ''}` };
      // Flagged events fail the batch in check-keys, which counts their keys for the message.
      return { metrics: { rowsRead: events } };
    },
  });
  const checkKeys = queryStep({
    id: 'check-keys',
    title: `Count the keys of the CDC batch's events with a NULL key or sequence, an ambiguous tie or an unlisted column`,
    when: (facts) => facts.count(check.col('flagged')) > 0,
    query: flaggedKeys(Query.materialized(BATCH), keys, sequence),
    columns: FLAGGED_KEYS,
    interpret: ([r]) => {
      if (Number(r?.null_groups ?? 0) > 0)
        return {
          fail: new DataError(`CDC events have a NULL in cdc.primary-key or cdc.sequence-by, e.g. ${String(r?.null_example)}`, { code: 'CDC_NULL_KEY' }),
        };
      if (Number(r?.unlisted ?? 0) > 0)
        return {
          fail: new DataError(
            `${Number(r?.unlisted)} key(s) have events whose ${spec.unavailable?.listedIn} lists a column that cdc.unavailable-columns.columns does not name (silver would lose its value), e.g. ${String(r?.unlisted_example)}`,
            { code: 'CDC_UNAVAILABLE_UNLISTED' },
          ),
        };
      if (Number(r?.ties ?? 0) > 0)
        return {
          fail: new DataError(
            `${Number(r?.ties)} key(s) have different CDC events at the same sequence (which is latest cannot be told), e.g. ${String(r?.tie_example)}`,
            { code: 'CDC_AMBIGUOUS_SEQUENCE' },
          ),
        };
      // check-batch counted flagged events, so one of the three holds; anything else is a defect.
      throw new InternalError(`check-keys: check-batch flagged events that no check counts`);
    },
  });
  // Parquet bronze into Iceberg silver, read in full: the batch is its files (never rewritten in
  // place: Spark and jdbc-snapshot-ingest write new names) and the plan that resolves them.
  const fingerprint =
    bronze.kind === 'files' && !incremental && silver.catalog.format === 'iceberg'
      ? batchFingerprint(read.rows, JSON.stringify({ v: 1, batch: resolved.rel, evolution: spec.schemaEvolution }), silver, tombstones.table)
      : undefined;
  return { checks: read.checks, steps: [checkColumns, check, checkKeys], check, fingerprint };
}

/** What silver's current commit recorded of the batch it applied (Iceberg snapshot summary). */
const BATCH_STAMP = { batch: 'batch', keys: 'batch-keys', tombstonesAt: 'tombstones-at' } as const;
/** tombstones-at of a tombstone table without a commit yet (created empty, never written). */
const NO_COMMIT = 'none';
/** tombstones-at's suffix when the run recorded tombstones (one commit, on top of the base). */
const OWN_COMMIT = '+1';

/**
 * Is this batch the one silver's current commit applied, with both tables unchanged since? Its
 * MERGE's commit recorded the batch's fingerprint and the tombstone table's commit it decided on:
 * when silver's current snapshot carries this fingerprint and the tombstones are still at that
 * commit, every event is late again and nothing else can have changed, so the run reports what a
 * full rerun reports (committed: false, every key late) without reading bronze.
 */
function batchFingerprint(files: Query, identity: string, silver: SilverRef, tombstones: TableName): FingerprintStep {
  const parts = tableParts(silver.table);
  const tombParts = tableParts(tombstones);
  const stamp = (k: string) => sql`summary[${sql.value(`lakehouse-jobs.${k}`)}]`;
  // One pass over the two tables' metadata (a union, no join: one Spark job): silver's stamped
  // snapshots, the tombstones' commits, and where each main branch is (after a rollback, not the newest).
  const previous = Query.sql(
    sql`SELECT 'stamp' AS kind, CAST(snapshot_id AS STRING) AS snapshot, ${stamp(BATCH_STAMP.batch)} AS batch, ${stamp(BATCH_STAMP.keys)} AS batch_keys, ${stamp(BATCH_STAMP.tombstonesAt)} AS tombstones_at, ${stamp('attempt')} AS attempt, NULL AS parent FROM ${sql.table([...parts, 'snapshots'])} WHERE ${stamp(BATCH_STAMP.batch)} IS NOT NULL UNION ALL SELECT 'tombstone-commit', CAST(snapshot_id AS STRING), NULL, NULL, NULL, ${stamp('attempt')}, CAST(parent_id AS STRING) FROM ${sql.table([...tombParts, 'snapshots'])} UNION ALL SELECT 'silver', CAST(snapshot_id AS STRING), NULL, NULL, NULL, NULL, NULL FROM ${sql.table([...parts, 'refs'])} WHERE name = 'main' UNION ALL SELECT 'tombstones', CAST(snapshot_id AS STRING), NULL, NULL, NULL, NULL, NULL FROM ${sql.table([...tombParts, 'refs'])} WHERE name = 'main'`,
  );
  const table = displayTable(silver.table);
  return fingerprintStep({
    id: 'batch-fingerprint',
    title: `Compare the batch (its files, listed, and its plan) with the one ${table}'s current commit applied`,
    source: files,
    identity,
    previous,
    interpret: (fingerprint, rows) => {
      const str = (v: unknown) => (v === null || v === undefined ? undefined : String(v));
      const main = (kind: string) => str(rows.find((r) => r.kind === kind)?.snapshot);
      const current = main('silver');
      // Both tables' main refs, read before anything of the batch or the tables: the commit
      // window's base (no rows: a table is missing, and base-commits reads it after the creates).
      const commits = rows.length ? { commits: { silver: current ?? null, tombstones: main('tombstones') ?? null } } : {};
      const applied = rows.find((r) => r.kind === 'stamp' && str(r.snapshot) === current);
      if (current === undefined || !applied || str(applied.batch) !== fingerprint) return commits;
      if (!tombstonesAsLeft(str(applied.tombstones_at), str(applied.attempt), main('tombstones') ?? NO_COMMIT, rows)) return commits;
      return {
        unchanged: true,
        output: {
          table,
          format: silver.catalog.format,
          location: silver.location,
          committed: false,
          snapshotId: current,
          metrics: { inserted: 0, updated: 0, deleted: 0, late: Number(applied.batch_keys ?? 0) },
        },
      };
    },
  });
}

/**
 * Are the tombstones where the MERGE that recorded `at` left them? `at` is the commit the run read
 * before deciding (its base), `+1` when the run then recorded tombstones: their current commit
 * must then be that run's (its attempt's nonce) and the base's child, nothing after it.
 */
function tombstonesAsLeft(at: string | undefined, attempt: string | undefined, current: string, rows: readonly Row[]): boolean {
  if (at === undefined) return false;
  if (!at.endsWith(OWN_COMMIT)) return at === current;
  const commit = rows.find((r) => r.kind === 'tombstone-commit' && String(r.snapshot) === current);
  return attempt !== undefined && commit !== undefined && String(commit.attempt) === attempt && String(commit.parent) === at.slice(0, -OWN_COMMIT.length);
}

/** Namespace, silver and tombstone tables on first run, from the batch's columns; then silver's schema is fixed. */
function createPhase(ctx: JobContext, { silver, tombstones }: Tables, spec: MergeSpec): Step[] {
  const { catalog, table: target, location } = silver;
  const keyAndSeq = [...spec.keys, ...spec.sequence];
  const shape = tableShape(spec.target, catalog.format);
  return [
    createNamespaceStep(target),
    {
      kind: 'ensureTable',
      id: 'create-table',
      title: `Create ${displayTable(target)} at ${location} if missing`,
      table: target,
      location,
      configPath: 'target.table',
      create: createTable(silverColumns(), target, catalog.format, location, shape),
      shape,
    },
    {
      kind: 'ensureTable',
      id: 'create-tombstones',
      title: `Create ${displayTable(tombstones.table)} if missing`,
      table: tombstones.table,
      location: tombstones.location,
      configPath: 'target.table',
      create: latest()
        .select(...keyAndSeq, alias(fn('current_timestamp'), DELETED_AT), alias(lit(ctx.runId), RUN_ID))
        .limit(0)
        .writeTo(tableParts(tombstones.table), 'create', { provider: catalog.format, properties: tableProperties(catalog.format, tombstones.location) }),
    },
    {
      kind: 'compareSchemas',
      id: 'check-schema',
      title: `Compare the batch's columns with ${displayTable(target)}`,
      source: silverColumns(),
      table: target,
      interpret: (diff) => schemaDecision(diff, displayTable(target), tableParts(target), spec.schemaEvolution),
    },
  ];
}

const MEASURE_COLUMNS = ['inserted', 'updated', 'deleted', 'late', 'tombstones', 'stale', 'expired'] as const;

/** The batch joined to the tombstones known before this run: they decide whether an upsert is newer than a delete. */
function withKnownTombstones({ tombstones }: Tables, spec: MergeSpec) {
  const { keys, sequence } = spec;
  const known = Query.table(tableParts(tombstones.table))
    .select(...keys, ...sequence)
    .as(TOMB);
  const joined = latest()
    .as(RESOLVED)
    .join(known, and(...keys.map((k) => eqNullSafe(col(RESOLVED, k), col(TOMB, k)))), 'left');
  const afterTombstone = alias(or(isNull(col(TOMB, keys[0]!)), sequenceGreater(sequence, RESOLVED, TOMB)), AFTER_TOMBSTONE);
  return { joined, afterTombstone };
}

/**
 * Record the tables' current commits (the base of the commit window; already known when the batch
 * fingerprint read them), then count what the merge will insert, update and delete, the late
 * events, the new tombstones and the stale rows, and the tombstones past their retention.
 */
function measurePhase(tables: Tables, spec: MergeSpec, fingerprint: FingerprintStep | undefined) {
  const { catalog, table: target, location } = tables.silver;
  // The fingerprint read both tables' main refs first: that is the base when it could (no step).
  const knownBase =
    fingerprint && ((facts: Facts) => (facts.rows(fingerprint)?.[0]?.commits ?? undefined) as Readonly<Record<string, string | null>> | undefined);
  const window = commitWindow(
    catalog.format,
    [
      { label: 'silver', table: target, reportCurrent: true },
      { label: 'tombstones', table: tables.tombstones.table },
    ],
    knownBase,
  );
  const { joined, afterTombstone } = withKnownTombstones(tables, spec);
  // measure also sees the known tombstone's sequence: it counts the rows the second look would find.
  const measured = joined.select(
    star(RESOLVED),
    afterTombstone,
    alias(isNotNull(col(TOMB, spec.keys[0]!)), HAS_TOMB),
    ...spec.sequence.map((s) => alias(col(TOMB, s), `${TOMB_SEQ}${s}`)),
  );
  const measure = queryStep({
    id: 'measure',
    title: `Count the inserts, updates, deletes, tombstones and late events of this batch, and the tombstones older than ${spec.tombstoneRetentionDays} days`,
    // The tombstones past cdc.tombstone-retention-days, counted in the same query (one round trip
    // less than a step of their own): this run's tombstones are new, so none of them is among them.
    query: measureQuery(measured, target, spec.keys, spec.sequence).join(
      Query.table(tableParts(tables.tombstones.table))
        .filter(expired(spec.tombstoneRetentionDays))
        .aggregate([], [alias(fn('count', lit(1)), 'expired')]),
      [],
      'cross',
    ),
    columns: MEASURE_COLUMNS,
    interpret: ([r]) => {
      const metrics = { inserted: Number(r?.inserted ?? 0), updated: Number(r?.updated ?? 0), deleted: Number(r?.deleted ?? 0), late: Number(r?.late ?? 0) };
      const changes = metrics.inserted + metrics.updated + metrics.deleted;
      return {
        output: { table: displayTable(target), format: catalog.format, location, committed: changes + Number(r?.tombstones ?? 0) > 0, metrics },
        metrics: { rowsWritten: changes },
      };
    },
  });
  return { steps: [...window.base, measure], measure, window };
}

/** Rows measure found the merge changes in silver. */
const silverChanges = (facts: Facts, m: RowsStep<(typeof MEASURE_COLUMNS)[number]>) =>
  facts.count(m.col('inserted')) + facts.count(m.col('updated')) + facts.count(m.col('deleted'));

/** Tombstones first: if the run dies between the two merges, a rerun still deletes the rows. Each MERGE only when it changes something. */
function commitPhase(
  ctx: JobContext,
  tables: Tables,
  spec: MergeSpec,
  { measure, window }: { measure: RowsStep<(typeof MEASURE_COLUMNS)[number]>; window: CommitWindow },
  batch: { check: RowsStep<(typeof BATCH_CHECKS)[number]>; fingerprint?: FingerprintStep | undefined },
): Step[] {
  const { keys, sequence } = spec;
  const target = tables.silver.table;
  const tombstones = tables.tombstones.table;
  const { joined, afterTombstone } = withKnownTombstones(tables, spec);
  const source = keepUnsent(joined.select(star(RESOLVED), afterTombstone), target, keys, spec.unavailable);
  const newerThanRow = sequenceGreater(sequence, SOURCE, target.table);
  // The tombstones' commit the MERGE decided on (the base, and whether this run recorded tombstones
  // on top of it), recorded in its commit with the batch's fingerprint: a later run of the same
  // batch finds both as they were left and sends nothing (batchFingerprint).
  const fp = batch.fingerprint;
  const batchStamp = (facts: Facts): Record<string, string> => {
    const fingerprint = fp && facts.rows(fp)?.[0]?.fingerprint;
    const base = window.baseRows(facts)?.find((r) => r.tbl === 'tombstones');
    if (typeof fingerprint !== 'string' || !base || ctx.attempt === undefined) return {};
    const at = base.commit === null || base.commit === undefined ? NO_COMMIT : String(base.commit);
    return {
      [BATCH_STAMP.batch]: fingerprint,
      [BATCH_STAMP.keys]: String(facts.count(batch.check.col('keys'))),
      [BATCH_STAMP.tombstonesAt]: facts.count(measure.col('tombstones')) > 0 ? `${at}${OWN_COMMIT}` : at,
    };
  };
  return [
    {
      kind: 'command',
      id: 'record-tombstones',
      title: `Record the deleted keys in ${displayTable(tombstones)}`,
      when: (facts) => facts.count(measure.col('tombstones')) > 0,
      command: latest()
        .filter(col(DELETE_FLAG))
        .select(...keys, ...sequence, alias(fn('current_timestamp'), DELETED_AT), alias(lit(ctx.runId), RUN_ID))
        .as(SOURCE)
        .mergeInto(tableParts(tombstones), and(...keys.map((k) => eqNullSafe(col(tombstones.table, k), col(SOURCE, k)))), {
          whenMatched: [{ action: 'updateAll', condition: sequenceGreater(sequence, SOURCE, tombstones.table) }],
          whenNotMatched: [{ action: 'insertAll' }],
        }),
    },
    {
      kind: 'command',
      id: 'merge',
      title: `MERGE the latest event per key into ${displayTable(target)}`,
      // A rerun of an applied batch changes no row: no MERGE, so no new snapshot or version.
      when: (facts) => silverChanges(facts, measure) > 0,
      // Incremental: the MERGE's commit records the bronze commit the batch was read up to.
      ...(tables.incremental ? { stamp: tables.incremental.stamp } : fp ? { stamp: batchStamp } : {}),
      command: source.as(SOURCE).mergeInto(tableParts(target), and(...keys.map((k) => eqNullSafe(col(target.table, k), col(SOURCE, k)))), {
        whenMatched: [
          { action: 'delete', condition: and(col(SOURCE, DELETE_FLAG), newerThanRow) },
          { action: 'updateAll', condition: and(not(col(SOURCE, DELETE_FLAG)), newerThanRow, col(SOURCE, AFTER_TOMBSTONE)) },
        ],
        whenNotMatched: [{ action: 'insertAll', condition: and(not(col(SOURCE, DELETE_FLAG)), col(SOURCE, AFTER_TOMBSTONE)) }],
      }),
    },
    // Incremental, a batch that changes no silver row: its position still needs a commit of silver.
    ...(tables.incremental ? [tables.incremental.recordStep({ when: (facts) => silverChanges(facts, measure) === 0 })] : []),
  ];
}

/**
 * The merge decided on the tombstones as they were when it started. A run that recorded a newer
 * tombstone for one of our keys and deleted the row just before our merge committed could not see
 * our insert; we could not see its tombstone. Looking again after our commit closes that window,
 * and heals a run that died between its two merges. The look is skipped when no other writer
 * committed in the window and measure found no stale row (docs/templates/cdc-silver-merge.md).
 */
function secondLookPhase(
  ctx: JobContext,
  tables: Tables,
  spec: MergeSpec,
  { measure, window }: { measure: RowsStep<(typeof MEASURE_COLUMNS)[number]>; window: CommitWindow },
): { steps: Step[]; wroteSilver: (facts: Facts) => boolean } {
  const { catalog, table: target } = tables.silver;
  const tombstones = tables.tombstones.table;
  const { keys, sequence } = spec;
  const ownCommits = (facts: Facts) => ({
    // An incremental run commits to silver once either way: its MERGE, or its position alone.
    silver: silverChanges(facts, measure) > 0 || tables.incremental?.position(facts) !== undefined ? 1 : 0,
    tombstones: facts.count(measure.col('tombstones')) > 0 ? 1 : 0,
  });
  const find = queryStep({
    id: 'find-resurrected',
    when: (facts) => facts.count(measure.col('stale')) > 0 || window.foreignCommits(facts, ctx.attempt, ownCommits(facts)).length > 0,
    title: `Look for rows of this batch's keys that a newer tombstone deletes`,
    query: resurrected(latest(), target, tombstones, keys, sequence).aggregate([], [alias(fn('count', lit(1)), 'rows')]),
    columns: ['rows'],
    interpret: ([r]) => {
      const n = Number(r?.rows ?? 0);
      return n > 0 ? { output: { table: displayTable(target), format: catalog.format, committed: true, metrics: { repaired: n } } } : {};
    },
  });
  const found = (facts: Facts) => facts.count(find.col('rows')) > 0;
  const steps: Step[] = [
    ...window.after,
    find,
    {
      kind: 'command',
      id: 'delete-resurrected',
      title: `Delete the rows of ${displayTable(target)} that a newer tombstone deletes`,
      when: found,
      command: resurrected(latest(), target, tombstones, keys, sequence)
        .as(SOURCE)
        .mergeInto(tableParts(target), and(...keys.map((k) => eqNullSafe(col(target.table, k), col(SOURCE, k)))), {
          whenMatched: [{ action: 'delete', condition: sequenceGreater(sequence, SOURCE, target.table) }],
        }),
    },
  ];
  return { steps, wroteSilver: found };
}

/** Tombstones older than cdc.tombstone-retention-days are forgotten, when measure counted any. */
function expiryPhase({ tombstones }: Tables, spec: MergeSpec, measure: RowsStep<(typeof MEASURE_COLUMNS)[number]>): Step[] {
  const days = spec.tombstoneRetentionDays;
  return [
    {
      kind: 'command',
      id: 'expire-tombstones',
      title: `Forget tombstones older than ${days} days`,
      when: (facts) => facts.count(measure.col('expired')) > 0,
      command: sqlCommand(
        sql`DELETE FROM ${sql.target(tableParts(tombstones.table))} WHERE ${sql.id(DELETED_AT)} < current_timestamp() - make_dt_interval(${sql.value(Math.trunc(days))})`,
      ),
    },
  ];
}

/**
 * Column lineage (OpenLineage): every silver column is the bronze column of the same name, copied
 * as is or cast to its declared type; the tombstones' key and sequence columns are bronze's too.
 */
function columnLineage(bronze: BronzeRef, target: TableName, tombstones: TableName, keyAndSeq: readonly string[], types: [string, string][]): PlanLineage {
  const input: DatasetRef = bronze.kind === 'table' ? { kind: 'table', table: bronze.name } : { kind: 'path', path: bronze.location };
  const cast = new Set(types.map(([c]) => c));
  const from = (fields: readonly string[]): Record<string, ColumnSource[]> =>
    Object.fromEntries(fields.map((f) => [f, [{ input, field: f, transformation: cast.has(f) ? 'TRANSFORMATION' : 'IDENTITY' }]]));
  return {
    columns: (output, fields) => {
      if (output.kind !== 'table') return undefined;
      if (output.table === displayTable(target)) return from(fields);
      if (output.table === displayTable(tombstones)) return from(fields.filter((f) => keyAndSeq.includes(f)));
      return undefined;
    },
  };
}

/**
 * Silver's schema is fixed when it is created: a batch may not drop a column or change a column's
 * type (65, SCHEMA_CHANGED, naming column, silver type and batch type); new columns stop the run
 * unless `schema-evolution = add-columns`, which adds them (and only them) first.
 */
export function schemaDecision(diff: SchemaDiff, table: string, parts: string[], evolution: 'fail' | 'add-columns'): { fail?: DataError; commands?: Cmd[] } {
  if (diff.missing.length) return { fail: new DataError(`the batch lacks columns that ${table} has: ${diff.missing.join(', ')}`, { code: 'SCHEMA_CHANGED' }) };
  if (diff.changed.length)
    return {
      fail: new DataError(
        `the batch changes the type of ${diff.changed.map((c) => `${c.name} (${table} has ${c.tableType}, the batch ${c.sourceType})`).join(', ')}; silver's column types are fixed when it is created (cast the column upstream, or write to a new table)`,
        { code: 'SCHEMA_CHANGED' },
      ),
    };
  if (!diff.added.length) return {};
  if (evolution === 'fail')
    return {
      fail: new DataError(
        `the batch has new columns ${diff.added.map((f) => `${f.name} ${f.type}`).join(', ')}; set schema-evolution = add-columns (schema-version 2) to add them`,
        { code: 'SCHEMA_CHANGED' },
      ),
    };
  // A type as Spark reported it for the batch's own column: Spark's type syntax, not config text.
  const columns = sql.join(
    diff.added.map((f) => sql`${sql.id(f.name)} ${sql.sparkType(f.type)}`),
    sql`, `,
  );
  return { commands: [sqlCommand(sql`ALTER TABLE ${sql.target(parts)} ADD COLUMNS (${columns})`)] };
}

/** Tombstones past the retention period. */
function expired(days: number): Expr {
  return fn('<', col(DELETED_AT), fn('-', fn('current_timestamp'), fn('make_dt_interval', lit(Math.trunc(days)))));
}

/**
 * The tombstones of this batch's keys that are newer than the key's row in silver, read now: rows
 * that a concurrent run brought back after another run deleted them (key and the tombstone's
 * sequence, one row per key). The batch's keys are those of its resolved rows (check-batch kept
 * them): no second read of bronze.
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
 * The latest event per key, in one pass over the events (one shuffle by key, one sort): order the
 * key's events by sequence (latest last) and, among equal sequences, by a hash of the payload's
 * values (xxhash64, 64 bits), so that identical events at one sequence lie next to each other. Two
 * neighbours at one sequence differ when their hashes differ, and where they agree when their
 * payloads' JSON differs (the hash skips NULL fields: (NULL, 'x') and ('x', NULL) hash alike; two
 * different payloads may also collide): exact, with JSON made only for those pairs (replays,
 * mostly), not for every event, which was half of the numbering's cost. Exact in any order of the
 * events at one sequence: unless they are all one event, two neighbours among them differ. The
 * same window numbers the key's events (on its latest event: how many it has) and marks its latest
 * event (no next one). The checks are flags of single events (a NULL key or sequence, a tie with
 * the neighbour, an unlisted column), not aggregates over the key: a window aggregate over each key
 * cost as much as the rest of the numbering. The result keeps each key's latest event and every
 * flagged event: check-batch counts the flagged events (`batchTotals`), and a batch with any fails
 * in check-keys, which counts their keys (`flaggedKeys`), so the later steps read the latest events
 * only (`latest`). Each event gets its delete flag. Keys whose events are all identical keep one
 * of them.
 */
export function resolveBatch(payload: Query, keys: string[], sequence: string[], isDelete: Expr, unavailable?: { listedIn: string; columns: string[] }): Query {
  const keyCols = keys.map((k) => col(k));
  const ordered = (f: Expr) => over(f, keyCols, [...sequence.map((s) => asc(col(s))), desc(col(PAYLOAD_HASH))]);
  const prev = (c: string) => ordered(fn('lag', col(c), lit(1)));
  const nullish = or(...[...keys, ...sequence].map((c) => isNull(col(c))));
  // A column the source did not send takes the key's latest event that did send it (NULL-ordered
  // rows are skipped by max_by); none in the batch: silver's value (KEEP, applied by keepUnsent).
  // Over the ordered window's default frame (the key's events up to this one and its peers), which
  // on the key's latest event is all of them.
  const listed = unavailable ? fn('coalesce', col(unavailable.listedIn), fn('array')) : undefined;
  const sent = (c: string) => not(fn('array_contains', listed!, lit(c)));
  const latestSent = (c: string) =>
    ordered(
      fn(
        'max_by',
        fn('if', sent(c), fn('named_struct', lit('v'), col(c)), lit(null)),
        fn('if', sent(c), fn('named_struct', ...sequence.flatMap((s) => [lit(s), col(s)])), lit(null)),
      ),
    );
  const unlisted = unavailable ? fn('>', fn('size', fn('array_except', listed!, fn('array', ...unavailable.columns.map(lit)))), lit(0)) : lit(false);
  // Spark's hashes skip NULL fields, so (NULL, 'x') and ('x', NULL) hash alike: where the hashes
  // agree (replays, mostly), the two payloads' JSON decides. `and` stops at its first false, so the
  // JSON is made only for neighbours at one sequence whose hashes agree; the neighbour's payload is
  // taken inside the window, never carried through the shuffle.
  const samePayload = and(
    eqNullSafe(prev(PAYLOAD_HASH), col(PAYLOAD_HASH)),
    eq(fn('to_json', ordered(fn('lag', fn('struct', star()), lit(1)))), fn('to_json', fn('struct', star()))),
  );
  const resolved = payload
    .withColumns([
      [PAYLOAD_HASH, fn('xxhash64', fn('struct', star()))],
      [DELETE_FLAG, isDelete],
    ])
    .withColumns([
      [KEY_EVENTS, ordered(fn('row_number'))],
      [KEY_LATEST, ordered(fn('lead', lit(false), lit(1), lit(true)))],
      [KEY_TIE, fn('coalesce', and(...sequence.map((s) => eqNullSafe(prev(s), col(s))), not(samePayload)), lit(false))],
      ...(unavailable?.columns ?? []).map((c, i) => [`${AVAILABLE}${i}`, latestSent(c)] as const),
    ])
    .withColumns([
      [KEY_NULL, nullish],
      [KEY_UNLISTED, unlisted],
    ])
    .filter(or(col(KEY_LATEST), col(KEY_TIE), col(KEY_NULL), col(KEY_UNLISTED)))
    .drop(PAYLOAD_HASH);
  if (!unavailable) return resolved;
  const av = (i: number) => col(`${AVAILABLE}${i}`);
  return resolved
    .withColumns([
      ...unavailable.columns.map((c, i) => [c, fn('if', isNull(av(i)), lit(null), col(`${AVAILABLE}${i}`, 'v'))] as const),
      [KEEP, fn('array_compact', fn('array', ...unavailable.columns.map((c, i) => fn('if', isNull(av(i)), lit(c), lit(null)))))],
    ])
    .drop(...unavailable.columns.map((_, i) => `${AVAILABLE}${i}`));
}

/**
 * The merge's source with silver's current value for each column no event of the batch sent
 * (KEEP): an update leaves it as it is, an insert (no row yet) gets NULL.
 */
function keepUnsent(source: Query, target: TableName, keys: string[], unavailable: { columns: string[] } | undefined): Query {
  if (!unavailable) return source;
  const current = Query.table(tableParts(target))
    .select(...keys.map((k) => alias(col(k), `${CURRENT}k_${k}`)), ...unavailable.columns.map((c, i) => alias(col(c), `${CURRENT}${i}`)))
    .as(ROW);
  return source
    .as(SOURCE)
    .join(current, and(...keys.map((k) => eqNullSafe(col(SOURCE, k), col(ROW, `${CURRENT}k_${k}`)))), 'left')
    .withColumns(
      unavailable.columns.map((c, i) => [c, fn('if', fn('array_contains', col(SOURCE, KEEP), lit(c)), col(ROW, `${CURRENT}${i}`), col(SOURCE, c))] as const),
    )
    .drop(...keys.map((k) => `${CURRENT}k_${k}`), ...unavailable.columns.map((_, i) => `${CURRENT}${i}`));
}

/**
 * What check-batch reads back from the rows it kept (each key's latest event and every flagged
 * event; not bronze), in one global aggregate: the number of events and keys, from the latest
 * events, and the number of flagged events (none in a batch that passes).
 */
const BATCH_CHECKS = ['events', 'keys', 'flagged'] as const;

function batchTotals(resolved: Query): Query {
  return resolved.aggregate(
    [],
    [
      alias(fn('coalesce', fn('sum', fn('if', col(KEY_LATEST), col(KEY_EVENTS), lit(0))), lit(0)), 'events'),
      alias(fn('count_if', col(KEY_LATEST)), 'keys'),
      alias(fn('count_if', or(col(KEY_NULL), col(KEY_TIE), col(KEY_UNLISTED))), 'flagged'),
    ],
  );
}

/**
 * A batch with flagged events (check-keys, which then fails the run): the keys with a NULL key or
 * sequence, with different events at one sequence, or with an unlisted column, each with an
 * example, from the flagged events grouped by key.
 */
const FLAGGED_KEYS = ['null_groups', 'null_example', 'ties', 'tie_example', 'unlisted', 'unlisted_example'] as const;

function flaggedKeys(resolved: Query, keys: string[], sequence: string[]): Query {
  const example = (flag: string) =>
    fn('max', fn('if', col(flag), fn('to_json', fn('named_struct', ...[...keys, ...sequence].flatMap((c) => [lit(c), col(c)]))), lit(null)));
  const flags = [
    [KEY_NULL, 'null_groups', 'null_example'],
    [KEY_TIE, 'ties', 'tie_example'],
    [KEY_UNLISTED, 'unlisted', 'unlisted_example'],
  ] as const;
  return resolved
    .filter(or(...flags.map(([flag]) => col(flag))))
    .aggregate(
      keys.map((k) => col(k)),
      flags.flatMap(([flag, count, ex]) => [alias(fn('max', col(flag)), count), alias(example(flag), ex)]),
    )
    .aggregate(
      [],
      flags.flatMap(([, count, ex]) => [alias(fn('count_if', col(count)), count), alias(fn('max', col(ex)), ex)]),
    );
}

/**
 * Join the resolved batch (with its tombstone flag and the known tombstone's sequence) to the
 * target's keys and sequences: what the merge will insert, update and delete, which events it
 * ignores because silver or a tombstone already holds a newer or equal sequence for the key (late
 * or replayed events), and which rows are already older than their key's tombstone (stale).
 */
function measureQuery(source: Query, target: TableName, keys: string[], sequence: string[]): Query {
  const present = '__lake_present';
  const existing = Query.table(tableParts(target))
    .select(...keys.map((k) => col(k)), ...sequence.map((s) => col(s)), alias(lit(true), present))
    .as(ROW);
  const joined = source.as(SOURCE).join(existing, and(...keys.map((k) => eqNullSafe(col(SOURCE, k), col(ROW, k)))), 'left');
  const matched = isNotNull(col(ROW, present));
  const newer = sequenceGreater(sequence, SOURCE, ROW);
  const afterTomb = col(SOURCE, AFTER_TOMBSTONE);
  const del = col(SOURCE, DELETE_FLAG);
  const tombNewer = sequenceGreaterOf(
    sequence.map((s) => col(SOURCE, `${TOMB_SEQ}${s}`)),
    sequence.map((s) => col(ROW, s)),
  );
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
      // Rows older than their key's known tombstone that this batch neither deletes nor updates:
      // what find-resurrected would find after the merges if no other writer commits meanwhile.
      alias(countIf(and(matched, col(SOURCE, HAS_TOMB), tombNewer, not(and(del, newer)), not(and(not(del), newer, afterTomb)))), 'stale'),
    ],
  );
}

export const cdcSilverMerge = defineTemplate({
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Resolve CDC events from bronze to the latest event per business key and MERGE them into a silver Iceberg or Delta table: deletes applied (with tombstones), updates upserted, late and replayed events ignored, namespace and table created on first run.',
  stability: 'beta',
  newest: v2,
  older: [v1],
  plan: (ctx, spec) => plan(ctx, mergeSpec(spec)),
});
