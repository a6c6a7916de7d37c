import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, icebergSnapshotSummary, readIcebergWithPyIceberg, remote, runCli } from '../../support/stack.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * The example job end to end through the real CLI on the real local Spark Connect server: bronze
 * CDC parquet → MERGE into an Iceberg silver table, run twice, read back with PyIceberg.
 */

const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;

const BRONZE = `
SELECT id, name, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
       '${tenant.id}' AS _lake_tenant, 'it.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at,
       CAST(d AS DATE) AS _snapshot_date
FROM VALUES
  (1, 'one',   '1.10', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (1, 'one*',  '1.20', '2026-07-05 09:00:00', 'u', '2026-07-05'),
  (2, 'two',   '2.00', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (3, 'three', '3.00', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (3, 'three', '3.00', '2026-07-05 10:00:00', 'd', '2026-07-05'),
  (4, 'fünf',  '4.00', '2026-07-05 08:00:00', NULL, '2026-07-05'),
  (2, 'two*',  '2.50', '2026-07-06 08:00:00', 'u', '2026-07-06'),
  (1, 'one',   '1.00', '2026-07-05 07:00:00', 'd', '2026-07-06'),
  (4, 'four',  '4.00', '2026-07-04 08:00:00', 'u', '2026-07-06')
AS t(id, name, amount, ts, op, d)`;

