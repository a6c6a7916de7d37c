import { type TableName, displayTable, tableParts } from '../core/naming.js';
import { alias, cast, col, lit } from '../spark/plan/expressions.js';
import { Query } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import { type Facts, type Row, type RowsStep, type Step, type StepEffect, queryStep } from './steps.js';

/**
 * Did another writer commit to a run's tables between its first read and its own commits? A run
 * records each table's current commit before it first reads the tables to decide (the base), and
 * reads the tables' commits again after its own. The window is clean when everything committed
 * since the base is this attempt's own, and no more than it made: Iceberg, the parent chain from
 * the current snapshot back to the base consists of snapshots stamped with this attempt's nonce
 * (`lakehouse-jobs.attempt` in the summary); Delta, every version after the base carries the nonce
 * in its `userMetadata`. Only metadata is read (Iceberg's metadata tables, Delta's latest commits).
 * An orchestrator's retry of the same run keeps the run id but not the nonce, so its commits count
 * as another writer's. Anything unreadable, or a run without a nonce, counts as not clean.
 */

export interface WindowTable {
  /** A label of the table in the rows and the reasons (e.g. `silver`, `tombstones`). */
  readonly label: string;
  readonly table: TableName;
  /**
   * Report the commit the after-read finds current (Iceberg: the main ref's snapshot; Delta: the
   * latest version) as the table's `snapshotId` in the status, as readCommitStep does: the run
   * then needs no step of its own for it unless it writes the table again after the window.
   */
  readonly reportCurrent?: boolean;
}

/** The property both formats carry the attempt's nonce under (src/runner/run.ts commitMetadata). */
const ATTEMPT = 'lakehouse-jobs.attempt';
/** Delta: how many of the latest versions the window reads; more than a run's own commits per table. */
const DELTA_VERSIONS = 3;

const BASE = ['tbl', 'commit'] as const;
const ICEBERG_WINDOW = ['tbl', 'commit', 'parent', 'attempt', 'current'] as const;
const DELTA_WINDOW = ['tbl', 'commit', 'userMetadata'] as const;

/** The steps that read a run's tables' commits, before its first read and after its own commits. */
export interface CommitWindow {
  /** Read each table's current commit: run before the first read that decides. */
  readonly base: readonly RowsStep<string>[] & readonly Step[];
  /** Read the tables' commits again: run after the run's own commits. */
  readonly after: readonly RowsStep<string>[] & readonly Step[];
  /**
   * Why the window is not clean (one reason per table that shows another writer's commit), or an
   * empty list. `own` is how many commits this run made to each table (0 or 1, from its facts).
   */
  foreignCommits(facts: Facts, attempt: string | undefined, own: Readonly<Record<string, number>>): string[];
  /** The base's rows (`tbl`, `commit`), read by the base steps or known before them; undefined when neither. */
  baseRows(facts: Facts): readonly Row[] | undefined;
}

/**
 * `knownBase`: the tables' current commits (label to commit, null for none) when an earlier step of
 * the run already read them before its first read of the tables (a batch fingerprint reads both
 * tables' main refs first), undefined when it did not: the base steps run only then. An earlier
 * base is a safe one: a commit between it and the first read counts as another writer's.
 */
export function commitWindow(
  format: 'iceberg' | 'delta',
  tables: readonly WindowTable[],
  knownBase?: (facts: Facts) => Readonly<Record<string, string | null>> | undefined,
): CommitWindow {
  const unknown = (facts: Facts) => knownBase?.(facts) === undefined;
  const base = format === 'iceberg' ? [icebergBase(tables, unknown)] : tables.map((t) => deltaBase(t, unknown));
  const after = format === 'iceberg' ? [icebergAfter(tables)] : tables.map(deltaAfter);
  const rowsOf = (facts: Facts, steps: readonly RowsStep<string>[]) => steps.flatMap((step) => facts.rows(step) ?? []) as Row[];
  const baseRows = (facts: Facts): readonly Row[] | undefined => {
    const known = knownBase?.(facts);
    if (known) return Object.entries(known).map(([tbl, commit]) => ({ tbl, commit }));
    return base.some((step) => facts.rows(step) === undefined) ? undefined : rowsOf(facts, base);
  };
  return {
    base,
    after,
    baseRows,
    foreignCommits: (facts, attempt, own) => {
      if (attempt === undefined) return ['this run has no attempt nonce to tell its own commits by'];
      const start = baseRows(facts);
      const unread = [...(start ? [] : base), ...after].filter((step) => facts.rows(step) === undefined).map((step) => step.id);
      if (!start || unread.length) return [`${unread.join(', ')} did not run`];
      const window = rowsOf(facts, after);
      const reasons: string[] = [];
      for (const t of tables) {
        const of = (rows: readonly Row[]) => rows.filter((r) => r.tbl === t.label);
        const why =
          format === 'iceberg'
            ? icebergChain(of(start)[0]?.commit, of(window), attempt, own[t.label] ?? 0)
            : deltaVersions(of(start)[0]?.commit, of(window), attempt, own[t.label] ?? 0);
        if (why) reasons.push(`${t.label}: ${why}`);
      }
      return reasons;
    },
  };
}

const names = (tables: readonly WindowTable[]) => tables.map((t) => displayTable(t.table)).join(' and ');

function icebergBase(tables: readonly WindowTable[], when: (facts: Facts) => boolean) {
  const text = sql.join(
    tables.map(
      (t) =>
        sql`SELECT ${sql.value(t.label)} AS tbl, CAST(snapshot_id AS STRING) AS commit FROM ${sql.table([...tableParts(t.table), 'refs'])} WHERE name = 'main'`,
    ),
    sql` UNION ALL `,
  );
  return queryStep({
    id: 'base-commits',
    when,
    title: `Record the current commit of ${names(tables)} before reading them`,
    query: Query.sql(text),
    columns: BASE,
    interpret: () => ({}),
  });
}

