import { z } from 'zod';
import { ConfigError, DataError, type LakehouseError } from '../core/errors.js';
import type { ReadPosition } from '../core/status.js';
import { type TableName, displayTable, tableParts } from '../core/naming.js';
import { type Expr, alias, and, cast, coalesce, col, eq, fn, gt, isIn, isNotNull, lit, not, star } from '../spark/plan/expressions.js';
import { Query, sqlCommand } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import { type Facts, type QueryStep, type Step, queryStep } from './steps.js';

/**
 * `source.read = incremental` (docs/contracts.md, "Incremental reads"): a run reads exactly the
 * source commits since the last one its target recorded, and records the commit it read up to in
 * the same commit as its write, so the position can never run ahead of what was applied.
 *
 * - The position is a stamp of the target's commits, `lakehouse-jobs.read.<source table>` = the
 *   source's snapshot id (Iceberg snapshot summary; Delta `commitInfo.userMetadata`), beside the
 *   run id and attempt. The run's position is, among the target's stamped commits, the one that
 *   lies latest in the source's current history: a concurrent run that committed an older position
 *   after a newer one cannot move it back, and a kill before the commit leaves the old one.
 * - The read is Iceberg's incremental scan between the two snapshots (append snapshots; `replace`
 *   snapshots, compaction, carry no new rows). A range with a snapshot that changed or deleted rows
 *   (`overwrite`, `delete`) is read in full as of the newest snapshot: the consumers are idempotent
 *   (a CDC merge by sequence, a range replace recomputes), never a sum of the batch.
 * - No stamp: a first run reads everything. A stamp whose snapshot the source's history no longer
 *   holds (expired, or the table dropped and recreated) fails the run (65) naming both; one run with
 *   `--set source.read=full` re-reads all of the source and records its position again.
 */

/** The `source.read` key of a template that reads an Iceberg table. */
/**
 * What a source section with `read` must be (vault and scd2 sources): a table with commits (not
 * parquet bronze), read whole (not one snapshot-date). `key` names `read` in the messages.
 */
export function checkSourceRead(
  s: { readonly read?: unknown; readonly layer?: string; readonly format?: string; readonly 'snapshot-date'?: unknown },
  ctx: z.RefinementCtx,
  key: string,
): void {
  if (s.read === undefined) return;
  if (s.layer === 'bronze' && (s.format ?? 'parquet') === 'parquet')
    ctx.addIssue({
      code: 'custom',
      path: ['read'],
      message: "reads and records a source table's commits (an iceberg or delta table); parquet files have no commits",
    });
  if (s['snapshot-date'] !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['snapshot-date'],
      message: `cannot be combined with ${key}: the run reads every commit, and the rows of other dates would be passed over for good`,
    });
}

export const sourceRead = z
  .enum(['full', 'incremental'])
  .optional()
  .describe(
    'incremental: a run reads only the source commits since the one its target last recorded, and records its own in the same commit as its write (docs/contracts.md, "Incremental reads"). full: all of the source, recording its newest commit as the position (--set source.read=full resumes an incremental job whose position was lost). Without it: all of the source, nothing recorded.',
  );

/** source.read = incremental needs a source with commits (an Iceberg or Delta table) and every commit's rows. */
export function checkIncremental(
  s: { read?: 'full' | 'incremental' | undefined; format: string; 'snapshot-date'?: readonly string[] | undefined },
  ctx: z.RefinementCtx,
): void {
  if (s.read === undefined) return;
  if (s.format !== 'iceberg' && s.format !== 'delta')
    ctx.addIssue({
      code: 'custom',
      path: ['read'],
      message: `reads and records a bronze table's commits (source.format = iceberg or delta); parquet files have no commits`,
    });
  if (s['snapshot-date'] !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['snapshot-date'],
      message: `cannot be combined with source.read: the run reads every commit, and the events of other dates would be passed over for good`,
    });
}

/** The stamp key of a source table, under `lakehouse-jobs.` in the target's commits. */
export const positionKey = (source: TableName): string => `read.${displayTable(source)}`;
/**
 * A Delta source's table id, stamped beside its version: versions restart at 0 when the table is
 * dropped and recreated, so a version alone cannot tell the table it was read from.
 */
export const tableIdKey = (source: TableName): string => `${positionKey(source)}#table-id`;

