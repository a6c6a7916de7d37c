import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import {
  connect,
  deltaLogWithDeltaRs,
  freshTenant,
  icebergSnapshotSummary,
  readDeltaWithDeltaRs,
  readIcebergWithPyIceberg,
  runJob,
} from '../../support/stack.js';
import { pausePoint, runInProcess } from '../../support/in-process.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * cdc-silver-merge looks a second time for resurrected rows (find-resurrected) only when it has to:
 * when another writer committed to silver or its tombstones between the run's first read and its
 * own commits, or when a row of the batch's keys was already older than its tombstone. These tests
 * drive that decision against real tables: a clean window skips the look; a foreign commit in the
 * window (here stamped with the same run id, as an orchestrator's retry of the run would be) makes
 * the run take it and heal what the commit left; a tombstone a dead run left without its silver
 * delete is healed as before. Silver is read back by a second engine (PyIceberg, delta-rs).
 */
const tenant = freshTenant();
let dir: string;
let client: SparkConnectClient;

type Event = [id: number, ts: number, op: string, v: string];
const DAY0 = '2026-04-01'; // keys 1..6 at sequence 5, a delete of key 7 (a tombstone)
const X = '2026-04-02'; // key 3 late (4), key 4 updated (7)
const Y = '2026-04-03'; // key 5 late (4), key 6 updated (8)
const batches: Record<string, Event[]> = {
  [DAY0]: [...[1, 2, 3, 4, 5, 6].map((k): Event => [k, 5, 'c', `v0-${k}`]), [7, 5, 'd', 'v0-7']],
  [X]: [
    [3, 4, 'u', 'x-late-3'],
    [4, 7, 'u', 'x-upd-4'],
  ],
  [Y]: [
    [5, 4, 'u', 'y-late-5'],
    [6, 8, 'u', 'y-upd-6'],
  ],
};

const catalogOf = (format: 'iceberg' | 'delta') => (format === 'iceberg' ? 'lake' : 'spark_catalog');

const config = (format: 'iceberg' | 'delta', table: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-window" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${table}", format = ${format}, catalog = "${catalogOf(format)}" }
`;

function run(format: 'iceberg' | 'delta', table: string, date: string, runId: string, beforeStep?: Parameters<typeof runInProcess>[1]) {
  return runInProcess(
    { configFile: join(dir, `${table}.conf`), envFile: join(dir, 'platform.conf'), overrides: [`source.snapshot-date=${date}`], env: {}, runId },
    beforeStep,
  );
}

function silver(format: 'iceberg' | 'delta', table: string) {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) })).sort((a, b) => a.id - b.id);
}

/**
 * A tombstone written straight into the tombstone table, as another writer would, stamped with
 * `runId` but not with any attempt of ours: what a dead run or a concurrent retry leaves behind.
 */
async function foreignTombstone(format: 'iceberg' | 'delta', table: string, id: number, ts: number, runId: string, deletedAt = 'current_timestamp()') {
  await client.config.set({
    'spark.sql.iceberg.snapshot-property.lakehouse-jobs.run-id': runId,
    'spark.databricks.delta.commitInfo.userMetadata': JSON.stringify({ 'lakehouse-jobs': { runId } }),
  });
  const tombstones = `\`${catalogOf(format)}\`.\`${tenant.id}_silver\`.\`${table}__cdc_tombstones\``;
  await client.execute(compileCommandPlan(testCommand(`INSERT INTO ${tombstones} VALUES (${id}, ${ts}, ${deletedAt}, '${runId}')`), { reveal: true }));
}

/** The keys of the tombstone table, read by a second engine. */
function tombstoneKeys(format: 'iceberg' | 'delta', table: string) {
  const name = `${table}__cdc_tombstones`;
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, name) : readDeltaWithDeltaRs(`${tenant.root}/silver/${name}`);
  return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
}