/** The status output of the tables that report their current commit, from the after-read's rows. */
function reported(
  tables: readonly WindowTable[],
  rows: readonly Row[],
  format: 'iceberg' | 'delta',
  current: (rows: readonly Row[]) => string | undefined,
): StepEffect {
  const t = tables.find((x) => x.reportCurrent);
  const snapshotId = t && current(rows.filter((r) => r.tbl === t.label));
  return t && snapshotId !== undefined ? { output: { table: displayTable(t.table), format, snapshotId } } : {};
}

function icebergAfter(tables: readonly WindowTable[]) {
  const text = sql.join(
    tables.flatMap((t) => {
      const parts = tableParts(t.table);
      const label = sql.value(t.label);
      return [
        sql`SELECT ${label} AS tbl, CAST(snapshot_id AS STRING) AS commit, CAST(parent_id AS STRING) AS parent, summary[${sql.value(ATTEMPT)}] AS attempt, false AS current FROM ${sql.table([...parts, 'snapshots'])}`,
        sql`SELECT ${label}, CAST(snapshot_id AS STRING), NULL, NULL, true FROM ${sql.table([...parts, 'refs'])} WHERE name = 'main'`,
      ];
    }),
    sql` UNION ALL `,
  );
  return queryStep({
    id: 'window-commits',
    title: `Read the commits of ${names(tables)} since this run's first read`,
    query: Query.sql(text),
    columns: ICEBERG_WINDOW,
    interpret: (rows) => reported(tables, rows, 'iceberg', (of) => str(of.find((r) => r.current === true)?.commit)),
  });
}

function deltaBase(t: WindowTable, when: (facts: Facts) => boolean) {
  return queryStep({
    id: `base-commits-${t.label}`,
    when,
    title: `Record the current version of ${displayTable(t.table)} before reading it`,
    query: Query.sql(sql`DESCRIBE HISTORY ${sql.table(tableParts(t.table))} LIMIT 1`).select(
      alias(lit(t.label), 'tbl'),
      alias(cast(col('version'), 'string'), 'commit'),
    ),
    columns: BASE,
    interpret: () => ({}),
  });
}

function deltaAfter(t: WindowTable) {
  return queryStep({
    id: `window-commits-${t.label}`,
    title: `Read the latest versions of ${displayTable(t.table)} since this run's first read`,
    query: Query.sql(sql`DESCRIBE HISTORY ${sql.table(tableParts(t.table))} LIMIT ${sql.value(DELTA_VERSIONS)}`).select(
      alias(lit(t.label), 'tbl'),
      alias(cast(col('version'), 'string'), 'commit'),
      col('userMetadata'),
    ),
    columns: DELTA_WINDOW,
    interpret: (rows) => reported([t], rows, 'delta', latestVersion),
  });
}

const str = (v: unknown): string | undefined => (v === null || v === undefined ? undefined : String(v));

/** The newest version among a Delta table's history rows. */
function latestVersion(rows: readonly Row[]): string | undefined {
  const versions = rows.map((r) => str(r.commit)).filter((v): v is string => v !== undefined);
  return versions.length ? versions.reduce((m, v) => (BigInt(v) > BigInt(m) ? v : m)) : undefined;
}

/** Walk the parent chain from the current snapshot back to the base: only ours, at most `own`. */
function icebergChain(baseCommit: unknown, rows: readonly Row[], attempt: string, own: number): string | undefined {
  const base = str(baseCommit);
  const snapshots = new Map(rows.filter((r) => r.current !== true).map((r) => [String(r.commit), r]));
  let at = str(rows.find((r) => r.current === true)?.commit);
  let n = 0;
  while (at !== base) {
    // No current snapshot while the run saw one: the table was rolled back or replaced.
    if (at === undefined) return 'its history no longer reaches the snapshot the run first read';
    const s = snapshots.get(at);
    if (!s) return `snapshot ${at} is not in its history`;
    if (str(s.attempt) !== attempt) return `snapshot ${at} was committed by another writer`;
    if (++n > own) return `${n} commits since the run's first read, ${own} of them this run's`;
    at = str(s.parent);
  }
  return undefined;
}

/** Delta versions are consecutive: every version after the base is ours, at most `own` of them. */
function deltaVersions(baseCommit: unknown, rows: readonly Row[], attempt: string, own: number): string | undefined {
  const base = str(baseCommit);
  if (base === undefined) return 'the version the run first read is unknown';
  const after = rows.filter((r) => BigInt(String(r.commit)) > BigInt(base));
  const latest = rows.reduce((m, r) => (BigInt(String(r.commit)) > m ? BigInt(String(r.commit)) : m), BigInt(base));
  const count = latest - BigInt(base);
  if (count > BigInt(own)) return `${count} commits since the run's first read, ${own} of them this run's`;
  if (BigInt(after.length) !== count) return 'its recent versions could not all be read';
  for (const r of after) if (deltaAttempt(r.userMetadata) !== attempt) return `version ${String(r.commit)} was committed by another writer`;
  return undefined;
}

function deltaAttempt(userMetadata: unknown): string | undefined {
  if (typeof userMetadata !== 'string') return undefined;
  try {
    const doc = JSON.parse(userMetadata) as { 'lakehouse-jobs'?: { attempt?: unknown } };
    return str(doc['lakehouse-jobs']?.attempt);
  } catch {
    return undefined;
  }
}