const POSITION_COLUMNS = ['head', 'stamps', 'latest_stamp', 'consumed', 'appends', 'rewrites', 'deletes'] as const;

export interface IncrementalRead {
  /** The source's rows of the commits to read (bound when the position is known). */
  readonly rows: Query;
  /** Find the position and the source's newest commit: before the first read of `rows`. */
  readonly steps: Step[];
  /** The bound options of `rows` (JobPlan.bind). */
  bind(facts: Facts): Record<string, string | undefined>;
  /** The stamp the write's commit carries (Step.stamp); empty before the position is known. */
  stamp(facts: Facts): Record<string, string>;
  /** The decided read, once the position steps ran. */
  position(facts: Facts): ReadPosition | undefined;
  /**
   * A commit of the target that carries only the position (an empty append): for a run whose
   * batch changes no row of the target, so the next run does not read the same commits again.
   */
  recordStep(opts: { id?: string; when: (facts: Facts) => boolean; location?: string }): Step;
  /**
   * What the commits read changed, one row per row they added or removed (bound like `rows`, when
   * the read is incremental): `CHANGE.at` the row's `at` (an expression over the source's columns),
   * `CHANGE.row` a hash of all its values, `CHANGE.sign` +1 added, -1 removed. From Iceberg's
   * changelog (`<table>.changes`: a rewritten file's unchanged rows appear once each way, and cancel)
   * or Delta's change data feed (an update as its old and new values). For a consumer that
   * recomputes what the changes touch (gold-publish's dates).
   */
  changes(at: Expr): Query;
}

/** The columns of IncrementalRead.changes. */
export const CHANGE = { at: '__lake_change_at', row: '__lake_change_row', sign: '__lake_change_sign' } as const;

/**
 * What the consumer reads of the commits after the position: `appends`, the new rows (a commit
 * that changed or deleted rows makes the run read all of the source), or `changes`, every added and
 * removed row (`changed`: a rewrite is read as its changes like any other commit).
 */
export type IncrementalReads = 'appends' | 'changes';

/**
 * An Iceberg source table read incrementally into a target of either format; `full` reads all of
 * it as of its newest snapshot and records that (the way to resume after a lost position).
 */
export function incrementalRead(
  source: { table: TableName; format: 'iceberg' | 'delta' },
  target: Target,
  mode: 'incremental' | 'full' = 'incremental',
  label = 'source',
  reads: IncrementalReads = 'appends',
): IncrementalRead {
  return source.format === 'delta' ? deltaRead(source.table, target, mode, label) : icebergRead(source.table, target, mode, label, reads);
}

type Target = { table: TableName; format: 'iceberg' | 'delta' };

function icebergRead(source: TableName, target: Target, mode: 'incremental' | 'full', label: string, reads: IncrementalReads): IncrementalRead {
  const full = mode === 'full';
  const key = positionKey(source);
  const name = displayTable(source);
  const targetName = displayTable(target.table);
  const bound = { from: `${label}.from`, to: `${label}.to`, version: `${label}.version` };
  const position = queryStep({
    id: 'read-position',
    title: `Find the last commit of ${name} that ${targetName} recorded, and ${name}'s newest commit`,
    query: positionQuery(source, target, key),
    columns: POSITION_COLUMNS,
    tableMayBeMissing: true,
    interpret: ([r]) => {
      if (!r) return {};
      const d = decide(r, name, targetName, reads);
      if ('skip' in d || 'fail' in d) return d;
      return { output: { table: targetName, format: target.format, read: d.read } };
    },
  });
  const head = queryStep({
    id: 'read-source-head',
    title: full
      ? `Read the newest commit of ${name}: all of it is read as of that commit`
      : `Read the newest commit of ${name} (${targetName} does not exist yet: a first run reads everything)`,
    when: (facts) => full || (facts.rows(position)?.length ?? 0) === 0,
    query: Query.sql(sql`SELECT CAST(snapshot_id AS STRING) AS head FROM ${sql.table([...tableParts(source), 'refs'])} WHERE name = 'main'`),
    columns: ['head'],
    interpret: ([r]) => {
      const at = str(r?.head);
      if (at === undefined) return { skip: `${name} has no commits yet` };
      return { output: { table: targetName, format: target.format, read: { source: name, mode: 'full', to: at, reason: headReason } } };
    },
  });
  const headReason = full ? 'source.read = full' : 'first run';
  const read = (facts: Facts): ReadPosition | undefined => {
    const p = full ? undefined : facts.rows(position)?.[0];
    if (p) {
      const d = decide(p, name, targetName, reads);
      return 'read' in d ? d.read : undefined;
    }
    const h = str(facts.rows(head)?.[0]?.head);
    return h === undefined ? undefined : { source: name, mode: 'full', to: h, reason: headReason };
  };
  return {
    rows: Query.table(tableParts(source), {
      'start-snapshot-id': { bound: bound.from },
      'end-snapshot-id': { bound: bound.to },
      versionAsOf: { bound: bound.version },
    }),
    steps: full ? [head] : [position, head],
    bind: (facts) => {
      const r = read(facts);
      if (!r) return {};
      return r.mode === 'incremental' ? { [bound.from]: r.from, [bound.to]: r.to } : { [bound.version]: r.to };
    },
    stamp: (facts): Record<string, string> => {
      const r = read(facts);
      return r ? { [key]: r.to } : {};
    },
    position: read,
    recordStep: ({ id = 'record-position', when }) =>
      recordPosition(id, name, target, (facts) => {
        const r = read(facts);
        return r && when(facts) ? { [key]: r.to } : undefined;
      }),
    changes: icebergChanges(source, bound),
  };
}

