import { describe, expect, it } from 'vitest';
import { type WindowTable, commitWindow } from '../../../src/jobs/commit-window.js';
import { type QueryStep, type Row, type Step, StepFacts } from '../../../src/jobs/steps.js';

const table = (name: string) => ({ catalog: 'lake', namespace: 'acme_silver', table: name });
const tables: WindowTable[] = [
  { label: 'silver', table: table('orders') },
  { label: 'tombstones', table: table('orders__cdc_tombstones') },
];
const ME = 'attempt-1';

/** The window's verdict on the rows its steps returned, by step id (a step without rows did not run). */
function foreignCommits(byId: Record<string, Row[]>, format: 'iceberg' | 'delta', ts: WindowTable[], attempt: string | undefined, own: Record<string, number>) {
  const window = commitWindow(format, ts);
  const facts = new StepFacts();
  for (const step of [...window.base, ...window.after]) if (byId[step.id]) facts.record(step, step.columns, byId[step.id]!);
  return window.foreignCommits(facts, attempt, own);
}

describe('the commit window on Iceberg (snapshot parent chain)', () => {
  const snap = (tbl: string, commit: string, parent: string | null, attempt: string | null) => ({ tbl, commit, parent, attempt, current: false });
  const current = (tbl: string, commit: string) => ({ tbl, commit, parent: null, attempt: null, current: true });
  const base = {
    'base-commits': [
      { tbl: 'silver', commit: '10' },
      { tbl: 'tombstones', commit: '20' },
    ],
  };
  const history = [snap('silver', '10', '9', 'old'), snap('tombstones', '20', null, 'old')];

  it('reads one step before and one after, both tables at once', () => {
    expect(commitWindow('iceberg', tables).base.map((s) => s.id)).toEqual(['base-commits']);
    expect(commitWindow('iceberg', tables).after.map((s) => s.id)).toEqual(['window-commits']);
  });

  it('is clean when the chain back to the base holds only this attempt’s commits, as many as it made', () => {
    const facts = {
      ...base,
      'window-commits': [...history, snap('silver', '11', '10', ME), current('silver', '11'), snap('tombstones', '21', '20', ME), current('tombstones', '21')],
    };
    expect(foreignCommits(facts, 'iceberg', tables, ME, { silver: 1, tombstones: 1 })).toEqual([]);
    // Nothing committed by anyone: clean too.
    expect(
      foreignCommits({ ...base, 'window-commits': [...history, current('silver', '10'), current('tombstones', '20')] }, 'iceberg', tables, ME, {}),
    ).toEqual([]);
    // Tables without any snapshot before and after (created empty, nothing written): clean.
    expect(foreignCommits({ 'base-commits': [], 'window-commits': [] }, 'iceberg', tables, ME, {})).toEqual([]);
  });

  it('is not clean when another writer committed, even with the same run id (another attempt)', () => {
    const facts = {
      ...base,
      'window-commits': [
        ...history,
        snap('tombstones', '21', '20', 'attempt-2'),
        snap('tombstones', '22', '21', ME),
        current('tombstones', '22'),
        current('silver', '10'),
      ],
    };
    expect(foreignCommits(facts, 'iceberg', tables, ME, { silver: 0, tombstones: 1 })).toEqual(['tombstones: snapshot 21 was committed by another writer']);
    // A commit without any nonce (an older runner, a hand-made INSERT) is another writer's.
    const unstamped = { ...base, 'window-commits': [...history, snap('silver', '11', '10', null), current('silver', '11'), current('tombstones', '20')] };
    expect(foreignCommits(unstamped, 'iceberg', tables, ME, { silver: 1 })).toHaveLength(1);
  });

  it('is not clean with more commits of its own than it made, a chain that misses the base, or a rollback', () => {
    const two = {
      ...base,
      'window-commits': [...history, snap('silver', '11', '10', ME), snap('silver', '12', '11', ME), current('silver', '12'), current('tombstones', '20')],
    };
    expect(foreignCommits(two, 'iceberg', tables, ME, { silver: 1 })).toEqual(["silver: 2 commits since the run's first read, 1 of them this run's"]);
    const lost = { ...base, 'window-commits': [snap('silver', '11', '7', ME), current('silver', '11'), current('tombstones', '20')] };
    expect(foreignCommits(lost, 'iceberg', tables, ME, { silver: 1 })).toEqual(['silver: snapshot 7 is not in its history']);
    const rolledBack = { ...base, 'window-commits': [...history, current('tombstones', '20')] };
    expect(foreignCommits(rolledBack, 'iceberg', tables, ME, {})).toEqual(['silver: its history no longer reaches the snapshot the run first read']);
  });

  it('is not clean without a nonce, or when the commits were not read', () => {
    expect(foreignCommits({ ...base, 'window-commits': [] }, 'iceberg', tables, undefined, {})).toHaveLength(1);
    expect(foreignCommits(base, 'iceberg', tables, ME, {})).toEqual(['window-commits did not run']);
  });
});

