import { type Expr, alias, and, asc, cast, col, eq, eqNullSafe, fn, isNotNull, isNull, lit, not, or, over, star } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';

/**
 * The history of an SCD type 2 dimension as Spark queries, shared by every step of scd2-dim-load:
 * the points a key's history is made of, the new state of the keys a batch touches, the MERGE
 * source that turns the table into that state in one commit, and the invariants checked on both.
 *
 * A key's history is a sequence of points in time: a state (its attribute values) or a deletion.
 * The dimension stores it as versions: each state point that differs from the one before it opens
 * a version, closed by the next point (`_scd_effective_to`). A load reconstructs the points of the
 * keys it touches from their stored versions (each version's start, and its end when nothing starts
 * there: a deletion), adds the batch's points wherever they fall in time (a late point splits the
 * interval it lands in), and derives the versions again. What changed is then one MERGE.
 *
 * The plan never knows the dimension's columns (they are the source's), so a row's attributes
 * travel as one struct, `__scd_p`, whose last field `__scd_ctrl` holds the point's time, deletion
 * flag and type-1 values; the attribute signature is the struct's JSON cut before that field.
 */

export const DIM_KEY = '_dim_key';
export const EFFECTIVE_FROM = '_scd_effective_from';
export const EFFECTIVE_TO = '_scd_effective_to';
export const CURRENT = '_scd_current';
export const DELETED = '_scd_deleted';
/** The columns scd2-dim-load adds to every dimension (reserved: a source column of these names is refused). */
export const HISTORY_COLUMNS = [DIM_KEY, EFFECTIVE_FROM, EFFECTIVE_TO, CURRENT, DELETED] as const;

const P = '__scd_p';
const CTRL = '__scd_ctrl';
const SIG = '__scd_sig';
const TS = '__scd_ts';
const DEL = '__scd_del';
const RANK = '__scd_rank';
const T1 = '__scd_t1';
const T1_FINAL = '__scd_t1_final';
const TO = '__scd_to';
const CONFLICT = '__scd_conflict';
const LATE = '__scd_late';
const OLD = '__scd_old';
const NEW = '__scd_new';
const ACTION = '__scd_action';
const MERGE_KEY = '__scd_merge_key';
/** The signature of a deletion: never the JSON of a row, which starts with `{`. */
const DELETION = '-';

/** Reserved names: internal columns all start with this prefix. */
export const INTERNAL_PREFIX = '__scd_';

export interface HistorySpec {
  readonly keys: readonly string[];
  /** The type-2 columns; undefined: every attribute that is not a key or a type-1 column. */
  readonly tracked?: readonly string[] | undefined;
  /** Overwritten in every version of the key with the latest state's value. */
  readonly type1: readonly string[];
  /** A deletion is kept as a version of its own (`_scd_deleted = true`) rather than only closing one. */
  readonly tombstones: boolean;
  /** Whether a key may have no version for a while (deletes without tombstones). */
  readonly gapsAllowed: boolean;
}

/** One batch's rows as points: the row's attributes, its time and whether it deletes the key. */
export interface BatchInput {
  /** The rows, with every column the dimension gets and any others (dropped by `drop`). */
  readonly rows: Query;
  readonly ts: Expr;
  readonly deletes: Expr;
  /** Source columns that never reach the dimension (op column, sequence column, bronze stamps, exclusions). */
  readonly drop: readonly string[];
}

const namedStruct = (fields: readonly (readonly [string, Expr])[]): Expr => fn('named_struct', ...fields.flatMap(([n, e]) => [lit(n), e]));
const keyOf = (spec: HistorySpec, ...qualifier: string[]) => spec.keys.map((k) => col(...qualifier, P, k));
const sameKey = (spec: HistorySpec, a: string, b: string) => and(...spec.keys.map((k) => eqNullSafe(col(a, P, k), col(b, P, k))));

/** The control struct: last field of every row struct, so both sides of a join have one type. */
function control(spec: HistorySpec, ts: Expr, to: Expr, deletes: Expr): Expr {
  const t1 = spec.type1.length ? [['t1', namedStruct(spec.type1.map((c) => [c, col(c)] as const))] as const] : [];
  return namedStruct([['ts', cast(ts, 'timestamp')], ['to', cast(to, 'timestamp')], ['del', deletes], ...t1]);
}