/** Iceberg's changelog of the snapshots after `from` up to `to` (its INSERT and DELETE rows) as IncrementalRead.changes. */
function icebergChanges(source: TableName, bound: { from: string; to: string }): IncrementalRead['changes'] {
  return (at) =>
    changeRows(
      Query.table([...tableParts(source), 'changes'], { 'start-snapshot-id': { bound: bound.from }, 'end-snapshot-id': { bound: bound.to } }),
      at,
      eq(col(CHANGE_TYPE), lit('INSERT')),
      [CHANGE_TYPE, '_change_ordinal', '_commit_snapshot_id'],
    );
}

const ADDED = '__lake_added';

/**
 * A change feed's rows as IncrementalRead.changes: the hash is of the row's own values (the JSON of
 * its columns after a fixed prefix, the added flag, whose text has one length either way). The
 * flag is a projection, never a filter: Iceberg's changelog scan fails a filter pushed down on its
 * own columns.
 */
function changeRows(feed: Query, at: Expr, added: Expr, feedColumns: readonly string[]): Query {
  const prefix = `{"${ADDED}":"+",`.length;
  return feed
    .select(alias(fn('if', added, lit('+'), lit('-')), ADDED), star())
    .drop(...feedColumns)
    .select(
      alias(at, CHANGE.at),
      alias(fn('sha2', fn('substring', fn('to_json', fn('struct', star())), lit(prefix + 1)), lit(256)), CHANGE.row),
      alias(fn('if', eq(col(ADDED), lit('+')), lit(1), lit(-1)), CHANGE.sign),
    );
}

/** A commit of the target that carries only the position: for a batch that changes no row of it. */
function recordPosition(id: string, source: string, target: Target, stamp: (facts: Facts) => Record<string, string> | undefined): Step {
  return {
    kind: 'command',
    id,
    title: `Record in ${displayTable(target.table)} which commit of ${source} this run read up to (a commit without rows)`,
    when: (facts) => stamp(facts) !== undefined,
    stamp: (facts) => stamp(facts) ?? {},
    // Iceberg commits an empty append as a snapshot; Delta skips an empty write, but commits every
    // property update (with the run's commitInfo).
    command:
      target.format === 'iceberg'
        ? sqlCommand(sql`INSERT INTO ${sql.target(tableParts(target.table))} SELECT * FROM ${sql.table(tableParts(target.table))} WHERE false`)
        : sqlCommand(
            sql`ALTER TABLE ${sql.target(tableParts(target.table))} SET TBLPROPERTIES (${sql.value(READ_MARKER_PROPERTY)} = ${sql.value('incremental')})`,
          ),
  };
}

/** The property a Delta target's position-only commit sets (a property update commits with the run's commitInfo). */
export const READ_MARKER_PROPERTY = 'lakehouse-jobs.read';

const str = (v: unknown): string | undefined => (v === null || v === undefined || v === '' ? undefined : String(v));

type Decision = { read: ReadPosition } | { skip: string } | { fail: DataError };

