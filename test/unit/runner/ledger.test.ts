import { describe, expect, it } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { type LedgerCommit, type TableRef, deltaLineage, planRollback, resolveTable } from '../../../src/runner/ledger.js';

/** The ledger's pure parts: naming a table, a Delta table's lineage, and planning a rollback from commits. */
const platform = platformSchema.parse({ catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } } });
const acme = tenantContext('acme', 'file:///lake/acme');

describe('resolveTable', () => {
  it('names a table as a job config does (the default catalog) or as a status document does', () => {
    expect(resolveTable('silver.orders', acme, platform)).toEqual({ name: { catalog: 'lake', namespace: 'acme_silver', table: 'orders' }, format: 'iceberg' });
    expect(resolveTable('spark_catalog.acme_gold.daily', acme, platform)).toEqual({
      name: { catalog: 'spark_catalog', namespace: 'acme_gold', table: 'daily' },
      format: 'delta',
    });
    // A derived table (the tombstones) is the tenant's too.
    expect(resolveTable('silver.orders__cdc_tombstones', acme, platform).name.table).toBe('orders__cdc_tombstones');
  });

  it("refuses another tenant's table (78, TENANT_POLICY) and a malformed name or unknown catalog (64)", () => {
    expect(() => resolveTable('lake.beta_silver.orders', acme, platform)).toThrow(expect.objectContaining({ exitCode: 78, code: 'TENANT_POLICY' }));
    expect(() => resolveTable('acme_silverx.orders', acme, platform)).toThrow(expect.objectContaining({ exitCode: 78 }));
    expect(() => resolveTable('orders', acme, platform)).toThrow(expect.objectContaining({ exitCode: 64 }));
    expect(() => resolveTable('hive.acme_silver.orders', acme, platform)).toThrow(expect.objectContaining({ exitCode: 64 }));
    expect(() => resolveTable('lake.acme_silver.`x`', acme, platform)).toThrow(expect.objectContaining({ exitCode: 64 }));
  });
});

describe('deltaLineage', () => {
  it('skips the versions a RESTORE undid, and keeps a RESTORE of a RESTORE straight', () => {
    const v = (version: number, operation = 'MERGE', restoredTo?: number) => ({ version, operation, ...(restoredTo !== undefined ? { restoredTo } : {}) });
    expect([...deltaLineage([v(0, 'CREATE TABLE'), v(1), v(2)])].sort()).toEqual([0, 1, 2]);
    expect([...deltaLineage([v(0), v(1), v(2), v(3, 'RESTORE', 1), v(4)])].sort()).toEqual([0, 1, 3, 4]);
    expect([...deltaLineage([v(0), v(1), v(2), v(3, 'RESTORE', 1), v(4), v(5, 'RESTORE', 0)])].sort()).toEqual([0, 5]);
  });
});

