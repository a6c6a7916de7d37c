import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { BRONZE_STAMPS } from '../../../src/jobs/layers/bronze.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, icebergSnapshotSummary, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * Silver's schema is fixed when it is created: a batch whose column changed type (bronze `amount`
 * string, silver decimal) stops the run with 65 SCHEMA_CHANGED naming column and both types, with or
 * without schema-evolution = add-columns, and silver is left as it was.
 */
const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;

const config = (evolution: string, columns = '') => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "payments_cdc" }
cdc    { primary-key = ["id"], sequence-by = ["ts"] }
${columns}
schema-evolution = ${evolution}
target { table = "payments", format = iceberg, catalog = "lake" }
`;

/** Bronze rows with the stamps every bronze row carries (the bronze layer's list). */
async function bronze(select: string, date: string) {
  const stamps: Record<(typeof BRONZE_STAMPS)[number], string> = {
    _lake_tenant: `'${tenant.id}'`,
    _lake_source: "'it'",
    _lake_ingested_at: 'current_timestamp()',
    _snapshot_date: `DATE'${date}'`,
  };
  const q = testQuery(`SELECT *, ${BRONZE_STAMPS.map((c) => `${stamps[c]} AS ${c}`).join(', ')} FROM (${select})`);
  await client.execute(
    compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/payments_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
}

async function run(file: string, date: string) {
  return runJob(join(dir, file), join(dir, 'platform.conf'), ['--set', `source.snapshot-date=${date}`]);
}

beforeAll(async () => {
  dir = tempFiles({
    'fail.conf': config('fail'),
    'evolve.conf': config('add-columns'),
    'typed.conf': config('add-columns', 'columns { types { amount = "decimal(12,2)" } }'),
    'platform.conf': `catalogs { lake { format = iceberg, default = true } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  client = connect();
  await bronze(`SELECT * FROM VALUES (1, 1, CAST(10.50 AS DECIMAL(12,2))), (2, 1, CAST(7.25 AS DECIMAL(12,2))) AS t(id, ts, amount)`, '2026-09-01');
  await bronze(`SELECT * FROM VALUES (1, 2, '11.00', 'x') AS t(id, ts, amount, note)`, '2026-09-02');
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('silver schema fixed at creation', () => {
  it('refuses a column whose type changed (65 SCHEMA_CHANGED), even with add-columns; silver is untouched', async () => {
    const created = await run('fail.conf', '2026-09-01');
    expect(created.code, created.stderr).toBe(0);
    const before = icebergSnapshotSummary(`${tenant.id}_silver`, 'payments');
    for (const file of ['fail.conf', 'evolve.conf']) {
      const r = await run(file, '2026-09-02');
      expect(r.code, r.stderr).toBe(65);
      expect(r.status.error).toMatchObject({
        code: 'SCHEMA_CHANGED',
        message: expect.stringContaining(`amount (lake.${tenant.id}_silver.payments has decimal(12,2), the batch string)`),
      });
    }
    expect(icebergSnapshotSummary(`${tenant.id}_silver`, 'payments').snapshot_id).toBe(before.snapshot_id);
    const rows = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'payments').map((r) => ({ id: r.id, amount: String(r.amount) }));
    expect(rows.sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
      { id: 1, amount: '10.50' },
      { id: 2, amount: '7.25' },
    ]);
  });

  it('columns.types declares the type: the batch is cast to it and merges', async () => {
    const r = await run('typed.conf', '2026-09-02');
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0].metrics).toEqual({ inserted: 0, updated: 1, deleted: 0, late: 0 });
    const rows = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'payments').map((r) => ({ id: r.id, amount: String(r.amount), note: r.note }));
    expect(rows.sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
      { id: 1, amount: '11.00', note: 'x' },
      { id: 2, amount: '7.25', note: null },
    ]);
  });
});