/** What the position row means: the read to make, nothing new (99), or a lost position (65). */
function decide(r: Readonly<Record<(typeof POSITION_COLUMNS)[number], unknown>>, source: string, target: string, reads: IncrementalReads): Decision {
  const head = str(r.head);
  if (head === undefined) return { skip: `${source} has no commits yet` };
  if (Number(r.stamps ?? 0) === 0) return { read: { source, mode: 'full', to: head, reason: 'first run' } };
  const consumed = str(r.consumed);
  if (consumed === undefined)
    return {
      fail: new DataError(
        `${target} last recorded reading ${source} up to snapshot ${String(r.latest_stamp)}, which ${source}'s history no longer holds (expired by its maintenance, or the table was dropped and recreated; its newest snapshot is ${head}): which of its commits are new cannot be told`,
        {
          code: 'SOURCE_POSITION_LOST',
          hint: 'run once with --set source.read=full: it reads all of the source (the merge applies each event once whatever it read before) and records the position again',
        },
      ),
    };
  if (consumed === head) return { skip: `nothing new in ${source} since snapshot ${consumed}, which ${target} already holds` };
  // Iceberg's changelog scan refuses a range whose table state holds delete files (a merge-on-read
  // source): the changes cannot be read, so everything is, as of the newest snapshot.
  if (Number(r.deletes ?? 0) > 0 && reads === 'changes')
    return {
      read: {
        source,
        mode: 'full',
        from: consumed,
        to: head,
        reason: `${source} holds delete files (merge-on-read) after snapshot ${consumed}, which Iceberg's changelog cannot read`,
      },
    };
  if (Number(r.rewrites ?? 0) > 0 && reads === 'changes') return { read: { source, mode: 'incremental', from: consumed, to: head } };
  if (Number(r.rewrites ?? 0) > 0)
    return {
      read: { source, mode: 'full', from: consumed, to: head, reason: `a commit after snapshot ${consumed} changed or deleted rows (not append-only)` },
    };
  if (Number(r.appends ?? 0) === 0) return { skip: `nothing new in ${source} since snapshot ${consumed}: only rewrites (compaction) since` };
  return { read: { source, mode: 'incremental', from: consumed, to: head } };
}

const STAMP = '__lake_stamp';
const STAMP_AT = '__lake_stamp_at';
const STAMP_ID = '__lake_stamp_id';
const SID = '__lake_sid';
const SAT = '__lake_sat';
const OP = '__lake_op';
const DELETE_FILES = '__lake_delete_files';

/**
 * One row: the source's newest snapshot, how many of the target's commits carry a position, the
 * latest of them (target order), the one latest in the source's current history, and how many
 * appends, data-changing commits and commits with delete files the source has after it.
 */
function positionQuery(source: TableName, target: { table: TableName; format: 'iceberg' | 'delta' }, key: string): Query {
  const s = tableParts(source);
  const stamps = targetStamps(target, key);
  const history = () =>
    Query.sql(
      sql`SELECT CAST(h.snapshot_id AS STRING) AS ${sql.id(SID)}, h.made_current_at AS ${sql.id(SAT)}, s.operation AS ${sql.id(OP)}, CAST(s.summary['total-delete-files'] AS BIGINT) AS ${sql.id(DELETE_FILES)} FROM ${sql.table([...s, 'history'])} h JOIN ${sql.table([...s, 'snapshots'])} s ON h.snapshot_id = s.snapshot_id WHERE h.is_current_ancestor`,
    );
  const found = stamps
    .filter(and(isNotNull(col(STAMP)), not(eq(col(STAMP), lit('')))))
    .as('st')
    .join(history().as('src'), eq(col('st', STAMP), col('src', SID)), 'left')
    .aggregate(
      [],
      [
        alias(fn('count', lit(1)), 'stamps'),
        alias(fn('max_by', col('st', STAMP), col('st', STAMP_AT)), 'latest_stamp'),
        alias(fn('max_by', col('src', SID), col('src', SAT)), 'consumed'),
        alias(fn('max', col('src', SAT)), 'consumed_at'),
      ],
    )
    .as('p');
  const after = found
    .join(history().as('later'), gt(col('later', SAT), col('p', 'consumed_at')), 'left')
    .aggregate(
      [col('p', 'stamps'), col('p', 'latest_stamp'), col('p', 'consumed')],
      [
        alias(fn('count_if', eq(col('later', OP), lit('append'))), 'appends'),
        alias(fn('count_if', not(isIn(col('later', OP), [lit('append'), lit('replace')]))), 'rewrites'),
        // Commits whose table state holds delete files (a replace commit is not read as changes).
        alias(fn('count_if', and(not(eq(col('later', OP), lit('replace'))), gt(col('later', DELETE_FILES), lit(0)))), 'deletes'),
      ],
    )
    .as('a');
  const head = Query.sql(sql`SELECT CAST(snapshot_id AS STRING) AS head FROM ${sql.table([...s, 'refs'])} WHERE name = 'main'`).as('h');
  return after
    .join(head, lit(true), 'left')
    .select(
      col('h', 'head'),
      alias(col('a', 'stamps'), 'stamps'),
      alias(col('a', 'latest_stamp'), 'latest_stamp'),
      alias(col('a', 'consumed'), 'consumed'),
      alias(col('a', 'appends'), 'appends'),
      alias(col('a', 'rewrites'), 'rewrites'),
      alias(col('a', 'deletes'), 'deletes'),
    );
}