/** The attribute signature of the current row (its columns then `__scd_ctrl`). */
function signature(spec: HistorySpec, deletes: Expr): Expr {
  const attributes = spec.tracked
    ? fn('to_json', namedStruct(spec.tracked.map((c) => [c, col(c)] as const)))
    : fn('substring_index', fn('to_json', fn('struct', star())), lit(`,"${CTRL}":`), lit(1));
  return fn('if', deletes, lit(DELETION), attributes);
}

/** Rows with their control field, the attribute columns only: what `__scd_p` is built from. */
function packed(spec: HistorySpec, rows: Query, ts: Expr, to: Expr, deletes: Expr, drop: readonly string[]): Query {
  return rows.withColumns([[CTRL, control(spec, ts, to, deletes)]]).drop(...drop, ...spec.type1);
}

const asPoints = (spec: HistorySpec, q: Query, rank: number) =>
  q.select(
    alias(fn('struct', star()), P),
    alias(col(CTRL, 'ts'), TS),
    alias(col(CTRL, 'del'), DEL),
    alias(signature(spec, col(CTRL, 'del')), SIG),
    alias(lit(rank), RANK),
  );

/** One row per (key, time): the first by `order`. */
function onePerInstant(spec: HistorySpec, q: Query, order: Expr): Query {
  const rn = '__scd_rn';
  return q
    .withColumns([[rn, over(fn('row_number'), [...keyOf(spec), col(TS)], [{ expr: order, descending: true, nullsFirst: false }])]])
    .filter(eq(col(rn), lit(1)))
    .drop(rn);
}

/** The batch's rows packed (attributes and control), before they become points. */
export function batchRows(spec: HistorySpec, batch: BatchInput): Query {
  return packed(spec, batch.rows, batch.ts, lit(null), batch.deletes, batch.drop);
}

/** The batch as points, one per key and time (identical duplicates are one; different ones are refused earlier). */
export function batchPoints(spec: HistorySpec, batch: BatchInput): Query {
  return pointsOfRows(spec, batchRows(spec, batch));
}

/** `batchPoints` of rows already packed by `batchRows` (e.g. kept by a materialize step). */
export function pointsOfRows(spec: HistorySpec, rows: Query): Query {
  return onePerInstant(spec, asPoints(spec, rows, 2), col(SIG));
}

/**
 * The stored versions as points: each version's start (a state, or a deletion for a tombstone
 * version), and its end as a deletion, which counts only where no other version starts.
 */
export function storedPoints(spec: HistorySpec, table: Query): Query {
  const rows = asPoints(spec, packed(spec, table, col(EFFECTIVE_FROM), col(EFFECTIVE_TO), col(DELETED), HISTORY_COLUMNS), 1);
  const e = '__scd_e';
  const start = namedStruct([
    ['p', col(P)],
    ['ts', col(TS)],
    ['del', col(DEL)],
    ['sig', col(SIG)],
    ['rank', lit(1)],
  ]);
  const end = namedStruct([
    ['p', col(P)],
    ['ts', col(P, CTRL, 'to')],
    ['del', lit(true)],
    ['sig', lit(DELETION)],
    ['rank', lit(0)],
  ]);
  const points = rows
    .select(alias(fn('explode', fn('array', start, end)), e))
    .select(alias(col(e, 'p'), P), alias(col(e, 'ts'), TS), alias(col(e, 'del'), DEL), alias(col(e, 'sig'), SIG), alias(col(e, 'rank'), RANK))
    .filter(isNotNull(col(TS)));
  return onePerInstant(spec, points, col(RANK));
}

/**
 * A full snapshot's points with `close-missing`: every key that has a current state and is absent
 * from the snapshot gets a deletion at the snapshot's time.
 */
export function closeMissing(spec: HistorySpec, batch: Query, table: Query, at: Expr): Query {
  const current = asPoints(
    spec,
    packed(spec, table.filter(and(col(CURRENT), not(col(DELETED)))), col(EFFECTIVE_FROM), col(EFFECTIVE_TO), col(DELETED), HISTORY_COLUMNS),
    1,
  );
  const inBatch = isNotNull(col(NEW, TS));
  return batch
    .as(NEW)
    .join(current.as(OLD), sameKey(spec, NEW, OLD), 'full')
    .select(
      alias(fn('if', inBatch, col(NEW, P), col(OLD, P)), P),
      alias(cast(at, 'timestamp'), TS),
      alias(fn('if', inBatch, col(NEW, DEL), lit(true)), DEL),
      alias(fn('if', inBatch, col(NEW, SIG), lit(DELETION)), SIG),
      alias(lit(2), RANK),
    );
}