/** Silver's current commit, read by a second engine (Iceberg: the current snapshot; Delta: the latest version). */
function currentCommit(format: 'iceberg' | 'delta', table: string) {
  if (format === 'iceberg') return String(icebergSnapshotSummary(`${tenant.id}_silver`, table).snapshot_id);
  return String(deltaLogWithDeltaRs(`${tenant.root}/silver/${table}`).commits.at(-1)!.version);
}

const READ_COMMIT = { iceberg: 'read-snapshot', delta: 'read-version' } as const;

/** The table with DAY0 applied. */
async function seeded(format: 'iceberg' | 'delta', table: string) {
  writeFileSync(join(dir, `${table}.conf`), config(format, table));
  const first = await run(format, table, DAY0, `it-window-${table}-day0`);
  expect(first.code).toBe(0);
  return first;
}

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  client = connect();
  for (const [date, rows] of Object.entries(batches)) {
    const values = rows.map(([id, ts, op, v]) => `(${id}, ${ts}, '${op}', '${v}')`).join(', ');
    const q = testQuery(
      `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM VALUES ${values} AS t(id, ts, op, v)`,
    );
    await client.execute(
      compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/events_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
    );
  }
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe.each(['iceberg', 'delta'] as const)('the second look on %s', (format) => {
  it('is skipped when only this run committed since its first read', async () => {
    const table = `clean_${format}`;
    // The first run creates both tables and commits to both: its own commits, nothing else.
    const first = await seeded(format, table);
    expect(first.steps).toContain('merge');
    expect(first.steps).toContain('record-tombstones');
    expect(first.steps).not.toContain('find-resurrected');
    const next = await run(format, table, X, `it-window-${table}-x`);
    expect(next.code).toBe(0);
    expect(next.steps).toContain('merge');
    expect(next.steps).not.toContain('find-resurrected');
    // The status's commit is the one window-commits read after the merge: no read of its own.
    expect(next.steps).not.toContain(READ_COMMIT[format]);
    // Parquet bronze into Iceberg: the batch fingerprint read both tables' refs first, and that is
    // the window's base (base-commits ran only on the first run, before the tables existed).
    if (format === 'iceberg') {
      expect(first.steps).toEqual(expect.arrayContaining(['batch-fingerprint', 'base-commits']));
      expect(next.steps).toContain('batch-fingerprint');
      expect(next.steps).not.toContain('base-commits');
    }
    expect(next.report.outputs[0]).toMatchObject({ committed: true, snapshotId: currentCommit(format, table) });
    // A rerun commits nothing and looks at nothing.
    const rerun = await run(format, table, X, `it-window-${table}-x`);
    expect(rerun.code).toBe(0);
    expect(rerun.steps).not.toContain('merge');
    expect(rerun.steps).not.toContain('find-resurrected');
    expect(silver(format, table).find((r) => r.id === 4)).toEqual({ id: 4, ts: 7, v: 'x-upd-4' });
  });

  it('is taken, and heals, when another writer committed between the first read and the merge', async () => {
    const table = `foreign_${format}`;
    await seeded(format, table);
    const runId = `it-window-${table}-x`;
    const pause = pausePoint();
    const x = run(format, table, X, runId, pause.hold('merge'));
    await Promise.race([pause.reached, x]);
    // After x measured (key 3 had no tombstone then), a tombstone newer than key 3's row lands,
    // committed under x's own run id by another attempt: x cannot have seen it.
    await foreignTombstone(format, table, 3, 9, runId);
    pause.release();
    const outcome = await x;
    expect(outcome.code).toBe(0);
    expect(outcome.steps).toEqual(
      expect.arrayContaining(['merge', format === 'iceberg' ? 'window-commits' : 'window-commits-silver', 'find-resurrected', 'delete-resurrected']),
    );
    // On Iceberg the base was the fingerprint's read, before the foreign commit: it counts.
    if (format === 'iceberg') expect(outcome.steps).not.toContain('base-commits');
    // The look found key 3's row older than its tombstone and deleted it; key 4 got x's update.
    expect(silver(format, table)).toEqual([
      { id: 1, ts: 5, v: 'v0-1' },
      { id: 2, ts: 5, v: 'v0-2' },
      { id: 4, ts: 7, v: 'x-upd-4' },
      { id: 5, ts: 5, v: 'v0-5' },
      { id: 6, ts: 5, v: 'v0-6' },
    ]);
  });

  it('is taken, and heals, when a dead run left a tombstone without its silver delete', async () => {
    const table = `dead_${format}`;
    await seeded(format, table);
    // Before the run: a tombstone newer than key 5's row, whose merge never ran.
    await foreignTombstone(format, table, 5, 9, 'it-window-dead-run');
    const y = await run(format, table, Y, `it-window-${table}-y`);
    expect(y.code).toBe(0);
    expect(y.steps).toEqual(expect.arrayContaining(['merge', 'find-resurrected', 'delete-resurrected', READ_COMMIT[format]]));
    expect(silver(format, table).map((r) => r.id)).toEqual([1, 2, 3, 4, 6]);
    // The look's delete is a commit after window-commits: the status names it, not the merge's.
    expect(y.report.outputs[0]).toMatchObject({ snapshotId: currentCommit(format, table), metrics: { repaired: 1 } });
    expect(silver(format, table).find((r) => r.id === 6)).toEqual({ id: 6, ts: 8, v: 'y-upd-6' });
  });
});