/**
 * The target's commits on its current line, each with the stamps it carries (`STAMP`: the key's
 * value, `STAMP_ID`: the id key's, when given) and its place in the target's order (`STAMP_AT`).
 */
function targetStamps(target: Target, key: string, idKey?: string): Query {
  const t = tableParts(target.table);
  if (target.format === 'iceberg') {
    const id = idKey === undefined ? sql`` : sql`, s.summary[${sql.value(`lakehouse-jobs.${idKey}`)}] AS ${sql.id(STAMP_ID)}`;
    return Query.sql(
      sql`SELECT s.summary[${sql.value(`lakehouse-jobs.${key}`)}] AS ${sql.id(STAMP)}${id}, h.made_current_at AS ${sql.id(STAMP_AT)} FROM ${sql.table([...t, 'snapshots'])} s JOIN ${sql.table([...t, 'history'])} h ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor`,
    );
  }
  const stamp = (k: string) =>
    fn('element_at', fn('element_at', fn('from_json', col('userMetadata'), lit('map<string,map<string,string>>')), lit('lakehouse-jobs')), lit(k));
  return (
    Query.sql(sql`DESCRIBE HISTORY ${sql.table(t)}`)
      .as('v')
      // A version a RESTORE undid (lakehouse-jobs rollback) is no part of the table's state: its position neither.
      .join(
        Query.sql(sql`DESCRIBE HISTORY ${sql.table(t)}`)
          .filter(eq(col('operation'), lit('RESTORE')))
          .select(alias(col('version'), 'restored_at'), alias(cast(fn('element_at', col('operationParameters'), lit('version')), 'bigint'), 'restored_to'))
          .as('r'),
        and(gt(col('v', 'version'), col('r', 'restored_to')), gt(col('r', 'restored_at'), col('v', 'version'))),
        'left_anti',
      )
      .select(alias(stamp(key), STAMP), ...(idKey === undefined ? [] : [alias(stamp(idKey), STAMP_ID)]), alias(col('version'), STAMP_AT))
  );
}

/** The position step of an incremental read (its rows are the position), for tests and views. */
export type PositionStep = QueryStep<(typeof POSITION_COLUMNS)[number]>;

/**
 * Delta operations that change no data (the change data feed has no rows for them): versions of
 * only these carry nothing new. Anything else is read (an unknown operation with no rows changes
 * nothing either way).
 */
const DELTA_NO_DATA = [
  'OPTIMIZE',
  'VACUUM START',
  'VACUUM END',
  'SET TBLPROPERTIES',
  'UNSET TBLPROPERTIES',
  'ADD COLUMNS',
  'CHANGE COLUMN',
  'REPLACE COLUMNS',
  'RENAME COLUMN',
  'DROP COLUMNS',
  'ADD CONSTRAINT',
  'DROP CONSTRAINT',
  'UPGRADE PROTOCOL',
  'CREATE TABLE',
  'REORG',
];

const DELTA_HEAD_COLUMNS = ['head', 'table_id', 'cdf'] as const;
const DELTA_POSITION_COLUMNS = [
  ...DELTA_HEAD_COLUMNS,
  'oldest',
  'stamps',
  'latest_stamp',
  'latest_id',
  'consumed',
  'changes',
  'first_removal',
  'vacuum',
  'vacuum_cut',
  'first_removal_at',
] as const;
type DeltaRow = Readonly<Partial<Record<(typeof DELTA_POSITION_COLUMNS)[number], unknown>>>;