/**
 * The stored and the batch's points of each key in one relation, one row per instant, with two
 * flags: `__scd_conflict` (the batch says something else than the dimension at the same instant)
 * and `__scd_late` (the batch's point is older than the key's latest stored point).
 */
export function combined(spec: HistorySpec, stored: Query, batch: Query): Query {
  const hasNew = isNotNull(col(NEW, TS));
  const hasOld = isNotNull(col(OLD, TS));
  const oldState = and(hasOld, eq(col(OLD, RANK), lit(1)));
  const t1 = spec.type1.length ? [alias(fn('if', hasNew, col(NEW, P, CTRL, 't1'), col(OLD, P, CTRL, 't1')), T1)] : [];
  const joined = stored
    .as(OLD)
    .join(batch.as(NEW), and(sameKey(spec, OLD, NEW), eq(col(OLD, TS), col(NEW, TS))), 'full')
    .select(
      // The stored row keeps its untracked values (a replay writes nothing); a deletion's row is the batch's.
      alias(fn('if', or(oldState, not(hasNew)), col(OLD, P), col(NEW, P)), P),
      alias(fn('coalesce', col(OLD, TS), col(NEW, TS)), TS),
      alias(fn('if', hasNew, col(NEW, DEL), col(OLD, DEL)), DEL),
      alias(fn('if', hasNew, col(NEW, SIG), col(OLD, SIG)), SIG),
      alias(and(hasNew, hasOld, not(eq(col(NEW, SIG), col(OLD, SIG)))), CONFLICT),
      alias(fn('if', hasOld, col(OLD, TS), lit(null)), '__scd_old_ts'),
      alias(hasNew, '__scd_is_new'),
      ...t1,
    );
  return joined
    .withColumns([[LATE, and(col('__scd_is_new'), isNull(col('__scd_old_ts')), fn('<', col(TS), over(fn('max', col('__scd_old_ts')), keyOf(spec), [])))]])
    .drop('__scd_old_ts', '__scd_is_new');
}

/**
 * The versions of the points: a point opens a version when its signature differs from the point
 * before it (a deletion first in a key's history has nothing to close and vanishes); each version
 * ends where the next one starts. Type-1 columns take the latest state's values in every version.
 * The columns are the dimension's: the attributes, the history columns, then the type-1 columns.
 */
export function versions(spec: HistorySpec, points: Query): Query {
  const byTime = (e: Expr) => over(e, keyOf(spec), [asc(col(TS))]);
  let q = points;
  if (spec.type1.length) q = q.withColumns([[T1_FINAL, over(fn('max_by', col(T1), fn('if', col(DEL), lit(null), col(TS))), keyOf(spec), [])]]);
  const prev = '__scd_prev';
  q = q
    .withColumns([[prev, byTime(fn('lag', col(SIG)))]])
    .filter(fn('if', isNull(col(prev)), not(col(DEL)), not(eq(col(SIG), col(prev)))))
    .withColumns([[TO, byTime(fn('lead', col(TS)))]]);
  if (!spec.tombstones) q = q.filter(not(col(DEL)));
  const out = q
    .select(
      star(P),
      alias(fn('xxhash64', ...keyOf(spec), col(TS)), DIM_KEY),
      alias(col(TS), EFFECTIVE_FROM),
      alias(col(TO), EFFECTIVE_TO),
      alias(isNull(col(TO)), CURRENT),
      alias(col(DEL), DELETED),
      ...(spec.type1.length ? [col(T1_FINAL)] : []),
    )
    .drop(CTRL);
  return spec.type1.length ? out.withColumns(spec.type1.map((c) => [c, col(T1_FINAL, c)] as const)).drop(T1_FINAL) : out;
}

/** The dimension's columns for a batch alone: what the table is created with and compared to. */
export function shapeOf(spec: HistorySpec, batch: Query): Query {
  const q = spec.type1.length ? batch.withColumns([[T1, col(P, CTRL, 't1')]]) : batch;
  return versions(spec, q);
}

/** The batch's keys (distinct), to read only their stored versions. */
export function batchKeys(spec: HistorySpec, batch: Query): Query {
  return batch.select(...spec.keys.map((k) => alias(col(P, k), k))).deduplicate();
}

/** The stored versions of the batch's keys. */
export function storedOfBatch(spec: HistorySpec, table: Query, batch: Query): Query {
  return table.join(batchKeys(spec, batch), [...spec.keys], 'left_semi');
}