function jobConfig(): string {
  return `
job    { template = "cdc-silver-merge", schema-version = 1, name = "it-orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }
`;
}

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
`;

async function run(day: string, config = 'job.conf') {
  const statusFile = join(dir, `status-${day}-${Date.now()}.json`);
  const result = await runCli([
    '--job',
    'cdc-silver-merge',
    '--config',
    join(dir, config),
    '--env',
    join(dir, 'platform.conf'),
    '--remote',
    remote(),
    '--set',
    `source.where="_snapshot_date = '${day}'"`,
    '--run-id',
    `it__${day}`,
    '--logical-date',
    day,
    '--status-file',
    statusFile,
  ]);
  const status = JSON.parse(readFileSync(statusFile, 'utf8'));
  expect(JSON.parse(result.stdout)).toEqual(status);
  return { ...result, status };
}

/** Append CDC rows `(id, name, amount, ts, op, snapshot_date)` to bronze. */
async function appendBronze(values: string) {
  const q = testQuery(`SELECT id, name, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
    'x' AS _lake_tenant, 'it.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at, CAST(d AS DATE) AS _snapshot_date
    FROM VALUES ${values} AS t(id, name, amount, ts, op, d)`);
  await client.execute(
    compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
}

function silver() {
  return readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders')
    .map((r) => ({ id: r.id, name: r.name, amount: String(r.amount) }))
    .sort((a, b) => Number(a.id) - Number(b.id));
}

beforeAll(async () => {
  dir = tempFiles({ 'job.conf': jobConfig(), 'platform.conf': platform() });
  client = connect();
  const write = testQuery(BRONZE).writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite', partitionBy: ['_snapshot_date'] });
  await client.execute(compileCommandPlan(write, { reveal: true }));
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('cdc-silver-merge v1 on the real stack', () => {
  it('creates namespace and table on the first run and merges the latest event per key', async () => {
    const { code, status, stderr } = await run('2026-07-05');
    expect(code, stderr).toBe(0);
    expect(status).toMatchObject({
      status: 'succeeded',
      exitCode: 0,
      job: { template: 'cdc-silver-merge', schemaVersion: 1, name: 'it-orders' },
      tenant: tenant.id,
      runId: 'it__2026-07-05',
      spark: { serverVersion: expect.stringMatching(/^4\.1\./) },
      metrics: { rowsRead: 6, rowsWritten: 3 },
    });
    expect(status.outputs).toEqual([
      expect.objectContaining({
        table: `lake.${tenant.id}_silver.orders`,
        format: 'iceberg',
        location: `${tenant.root}/silver/orders`,
        snapshotId: expect.stringMatching(/^-?\d+$/),
        metrics: { inserted: 3, updated: 0, deleted: 0, late: 0 },
      }),
    ]);
    expect(status.spark.operationIds.length).toBeGreaterThan(3);
    // The Iceberg snapshot leads back to the orchestrator's run.
    expect(icebergSnapshotSummary(`${tenant.id}_silver`, 'orders')).toMatchObject({
      snapshot_id: status.outputs[0].snapshotId,
      'lakehouse-jobs.run-id': 'it__2026-07-05',
      // The attempt's nonce: tells this attempt's commits from a retry's (the second look's window).
      'lakehouse-jobs.attempt': expect.stringMatching(/^[0-9a-f-]{36}$/),
      'lakehouse-jobs.logical-date': '2026-07-05',
      'lakehouse-jobs.job': 'cdc-silver-merge/v1/it-orders',
    });
    // Read back by a second engine: latest per key, 3 deleted, a NULL op is an upsert.
    expect(silver()).toEqual([
      { id: 1, name: 'one*', amount: '1.20' },
      { id: 2, name: 'two', amount: '2.00' },
      { id: 4, name: 'fünf', amount: '4.00' },
    ]);
  });

  it('keeps bronze metadata and the op column out of silver, and writes under the tenant root', async () => {
    const rows = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders');
    expect(Object.keys(rows[0]!).sort()).toEqual(['amount', 'id', 'name', 'ts']);
  });

  it('changes nothing when the same batch runs again', async () => {
    const before = silver();
    const snapshots = () => [
      icebergSnapshotSummary(`${tenant.id}_silver`, 'orders').snapshot_id,
      icebergSnapshotSummary(`${tenant.id}_silver`, 'orders__cdc_tombstones').snapshot_id,
    ];
    const snapshotsBefore = snapshots();
    const { code, status, stderr } = await run('2026-07-05');
    expect(code).toBe(0);
    // Nobody else committed and no row is older than its tombstone: no second look, and the log says so.
    expect(stderr).toContain('find-resurrected not needed');
    // 1, 2 and 4 are not newer than their rows; 3's delete is not newer than its tombstone.
    expect(status.outputs[0].metrics).toEqual({ inserted: 0, updated: 0, deleted: 0, late: 4 });
    expect(silver()).toEqual(before);
    // Nothing to change, nothing committed: no new snapshot of silver or of its tombstones.
    expect(status.outputs[0]).toMatchObject({ committed: false, snapshotId: snapshotsBefore[0] });
    expect(snapshots()).toEqual(snapshotsBefore);
    // The batch silver's current commit applied, onto unchanged tables: known from metadata alone
    // (bronze's files listed, the commits' stamps read), nothing else sent.
    expect(status.completedSteps).toEqual(['probe-files-only', 'batch-fingerprint']);
    expect(status.metrics.rowsRead).toBe(0);
  });

  it('reads and measures the batch again once another commit changed a table the merge decided on', async () => {
    // A tombstone of a key this batch does not hold: the fingerprint cannot tell, so the run reads the batch.
    const tombstones = `lake.${tenant.id}_silver.orders__cdc_tombstones`;
    await client.execute(
      compileCommandPlan(testCommand(`INSERT INTO ${tombstones} VALUES (99, TIMESTAMP'2026-07-01 00:00:00', current_timestamp(), 'it')`), { reveal: true }),
    );
    const { code, status } = await run('2026-07-05');
    expect(code).toBe(0);
    expect(status.completedSteps).toEqual(expect.arrayContaining(['batch-fingerprint', 'check-batch', 'measure']));
    // What the fingerprint reported without reading is what reading reports.
    expect(status.outputs[0]).toMatchObject({ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0, late: 4 } });
    expect(status.metrics.rowsRead).toBe(6);
    await client.execute(compileCommandPlan(testCommand(`DELETE FROM ${tombstones} WHERE id = 99`), { reveal: true }));
  });

  it('applies the next batch: updates, deletes, and ignores an event older than the row', async () => {
    const { code, status } = await run('2026-07-06');
    expect(code).toBe(0);
    expect(status.outputs[0].metrics).toEqual({ inserted: 0, updated: 1, deleted: 0, late: 2 });
    expect(silver()).toEqual([
      { id: 1, name: 'one*', amount: '1.20' }, // its delete (07:00) is older than the row (09:00)
      { id: 2, name: 'two*', amount: '2.50' },
      { id: 4, name: 'fünf', amount: '4.00' }, // its update (07-04) is older than the row
    ]);
  });

  it('never resurrects a deleted key with a late insert, but a newer insert brings it back', async () => {
    await appendBronze(
      `(3, 'three-late', '3.30', '2026-07-05 09:30:00', 'c', '2026-07-09'), (3, 'three-new', '3.40', '2026-07-05 11:00:00', 'c', '2026-07-10')`,
    );
    const late = await run('2026-07-09');
    expect(late.code).toBe(0);
    expect(late.status.outputs[0].metrics).toEqual({ inserted: 0, updated: 0, deleted: 0, late: 1 });
    expect(silver().map((r) => r.id)).toEqual([1, 2, 4]);
    const newer = await run('2026-07-10');
    expect(newer.status.outputs[0].metrics).toEqual({ inserted: 1, updated: 0, deleted: 0, late: 0 });
    expect(silver()).toContainEqual({ id: 3, name: 'three-new', amount: '3.40' });
  });

  it('treats equal sequences with identical payloads as one event, and rejects different payloads (65) naming the key', async () => {
    await appendBronze(`(7, 'seven', '7.00', '2026-07-11 08:00:00', 'c', '2026-07-11'), (7, 'seven', '7.00', '2026-07-11 08:00:00', 'c', '2026-07-11')`);
    const same = await run('2026-07-11');
    expect(same.code).toBe(0);
    expect(same.status.outputs[0].metrics).toMatchObject({ inserted: 1 });
    await appendBronze(`(8, 'eight', '8.00', '2026-07-12 08:00:00', 'c', '2026-07-12'), (8, 'EIGHT', '8.00', '2026-07-12 08:00:00', 'c', '2026-07-12')`);
    const before = silver();
    const differ = await run('2026-07-12');
    expect(differ.code).toBe(65);
    expect(differ.status.error).toMatchObject({ code: 'CDC_AMBIGUOUS_SEQUENCE', message: expect.stringContaining('"id":8') });
    expect(silver()).toEqual(before);
  });

  it('rejects different payloads at a sequence below the latest one too (65), and accepts identical ones there', async () => {
    // The tie check compares hashes of the payload's JSON, at every sequence of the key, not only
    // at its latest: a batch that disagrees with itself anywhere is refused.
    await appendBronze(
      `(9, 'nine', '9.00', '2026-07-13 08:00:00', 'c', '2026-07-13'), (9, 'NINE', '9.00', '2026-07-13 08:00:00', 'c', '2026-07-13'), (9, 'nine+', '9.10', '2026-07-13 09:00:00', 'u', '2026-07-13')`,
    );
    const before = silver();
    const differ = await run('2026-07-13');
    expect(differ.code).toBe(65);
    expect(differ.status.error).toMatchObject({ code: 'CDC_AMBIGUOUS_SEQUENCE', message: expect.stringMatching(/"id":9,"ts":"2026-07-13T08:00:00/) });
    expect(silver()).toEqual(before);
    await appendBronze(
      `(10, 'ten', '10.00', '2026-07-14 08:00:00', 'c', '2026-07-14'), (10, 'ten', '10.00', '2026-07-14 08:00:00', 'c', '2026-07-14'), (10, 'ten+', '10.10', '2026-07-14 09:00:00', 'u', '2026-07-14')`,
    );
    const same = await run('2026-07-14');
    expect(same.code).toBe(0);
    expect(same.status.outputs[0].metrics).toEqual({ inserted: 1, updated: 0, deleted: 0, late: 0 });
    expect(silver()).toContainEqual({ id: 10, name: 'ten+', amount: '10.10' });
  });

  it('finds a tie among three events at one sequence whatever their order, and a NULL against a value', async () => {
    // Two identical events and a different one at one sequence: one key with a tie, however many
    // events it has there. A NULL column and a value differ too (the JSON omits the NULL).
    await appendBronze(
      `(11, 'eleven', '11.00', '2026-07-15 08:00:00', 'c', '2026-07-15'), (11, 'ELEVEN', '11.00', '2026-07-15 08:00:00', 'c', '2026-07-15'), (11, 'eleven', '11.00', '2026-07-15 08:00:00', 'c', '2026-07-15'), (12, 'twelve', NULL, '2026-07-15 08:00:00', 'c', '2026-07-15'), (12, 'twelve', '12.00', '2026-07-15 08:00:00', 'c', '2026-07-15')`,
    );
    const before = silver();
    const differ = await run('2026-07-15');
    expect(differ.code).toBe(65);
    expect(differ.status.error).toMatchObject({
      code: 'CDC_AMBIGUOUS_SEQUENCE',
      message: expect.stringMatching(/^2 key\(s\) have different CDC events at the same sequence/),
    });
    expect(silver()).toEqual(before);
    await appendBronze(
      `(13, 'thirteen', NULL, '2026-07-16 08:00:00', 'c', '2026-07-16'), (13, 'thirteen', NULL, '2026-07-16 08:00:00', 'c', '2026-07-16'), (13, 'thirteen', NULL, '2026-07-16 08:00:00', 'c', '2026-07-16')`,
    );
    const same = await run('2026-07-16');
    expect(same.code).toBe(0);
    expect(same.status.outputs[0].metrics).toEqual({ inserted: 1, updated: 0, deleted: 0, late: 0 });
    expect(silver()).toContainEqual({ id: 13, name: 'thirteen', amount: 'null' });
  });

  it('tells events apart whose values differ only in which column is NULL, and compares map columns', async () => {
    // Spark's hashes skip NULL fields: (NULL, 'x') and ('x', NULL) in two neighbouring columns of
    // one type hash alike, so the tie check compares such neighbours' JSON. A map column is hashed
    // (spark.sql.legacy.allowHashOnMapType) and compared like any other, and values as they are: a
    // timestamp's microseconds too.
    const bronze = `${tenant.root}/bronze/tagged_cdc`;
    const write = (values: string) =>
      client.execute(
        compileCommandPlan(
          testQuery(`SELECT id, a, b, map('k', v) AS tags, timestamp_micros(unix_micros(CAST(ts AS TIMESTAMP)) + us) AS seen, CAST(ts AS TIMESTAMP) AS ts, op, CAST(d AS DATE) AS _snapshot_date
            FROM VALUES ${values} AS t(id, a, b, v, ts, op, d, us)`).writeFiles(bronze, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }),
          { reveal: true },
        ),
      );
    writeFileSync(
      join(dir, 'tagged.conf'),
      jobConfig().replace('table = "orders_cdc"', 'table = "tagged_cdc"').replace('table = "orders",', 'table = "tagged",'),
    );
    const runTagged = (day: string) => run(day, 'tagged.conf');
    // Identical events with a map, at one sequence: one event. Key 2: the latest of two sequences.
    await write(`(1, 'x', CAST(NULL AS STRING), 'blue', '2026-08-01 08:00:00', 'c', '2026-08-01', 0), (1, 'x', NULL, 'blue', '2026-08-01 08:00:00', 'c', '2026-08-01', 0),
      (2, 'y', 'z', 'red', '2026-08-01 08:00:00', 'c', '2026-08-01', 0), (2, 'y', 'z', 'green', '2026-08-01 09:00:00', 'u', '2026-08-01', 0)`);
    const same = await runTagged('2026-08-01');
    expect(same.code, same.stderr).toBe(0);
    expect(same.status.outputs[0].metrics).toEqual({ inserted: 2, updated: 0, deleted: 0, late: 0 });
    const read = () => readIcebergWithPyIceberg(`${tenant.id}_silver`, 'tagged').sort((l, r) => Number(l.id) - Number(r.id));
    expect(read().map((r) => [r.id, r.a, r.b, JSON.stringify(r.tags)])).toEqual([
      [1, 'x', null, JSON.stringify([['k', 'blue']])],
      [2, 'y', 'z', JSON.stringify([['k', 'green']])],
    ]);
    // The NULL moved to the other column: a different event at the same sequence.
    await write(
      `(3, CAST(NULL AS STRING), 'x', 'blue', '2026-08-02 08:00:00', 'c', '2026-08-02', 0), (3, 'x', NULL, 'blue', '2026-08-02 08:00:00', 'c', '2026-08-02', 0)`,
    );
    const swapped = await runTagged('2026-08-02');
    expect(swapped.code, swapped.stderr).toBe(65);
    expect(swapped.status.error).toMatchObject({ code: 'CDC_AMBIGUOUS_SEQUENCE', message: expect.stringContaining('"id":3') });
    // Only the map's value differs: a different event too.
    await write(`(4, 'x', 'y', 'blue', '2026-08-03 08:00:00', 'c', '2026-08-03', 0), (4, 'x', 'y', 'red', '2026-08-03 08:00:00', 'c', '2026-08-03', 0)`);
    const mapped = await runTagged('2026-08-03');
    expect(mapped.code, mapped.stderr).toBe(65);
    expect(mapped.status.error).toMatchObject({ code: 'CDC_AMBIGUOUS_SEQUENCE', message: expect.stringContaining('"id":4') });
    // Only a timestamp's microseconds differ (their JSON, at milliseconds, is the same): different events.
    await write(`(5, 'x', 'y', 'blue', '2026-08-04 08:00:00', 'c', '2026-08-04', 1), (5, 'x', 'y', 'blue', '2026-08-04 08:00:00', 'c', '2026-08-04', 2)`);
    const micros = await runTagged('2026-08-04');
    expect(micros.code, micros.stderr).toBe(65);
    expect(micros.status.error).toMatchObject({ code: 'CDC_AMBIGUOUS_SEQUENCE', message: expect.stringContaining('"id":5') });
    expect(read()).toHaveLength(2);
  });

  it('exits 99 (skipped) when the batch is empty', async () => {
    const { code, status } = await run('2026-07-07');
    expect(code).toBe(99);
    expect(status).toMatchObject({ status: 'skipped', exitCode: 99, skipReason: expect.stringContaining('no CDC events') });
  });

  it('rejects a batch with a NULL key (65), writing nothing', async () => {
    const write = testQuery(
      `SELECT CAST(NULL AS INT) AS id, 'x' AS name, CAST(1 AS DECIMAL(12,2)) AS amount, TIMESTAMP'2026-07-08 00:00:00' AS ts, 'c' AS op, DATE'2026-07-08' AS _snapshot_date`,
    ).writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] });
    await client.execute(compileCommandPlan(write, { reveal: true }));
    const before = silver();
    const { code, status } = await run('2026-07-08');
    expect(code).toBe(65);
    expect(status.error).toMatchObject({ code: 'CDC_NULL_KEY', category: 'data', retryable: false });
    expect(silver()).toEqual(before);
  });

  it('validate on a broken config prints every error with its path and exits 78', async () => {
    writeFileSync(
      join(dir, 'broken.conf'),
      jobConfig().replace('primary-key = ["id"]', 'primary-kee = ["id"]').replace('table = "orders",', 'table = "Orders",'),
    );
    const result = await runCli(['validate', '--config', join(dir, 'broken.conf')]);
    expect(result.code).toBe(78);
    // A misspelled required key is one problem, reported once at the misspelling with its fix.
    expect(result.stderr).toContain('cdc.primary-kee: unknown key; did you mean "primary-key"?');
    expect(result.stderr).not.toContain('cdc.primary-key: is required');
    expect(result.stderr).toContain('target.table: must match');
    expect(JSON.parse(result.stdout).error.issues).toHaveLength(2);
  });
});
