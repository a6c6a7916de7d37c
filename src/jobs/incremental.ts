import { z } from 'zod';
import { DataError } from '../core/errors.js';
import type { ReadPosition } from '../core/status.js';
import { type TableName, displayTable, tableParts } from '../core/naming.js';
import { alias, and, cast, col, eq, fn, gt, isIn, isNotNull, lit, not } from '../spark/plan/expressions.js';
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
export const sourceRead = z
  .enum(['full', 'incremental'])
  .optional()
  .describe(
    'incremental: a run reads only the source commits since the one its target last recorded, and records its own in the same commit as its write (docs/contracts.md, "Incremental reads"). full: all of the source, recording its newest commit as the position (--set source.read=full resumes an incremental job whose position was lost). Without it: all of the source, nothing recorded.',
  );

/** source.read = incremental needs a source with commits (an Iceberg table) and every commit's rows. */
export function checkIncremental(
  s: { read?: 'full' | 'incremental' | undefined; format: string; 'snapshot-date'?: readonly string[] | undefined },
  ctx: z.RefinementCtx,
): void {
  if (s.read === undefined) return;
  if (s.format !== 'iceberg')
    ctx.addIssue({
      code: 'custom',
      path: ['read'],
      message: `reads and records an Iceberg bronze table's commits (source.format = iceberg); ${s.format === 'parquet' ? 'parquet files have no commits' : 'Delta sources are not supported yet'}`,
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

const POSITION_COLUMNS = ['head', 'stamps', 'latest_stamp', 'consumed', 'appends', 'rewrites'] as const;

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
}

/**
 * An Iceberg source table read incrementally into a target of either format; `full` reads all of
 * it as of its newest snapshot and records that (the way to resume after a lost position).
 */
export function incrementalRead(
  source: TableName,
  target: { table: TableName; format: 'iceberg' | 'delta' },
  mode: 'incremental' | 'full' = 'incremental',
  label = 'source',
): IncrementalRead {
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
      const d = decide(r, name, targetName);
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
      const d = decide(p, name, targetName);
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
    recordStep: ({ id = 'record-position', when }) => ({
      kind: 'command',
      id,
      title: `Record in ${targetName} which commit of ${name} this run read up to (a commit without rows)`,
      when: (facts) => read(facts) !== undefined && when(facts),
      stamp: (facts) => {
        const r = read(facts);
        return r ? { [key]: r.to } : {};
      },
      // Iceberg commits an empty append as a snapshot; Delta skips an empty write, but commits every
      // property update (with the run's commitInfo).
      command:
        target.format === 'iceberg'
          ? sqlCommand(sql`INSERT INTO ${sql.target(tableParts(target.table))} SELECT * FROM ${sql.table(tableParts(target.table))} WHERE false`)
          : sqlCommand(
              sql`ALTER TABLE ${sql.target(tableParts(target.table))} SET TBLPROPERTIES (${sql.value('lakehouse-jobs.read')} = ${sql.value('incremental')})`,
            ),
    }),
  };
}

const str = (v: unknown): string | undefined => (v === null || v === undefined || v === '' ? undefined : String(v));

type Decision = { read: ReadPosition } | { skip: string } | { fail: DataError };

/** What the position row means: the read to make, nothing new (99), or a lost position (65). */
function decide(r: Readonly<Record<(typeof POSITION_COLUMNS)[number], unknown>>, source: string, target: string): Decision {
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
  if (Number(r.rewrites ?? 0) > 0)
    return {
      read: { source, mode: 'full', from: consumed, to: head, reason: `a commit after snapshot ${consumed} changed or deleted rows (not append-only)` },
    };
  if (Number(r.appends ?? 0) === 0) return { skip: `nothing new in ${source} since snapshot ${consumed}: only rewrites (compaction) since` };
  return { read: { source, mode: 'incremental', from: consumed, to: head } };
}

const STAMP = '__lake_stamp';
const STAMP_AT = '__lake_stamp_at';
const SID = '__lake_sid';
const SAT = '__lake_sat';
const OP = '__lake_op';

/**
 * One row: the source's newest snapshot, how many of the target's commits carry a position, the
 * latest of them (target order), the one latest in the source's current history, and how many
 * appends and data-changing commits the source has after it.
 */
function positionQuery(source: TableName, target: { table: TableName; format: 'iceberg' | 'delta' }, key: string): Query {
  const s = tableParts(source);
  const t = tableParts(target.table);
  const stamps =
    target.format === 'iceberg'
      ? Query.sql(
          sql`SELECT s.summary[${sql.value(`lakehouse-jobs.${key}`)}] AS ${sql.id(STAMP)}, h.made_current_at AS ${sql.id(STAMP_AT)} FROM ${sql.table([...t, 'snapshots'])} s JOIN ${sql.table([...t, 'history'])} h ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor`,
        )
      : Query.sql(sql`DESCRIBE HISTORY ${sql.table(t)}`)
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
          .select(
            alias(
              fn('element_at', fn('element_at', fn('from_json', col('userMetadata'), lit('map<string,map<string,string>>')), lit('lakehouse-jobs')), lit(key)),
              STAMP,
            ),
            alias(col('version'), STAMP_AT),
          );
  const history = () =>
    Query.sql(
      sql`SELECT CAST(h.snapshot_id AS STRING) AS ${sql.id(SID)}, h.made_current_at AS ${sql.id(SAT)}, s.operation AS ${sql.id(OP)} FROM ${sql.table([...s, 'history'])} h JOIN ${sql.table([...s, 'snapshots'])} s ON h.snapshot_id = s.snapshot_id WHERE h.is_current_ancestor`,
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
    );
}

/** The position step of an incremental read (its rows are the position), for tests and views. */
export type PositionStep = QueryStep<(typeof POSITION_COLUMNS)[number]>;