describe('the commit window on Delta (consecutive versions)', () => {
  const meta = (attempt?: string) => JSON.stringify({ 'lakehouse-jobs': { runId: 'r', ...(attempt ? { attempt } : {}), job: 'j' } });
  const v = (tbl: string, commit: string, userMetadata: string | null) => ({ tbl, commit, userMetadata });
  const base = { 'base-commits-silver': [{ tbl: 'silver', commit: '4' }], 'base-commits-tombstones': [{ tbl: 'tombstones', commit: '2' }] };

  it('reads each table in its own step (DESCRIBE HISTORY is a command)', () => {
    expect(commitWindow('delta', tables).base.map((s) => s.id)).toEqual(['base-commits-silver', 'base-commits-tombstones']);
    expect(commitWindow('delta', tables).after.map((s) => s.id)).toEqual(['window-commits-silver', 'window-commits-tombstones']);
  });

  it('is clean when every version after the base carries this attempt’s nonce, no more than it made', () => {
    const facts = {
      ...base,
      'window-commits-silver': [v('silver', '5', meta(ME)), v('silver', '4', meta('old')), v('silver', '3', null)],
      'window-commits-tombstones': [v('tombstones', '2', meta('old')), v('tombstones', '1', null)],
    };
    expect(foreignCommits(facts, 'delta', tables, ME, { silver: 1, tombstones: 0 })).toEqual([]);
  });

  it('is not clean when another attempt committed, or when there are more versions than its own', () => {
    const retry = {
      ...base,
      'window-commits-silver': [v('silver', '5', meta('attempt-2')), v('silver', '4', meta('old'))],
      'window-commits-tombstones': [v('tombstones', '2', null)],
    };
    expect(foreignCommits(retry, 'delta', tables, ME, { silver: 1 })).toEqual(['silver: version 5 was committed by another writer']);
    const many = {
      ...base,
      'window-commits-silver': [v('silver', '7', meta(ME)), v('silver', '6', meta(ME)), v('silver', '5', meta(ME))],
      'window-commits-tombstones': [v('tombstones', '2', null)],
    };
    expect(foreignCommits(many, 'delta', tables, ME, { silver: 1 })).toEqual(["silver: 3 commits since the run's first read, 1 of them this run's"]);
    const garbled = { ...base, 'window-commits-silver': [v('silver', '5', 'not json')], 'window-commits-tombstones': [v('tombstones', '2', null)] };
    expect(foreignCommits(garbled, 'delta', tables, ME, { silver: 1 })).toHaveLength(1);
  });
});

describe('the after-read reports the current commit of the table that asks for it', () => {
  const interpret = (step: Step | undefined, rows: Row[]) => (step as QueryStep<string>).interpret(rows as never);
  const reporting: WindowTable[] = [{ ...tables[0]!, reportCurrent: true }, tables[1]!];

  it('Iceberg: the main ref of that table, not the newest snapshot nor the other table’s', () => {
    const [after] = commitWindow('iceberg', reporting).after;
    const rows = [
      { tbl: 'silver', commit: '12', parent: '11', attempt: ME, current: false },
      { tbl: 'silver', commit: '11', parent: null, attempt: null, current: true },
      { tbl: 'tombstones', commit: '30', parent: null, attempt: null, current: true },
    ];
    expect(interpret(after, rows)).toEqual({ output: { table: 'lake.acme_silver.orders', format: 'iceberg', snapshotId: '11' } });
    // No main ref (a table without a commit): nothing to report.
    expect(
      interpret(
        after,
        rows.filter((r) => !(r.tbl === 'silver' && r.current)),
      ),
    ).toEqual({});
    // A window without a reporting table reports nothing.
    expect(interpret(commitWindow('iceberg', tables).after[0], rows)).toEqual({});
  });

  it('Delta: the newest of that table’s versions read; the other table’s step reports nothing', () => {
    const [silver, tombstones] = commitWindow('delta', reporting).after;
    const rows = ['9', '11', '10'].map((commit) => ({ tbl: 'silver', commit, userMetadata: null }));
    expect(interpret(silver, rows)).toEqual({ output: { table: 'lake.acme_silver.orders', format: 'delta', snapshotId: '11' } });
    expect(interpret(tombstones, [{ tbl: 'tombstones', commit: '4', userMetadata: null }])).toEqual({});
  });
});

describe('a base known before the base steps', () => {
  const known = (facts: unknown) => ((facts as StepFacts).rows({ id: 'fp' } as never)?.[0] as { commits?: Record<string, string | null> } | undefined)?.commits;

  it('replaces them: they are not sent, and the window is judged from it', () => {
    for (const format of ['iceberg', 'delta'] as const) {
      const window = commitWindow(format, tables, known);
      const facts = new StepFacts();
      facts.record({ id: 'fp', columns: ['commits'] } as never, ['commits'], [{ commits: { silver: '10', tombstones: null } }]);
      expect(window.base.map((s) => (s as Step).when!(facts))).toEqual(window.base.map(() => false));
      expect(window.baseRows(facts)).toEqual([
        { tbl: 'silver', commit: '10' },
        { tbl: 'tombstones', commit: null },
      ]);
      // Without it, the base steps run and their rows are the base.
      const bare = new StepFacts();
      expect(window.base.map((s) => (s as Step).when!(bare))).toEqual(window.base.map(() => true));
      expect(window.baseRows(bare)).toBeUndefined();
    }
    const window = commitWindow('iceberg', tables, known);
    const facts = new StepFacts();
    facts.record({ id: 'fp', columns: ['commits'] } as never, ['commits'], [{ commits: { silver: '10', tombstones: null } }]);
    const after = [
      { tbl: 'silver', commit: '11', parent: '10', attempt: ME, current: false },
      { tbl: 'silver', commit: '11', parent: null, attempt: null, current: true },
    ];
    facts.record(window.after[0]!, window.after[0]!.columns, after);
    expect(window.foreignCommits(facts, ME, { silver: 1, tombstones: 0 })).toEqual([]);
    expect(window.foreignCommits(facts, 'another', { silver: 1, tombstones: 0 })).toEqual(['silver: snapshot 11 was committed by another writer']);
  });
});