describe.each(['iceberg', 'delta'] as const)('tombstones past the retention on %s', (format) => {
  it('are counted by measure and forgotten; the others are kept, and a run with none sends no delete', async () => {
    const table = `expiry_${format}`;
    await seeded(format, table);
    // Key 9's tombstone was written 40 days ago (the retention is 30 days); key 7's by DAY0.
    await foreignTombstone(format, table, 9, 1, 'it-window-old-run', 'current_timestamp() - INTERVAL 40 DAYS');
    expect(tombstoneKeys(format, table)).toEqual([7, 9]);
    const x = await run(format, table, X, `it-window-${table}-x`);
    expect(x.code).toBe(0);
    expect(x.steps).toContain('expire-tombstones');
    expect(tombstoneKeys(format, table)).toEqual([7]);
    const y = await run(format, table, Y, `it-window-${table}-y`);
    expect(y.code).toBe(0);
    expect(y.steps).toContain('merge');
    expect(y.steps).not.toContain('expire-tombstones');
    expect(tombstoneKeys(format, table)).toEqual([7]);
  });
});

describe('the status after a rollback (iceberg)', () => {
  it("names the snapshot silver's main branch points at, not the latest one committed", async () => {
    const table = 'rollback_iceberg';
    await seeded('iceberg', table);
    const day0 = icebergSnapshotSummary(`${tenant.id}_silver`, table).snapshot_id;
    expect((await run('iceberg', table, X, `it-window-${table}-x`)).code).toBe(0);
    expect(icebergSnapshotSummary(`${tenant.id}_silver`, table).snapshot_id).not.toBe(day0);
    // An operator rolls silver back to DAY0's snapshot; X's snapshot stays the latest committed.
    await client.execute(compileCommandPlan(testCommand(`CALL lake.system.rollback_to_snapshot('${tenant.id}_silver.${table}', ${day0})`), { reveal: true }));
    // DAY0 again changes nothing: no commit, and the status pins what silver is now.
    const again = await runJob(join(dir, `${table}.conf`), join(dir, 'platform.conf'), ['--set', `source.snapshot-date=${DAY0}`]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.status.outputs[0]).toMatchObject({ committed: false, snapshotId: day0 });
    expect(icebergSnapshotSummary(`${tenant.id}_silver`, table).snapshot_id).toBe(day0);
  });
});