/** A decided Delta read: the position and the table id its stamp carries beside it. */
type DeltaDecision = { read: ReadPosition; tableId: string } | { skip: string } | { fail: LakehouseError };

/**
 * A Delta source table read incrementally: the versions after the recorded one through its change
 * data feed (only `insert` and `update_postimage` rows: bronze is append-only, and a CDC merge by
 * sequence never needs what a rewrite removed), or all of it as of its newest version. The stamp
 * is the version and the table's id (a recreated table restarts its versions).
 */
function deltaRead(source: TableName, target: Target, mode: 'incremental' | 'full', label: string): IncrementalRead {
  const full = mode === 'full';
  const key = positionKey(source);
  const idKey = tableIdKey(source);
  const name = displayTable(source);
  const targetName = displayTable(target.table);
  const s = tableParts(source);
  const bound = { feed: `${label}.feed`, from: `${label}.from`, to: `${label}.to`, version: `${label}.version` };
  const output = (read: ReadPosition) => ({ output: { table: targetName, format: target.format, read } });
  const position = queryStep({
    id: 'read-position',
    title: `Find the last version of ${name} that ${targetName} recorded, and ${name}'s newest version`,
    query: deltaPositionQuery(source, target, key, idKey),
    columns: DELTA_POSITION_COLUMNS,
    tableMayBeMissing: true,
    interpret: ([r]) => {
      if (!r) return {};
      const d = decideDelta(r, name, targetName);
      return 'read' in d ? output(d.read) : d;
    },
  });
  const headReason = full ? 'source.read = full' : 'first run';
  const head = queryStep({
    id: 'read-source-head',
    title: full
      ? `Read the newest version of ${name}: all of it is read as of that version`
      : `Read the newest version of ${name} (${targetName} does not exist yet: a first run reads everything)`,
    when: (facts) => full || (facts.rows(position)?.length ?? 0) === 0,
    query: deltaBounds(s).select(alias(cast(col('head'), 'string'), 'head'), col('table_id'), col('cdf')),
    columns: DELTA_HEAD_COLUMNS,
    interpret: ([r]) => {
      const d = firstDelta(r ?? {}, name, full, headReason);
      return 'read' in d ? output(d.read) : d;
    },
  });
  const decided = (facts: Facts): { read: ReadPosition; tableId: string } | undefined => {
    const p = full ? undefined : facts.rows(position)?.[0];
    const d = p ? decideDelta(p, name, targetName) : firstDelta(facts.rows(head)?.[0] ?? {}, name, full, headReason);
    return 'read' in d ? d : undefined;
  };
  const read = (facts: Facts) => decided(facts)?.read;
  const stamp = (facts: Facts): Record<string, string> | undefined => {
    const d = decided(facts);
    return d ? { [key]: d.read.to, [idKey]: d.tableId } : undefined;
  };
  // One read, two forms by its bound options: the change feed of the versions after the position,
  // or the table as of its newest version. The union gives the table form a NULL change type, so
  // one filter keeps inserted rows and updated rows' new values of the feed and every row of the table.
  const changeType = Query.range(0n, 0n).select(alias(cast(lit(null), 'string'), CHANGE_TYPE));
  const rows = Query.table(s, {
    readChangeFeed: { bound: bound.feed },
    startingVersion: { bound: bound.from },
    endingVersion: { bound: bound.to },
    versionAsOf: { bound: bound.version },
  })
    .unionByName(changeType, true)
    .filter(isIn(coalesce(col(CHANGE_TYPE), lit('insert')), [lit('insert'), lit('update_postimage')]))
    .drop(CHANGE_TYPE, '_commit_version', '_commit_timestamp');
  return {
    rows,
    steps: full ? [head] : [position, head],
    bind: (facts) => {
      const r = read(facts);
      if (!r) return {};
      return r.mode === 'incremental' ? { [bound.feed]: 'true', [bound.from]: String(BigInt(r.from!) + 1n), [bound.to]: r.to } : { [bound.version]: r.to };
    },
    stamp: (facts) => stamp(facts) ?? {},
    position: read,
    recordStep: ({ id = 'record-position', when }) => recordPosition(id, name, target, (facts) => (when(facts) ? stamp(facts) : undefined)),
    changes: (at) =>
      changeRows(
        Query.table(s, { readChangeFeed: { bound: bound.feed }, startingVersion: { bound: bound.from }, endingVersion: { bound: bound.to } }),
        at,
        isIn(col(CHANGE_TYPE), [lit('insert'), lit('update_postimage')]),
        [CHANGE_TYPE, '_commit_version', '_commit_timestamp'],
      ),
  };
}