describe('planRollback', () => {
  const silver: TableRef = { name: { catalog: 'lake', namespace: 'acme_silver', table: 'orders' }, format: 'iceberg' };
  const tomb: TableRef = { name: { catalog: 'lake', namespace: 'acme_silver', table: 'orders__cdc_tombstones' }, format: 'iceberg' };
  let clock = 0;
  const commit = (id: string, runId: string | undefined, extra: Partial<LedgerCommit> = {}): LedgerCommit => ({
    id,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, ++clock)).toISOString(),
    operation: 'overwrite',
    current: true,
    writer: runId ? 'lakehouse-jobs' : 'other',
    ...(runId ? { runId } : {}),
    counts: {},
    ...extra,
  });
  /** Newest first, as readCommits returns them. */
  const history = (...cs: LedgerCommit[]) => [...cs].reverse();
  const opts = { undo: 'r2', cascade: false, dryRun: false };

  it('returns each table to the commit before the run’s first one, the table written last first', () => {
    const commits = new Map([
      ['lake.acme_silver.orders__cdc_tombstones', history(commit('t1', 'r1'), commit('t2', 'r2'))],
      ['lake.acme_silver.orders', history(commit('s1', 'r1'), commit('s2', 'r2'), commit('s3', 'r2'))],
    ]);
    const p = planRollback([tomb, silver], commits, opts);
    expect(p.error).toBeUndefined();
    expect(p.report.tables.map((t) => [t.table, t.from, t.to, t.mode, t.state])).toEqual([
      ['lake.acme_silver.orders', 's3', 's1', 'rollback_to_snapshot', 'not-reached'],
      ['lake.acme_silver.orders__cdc_tombstones', 't2', 't1', 'rollback_to_snapshot', 'not-reached'],
    ]);
    expect(p.report.tables[0]!.undoes.map((u) => u.id)).toEqual(['s2', 's3']);
  });

  it('is blocked (65) by a later run or a foreign commit, naming them; --cascade takes them along, in every table', () => {
    const commits = new Map([
      ['lake.acme_silver.orders', history(commit('s1', 'r1'), commit('s2', 'r2'), commit('s3', 'r3'), commit('s4', undefined))],
      ['lake.acme_silver.orders__cdc_tombstones', history(commit('t1', 'r1'), commit('t2', 'r3'))],
    ]);
    const blocked = planRollback([silver, tomb], commits, opts);
    expect(blocked.error).toMatchObject({ exitCode: 65, code: 'ROLLBACK_BLOCKED' });
    expect(blocked.error!.message).toContain('run r3');
    expect(blocked.report.blockedBy.map((b) => [b.table, b.id, b.runId])).toEqual([
      ['lake.acme_silver.orders', 's3', 'r3'],
      ['lake.acme_silver.orders', 's4', undefined],
    ]);
    const cascade = planRollback([silver, tomb], commits, { ...opts, cascade: true });
    expect(cascade.error).toBeUndefined();
    expect(cascade.report.runs).toEqual(['r2', 'r3']);
    // r3 wrote the tombstones too: they go back to before it.
    expect(cascade.report.tables.map((t) => [t.table, t.to]).sort()).toEqual([
      ['lake.acme_silver.orders', 's1'],
      ['lake.acme_silver.orders__cdc_tombstones', 't1'],
    ]);
  });

  it('a run nothing wrote is 66; a run already rolled back is done; a run that created the table has no earlier state (65)', () => {
    const rolled = new Map([['lake.acme_silver.orders', history(commit('s1', 'r1'), commit('s2', 'r2', { current: false }))]]);
    expect(planRollback([silver], rolled, { ...opts, undo: 'nope' }).error).toMatchObject({ exitCode: 66 });
    const done = planRollback([silver], rolled, opts);
    expect(done.error).toBeUndefined();
    expect(done.report.tables[0]!.state).toBe('already-rolled-back');
    const created = planRollback([silver], rolled, { ...opts, undo: 'r1' });
    expect(created.error).toMatchObject({ exitCode: 65, code: 'ROLLBACK_NO_EARLIER_STATE' });
  });

  it('a Delta RESTORE after the run blocks nothing', () => {
    const delta: TableRef = { name: { catalog: 'spark_catalog', namespace: 'acme_silver', table: 'orders' }, format: 'delta' };
    const commits = new Map([
      [
        'spark_catalog.acme_silver.orders',
        history(
          commit('0', 'r1'),
          commit('1', 'r2'),
          commit('2', undefined, { operation: 'SET TBLPROPERTIES', current: false }),
          commit('3', undefined, { operation: 'RESTORE' }),
        ),
      ],
    ]);
    const p = planRollback([delta], commits, { ...opts, dryRun: true });
    expect(p.error).toBeUndefined();
    expect(p.report.tables[0]).toMatchObject({ from: '3', to: '0', mode: 'restore', state: 'would-roll-back' });
  });
});

describe('the ledger on S3 in a Delta catalog (docs/object-storage.md, "Delta on S3")', () => {
  const base = {
    'tenant-binding': 'required',
    catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
    tenants: { acme: { 'storage-roots': ['s3a://lake/acme'] }, beta: { 'storage-roots': ['s3a://lake/beta'], spark: { remote: 'sc://beta-spark:15002' } } },
  };
  const ledger = (catalog: string, location: string) => ({ catalog, table: 'platform.job_runs', location });
  const issues = (p: object) => {
    const r = platformSchema.safeParse(p);
    return r.success ? [] : r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  };

  it('is refused (78) when tenants append from servers of their own under Delta’s single-driver log store', () => {
    expect(issues({ ...base, ledger: ledger('spark_catalog', 's3a://platform/job_runs') })).toEqual([
      { path: 'ledger.catalog', message: expect.stringMatching(/the runs of tenants beta append to it from servers of their own: a row could be lost/) },
    ]);
    expect(issues({ ...base, ledger: ledger('spark_catalog', 's3://platform/job_runs') }).map((i) => i.path)).toEqual(['ledger.catalog']);
  });

  it('is accepted on Iceberg, off S3, with one server, or with the DynamoDB log store declared', () => {
    expect(issues({ ...base, ledger: ledger('lake', 's3a://platform/job_runs') })).toEqual([]);
    expect(issues({ ...base, ledger: ledger('spark_catalog', 'file:///platform/job_runs') })).toEqual([]);
    expect(issues({ ...base, tenants: { acme: base.tenants.acme }, ledger: ledger('spark_catalog', 's3a://platform/job_runs') })).toEqual([]);
    expect(issues({ ...base, delta: { 's3-log-store': 'dynamodb' }, ledger: ledger('spark_catalog', 's3a://platform/job_runs') })).toEqual([]);
  });
});