/**
 * The MERGE source: the new state of the touched keys against their stored versions, by `_dim_key`:
 * a version only in the new state is inserted, one whose columns changed is updated, one no longer
 * in the history is deleted; unchanged versions are left out (an unchanged state writes nothing).
 */
export function mergeSource(newState: Query, stored: Query): Query {
  const s = '__scd_s';
  const sKey = '__scd_s_key';
  const sJson = '__scd_s_json';
  const oKey = '__scd_o_key';
  const oJson = '__scd_o_json';
  const newSide = newState.select(alias(fn('struct', star()), s), alias(col(DIM_KEY), sKey), alias(fn('to_json', fn('struct', star())), sJson));
  const oldSide = stored.select(alias(col(DIM_KEY), oKey), alias(fn('to_json', fn('struct', star())), oJson));
  const action = fn(
    'if',
    isNull(col(sKey)),
    lit('delete'),
    fn('if', isNull(col(oKey)), lit('insert'), fn('if', eq(col(sJson), col(oJson)), lit('keep'), lit('update'))),
  );
  return newSide
    .join(oldSide, eq(col(sKey), col(oKey)), 'full')
    .select(star(s), alias(action, ACTION), alias(fn('coalesce', col(sKey), col(oKey)), MERGE_KEY))
    .filter(not(eq(col(ACTION), lit('keep'))));
}

export const MERGE = { action: ACTION, key: MERGE_KEY } as const;

/** Counts of what the MERGE does. */
export function mergeCounts(source: Query): Query {
  const count = (action: string, name: string) => alias(fn('count_if', eq(col(ACTION), lit(action))), name);
  return source.aggregate([], [count('insert', 'inserted'), count('update', 'updated'), count('delete', 'deleted')]);
}

/** The batch's conflicts and late points (with an example key each), from `combined`. */
export function pointChecks(spec: HistorySpec, points: Query): Query {
  const example = (cond: Expr) =>
    fn('max', fn('if', cond, fn('to_json', namedStruct([...spec.keys.map((k) => [k, col(P, k)] as const), ['at', col(TS)]])), lit(null)));
  return points.aggregate(
    [],
    [
      alias(fn('count_if', col(CONFLICT)), 'conflicts'),
      alias(example(col(CONFLICT)), 'conflict_example'),
      alias(fn('count_if', col(LATE)), 'late'),
      alias(example(col(LATE)), 'late_example'),
    ],
  );
}

/**
 * The invariants of a dimension (or of a new state): per key, at most one current version, a
 * version is current exactly when it is open, `from < to`, no overlapping versions, no gap between
 * versions unless deletes may leave one, and `_dim_key` unique. One row of counts with an example.
 */
export function invariantBreaches(spec: Pick<HistorySpec, 'keys' | 'gapsAllowed'>, dimension: Query): Query {
  const keys = spec.keys.map((k) => col(k));
  const next = '__scd_next';
  const currents = '__scd_currents';
  const withNext = dimension.withColumns([
    [next, over(fn('lead', col(EFFECTIVE_FROM)), keys, [asc(col(EFFECTIVE_FROM))])],
    [currents, over(fn('count_if', col(CURRENT)), keys, [])],
  ]);
  const to = col(EFFECTIVE_TO);
  const breaches: [string, Expr][] = [
    ['multiple_current', fn('>', col(currents), lit(1))],
    ['current_not_open', not(eqNullSafe(col(CURRENT), isNull(to)))],
    ['empty_interval', and(isNotNull(to), not(fn('<', col(EFFECTIVE_FROM), to)))],
    ['overlaps', and(isNotNull(col(next)), or(isNull(to), fn('>', to, col(next))))],
    ['gaps', spec.gapsAllowed ? lit(false) : and(isNotNull(col(next)), isNotNull(to), fn('<', to, col(next)))],
  ];
  const anyBreach = or(...breaches.map(([, e]) => e));
  return withNext.aggregate(
    [],
    [
      ...breaches.map(([n, e]) => alias(fn('count_if', e), n)),
      alias(fn('-', fn('count', lit(1)), { kind: 'fn', name: 'count', args: [col(DIM_KEY)], distinct: true }), 'duplicate_dim_keys'),
      alias(fn('max', fn('if', anyBreach, fn('to_json', namedStruct(spec.keys.map((k) => [k, col(k)] as const))), lit(null))), 'example'),
    ],
  );
}

export const BREACHES = ['multiple_current', 'current_not_open', 'empty_interval', 'overlaps', 'gaps', 'duplicate_dim_keys'] as const;