/** A first run (no position) or a full read: all of the source as of its newest version. */
function firstDelta(r: DeltaRow, source: string, full: boolean, reason: string): DeltaDecision {
  const head = str(r.head);
  if (head === undefined) return { skip: `${source} has no commits yet` };
  if (!full && String(r.cdf).toLowerCase() !== 'true') return { fail: noChangeFeed(source) };
  return { read: { source, mode: 'full', to: head, reason }, tableId: String(r.table_id) };
}

const noChangeFeed = (source: string) =>
  new ConfigError(
    `${source} is a Delta table without its change data feed, which an incremental read of its versions needs: enable it (ALTER TABLE ${source} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true'); the bronze templates create their Delta tables with it, and the other templates do when their config sets target.table-properties { delta.enableChangeDataFeed = true }), or read it in full (source.read = full)`,
    { path: 'source.read' },
  );

/** What a Delta position row means: the read to make, nothing new (99), no change feed (78), or a lost position (65). */
function decideDelta(r: DeltaRow, source: string, target: string): DeltaDecision {
  const head = str(r.head);
  const tableId = String(r.table_id);
  if (head === undefined) return { skip: `${source} has no commits yet` };
  if (Number(r.stamps ?? 0) === 0) return firstDelta(r, source, false, 'first run');
  if (String(r.cdf).toLowerCase() !== 'true') return { fail: noChangeFeed(source) };
  const consumed = str(r.consumed);
  const hint =
    'run once with --set source.read=full: it reads all of the source (the merge applies each event once whatever it read before) and records the position again';
  if (consumed === undefined) {
    const recreated = str(r.latest_id) !== tableId;
    return {
      fail: new DataError(
        recreated
          ? `${target} last recorded reading ${source} up to version ${String(r.latest_stamp)} of the table with id ${String(r.latest_id)}, but ${source} is now another table (id ${tableId}, newest version ${head}: dropped and recreated): which of its versions are new cannot be told`
          : `${target} last recorded reading ${source} up to version ${String(r.latest_stamp)}, which ${source}'s history no longer holds (its oldest version is ${String(r.oldest)}, its newest ${head}: the log was cleaned up): which of its versions are new cannot be told`,
        { code: 'SOURCE_POSITION_LOST', hint },
      ),
    };
  }
  // A version after the position removed files (OPTIMIZE, an overwrite) and a VACUUM deleted files
  // removed before its cutoff: the files of the versions to read may be gone.
  if (
    r.vacuum_cut !== null &&
    r.vacuum_cut !== undefined &&
    r.first_removal_at !== null &&
    r.first_removal_at !== undefined &&
    Number(r.vacuum_cut) > Number(r.first_removal_at)
  )
    return {
      fail: new DataError(
        `${target} last recorded reading ${source} up to version ${consumed}; version ${String(r.first_removal)} of ${source} removed files and the VACUUM of version ${String(r.vacuum)} deleted what was removed before it (newest version ${head}): the changes of the versions after ${consumed} may be gone`,
        { code: 'SOURCE_POSITION_LOST', hint },
      ),
    };
  if (consumed === head) return { skip: `nothing new in ${source} since version ${consumed}, which ${target} already holds` };
  if (Number(r.changes ?? 0) === 0) return { skip: `nothing new in ${source} since version ${consumed}: only rewrites (compaction) and maintenance since` };
  return { read: { source, mode: 'incremental', from: consumed, to: head }, tableId };
}

const CHANGE_TYPE = '_change_type';
const SV = '__lake_sv';
const TS = '__lake_ts';
const RM = '__lake_removed';
const CUT = '__lake_cut';

/** A Delta table's versions: operation, whether it removed files, when, and a VACUUM's cutoff. */
function deltaHistory(s: readonly string[]): Query {
  const metric = (k: string) => cast(fn('element_at', col('operationMetrics'), lit(k)), 'bigint');
  const param = (k: string) => cast(fn('element_at', col('operationParameters'), lit(k)), 'bigint');
  const millis = fn('unix_millis', col('timestamp'));
  return Query.sql(sql`DESCRIBE HISTORY ${sql.table(s)}`).select(
    alias(col('version'), SV),
    alias(col('operation'), OP),
    alias(gt(coalesce(metric('numRemovedFiles'), metric('numTargetFilesRemoved'), lit(0)), lit(0)), RM),
    alias(millis, TS),
    alias(
      fn(
        'if',
        eq(col('operation'), lit('VACUUM START')),
        fn('-', millis, coalesce(param('specifiedRetentionMillis'), param('defaultRetentionMillis'), lit(0))),
        lit(null),
      ),
      CUT,
    ),
  );
}

/** One row: the newest and oldest versions the history holds, the table's id, whether its change feed is on. */
function deltaBounds(s: readonly string[]): Query {
  const detail = Query.sql(sql`DESCRIBE DETAIL ${sql.table(s)}`)
    .select(alias(col('id'), 'table_id'), alias(fn('element_at', col('properties'), lit('delta.enableChangeDataFeed')), 'cdf'))
    .as('d');
  return deltaHistory(s)
    .aggregate([], [alias(fn('max', col(SV)), 'head'), alias(fn('min', col(SV)), 'oldest')])
    .as('v')
    .join(detail, lit(true), 'left')
    .select(col('v', 'head'), col('v', 'oldest'), col('d', 'table_id'), col('d', 'cdf'));
}

/**
 * One row: the Delta source's bounds, how many of the target's commits carry a position, the
 * latest of them (target order) with its table id, the newest of them that is a version of this
 * table its history still holds, and what the versions after it did (data changes, the first that
 * removed files, the latest VACUUM's cutoff).
 */
function deltaPositionQuery(source: TableName, target: Target, key: string, idKey: string): Query {
  const s = tableParts(source);
  const asVersion = cast(col('st', STAMP), 'bigint');
  const held = and(
    eq(col('st', STAMP_ID), col('b', 'table_id')),
    and(fn('>=', asVersion, fn('-', col('b', 'oldest'), lit(1))), fn('<=', asVersion, col('b', 'head'))),
  );
  const stamps = targetStamps(target, key, idKey)
    .filter(and(isNotNull(col(STAMP)), not(eq(col(STAMP), lit('')))))
    .as('st');
  const found = deltaBounds(s)
    .as('b')
    .join(stamps, lit(true), 'left')
    .aggregate(
      [col('b', 'head'), col('b', 'oldest'), col('b', 'table_id'), col('b', 'cdf')],
      [
        alias(fn('count', col('st', STAMP)), 'stamps'),
        alias(fn('max_by', col('st', STAMP), col('st', STAMP_AT)), 'latest_stamp'),
        alias(fn('max_by', col('st', STAMP_ID), col('st', STAMP_AT)), 'latest_id'),
        alias(fn('max', fn('if', held, asVersion, lit(null))), 'consumed'),
      ],
    )
    .as('p');
  const later = deltaHistory(s).as('later');
  const p = (c: string) => col('p', c);
  return found
    .join(later, gt(col('later', SV), p('consumed')), 'left')
    .aggregate(
      [p('head'), p('oldest'), p('table_id'), p('cdf'), p('stamps'), p('latest_stamp'), p('latest_id'), p('consumed')],
      [
        alias(
          fn(
            'count_if',
            not(
              isIn(
                col('later', OP),
                DELTA_NO_DATA.map((o) => lit(o)),
              ),
            ),
          ),
          'changes',
        ),
        alias(fn('min', fn('if', col('later', RM), col('later', SV), lit(null))), 'first_removal'),
        alias(fn('min', fn('if', col('later', RM), col('later', TS), lit(null))), 'first_removal_at'),
        alias(fn('max_by', col('later', SV), col('later', CUT)), 'vacuum'),
        alias(fn('max', col('later', CUT)), 'vacuum_cut'),
      ],
    )
    .select(
      alias(cast(p('head'), 'string'), 'head'),
      col('table_id'),
      col('cdf'),
      col('oldest'),
      col('stamps'),
      col('latest_stamp'),
      col('latest_id'),
      alias(cast(col('consumed'), 'string'), 'consumed'),
      col('changes'),
      col('first_removal'),
      col('vacuum'),
      col('vacuum_cut'),
      col('first_removal_at'),
    );
}
