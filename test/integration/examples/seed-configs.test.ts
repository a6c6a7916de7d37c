import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, runCli } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * The seed project's v1 configs, unchanged, on the embedded default (no --env): the platform
 * defaults and the local stack define the catalog they name (`hms`).
 */
const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;

// The seed's cdc config, with only the tenant's storage root pointing at this test's lake.
const SEED_CDC = `
job    { template = "cdc-silver-merge", schema-version = 1, name = "acme-orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "hms" }
`;

beforeAll(async () => {
  dir = tempFiles({ 'seed-cdc.conf': SEED_CDC });
  client = connect();
  const q = testQuery(`SELECT *, 'x' AS _lake_tenant, 'seed' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'2026-07-05' AS _snapshot_date
    FROM VALUES (1, 1, 'c', 'one'), (1, 2, 'u', 'one*'), (2, 1, 'c', 'two'), (3, 1, 'c', 'three'), (3, 2, 'd', 'three') AS t(id, ts, op, name)`);
  await client.execute(
    compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe("the seed's v1 configs on the embedded default", () => {
  it('cdc-silver-merge v1 with target.catalog = "hms" validates and runs without a platform config', async () => {
    const validate = await runCli(['validate', '--config', join(dir, 'seed-cdc.conf')]);
    expect(validate.code, validate.stderr).toBe(0);
    const statusFile = join(dir, 'status.json');
    // SPARK_REMOTE (the test's server) stands in for the embedded default's `local`.
    const r = await runCli(['--config', join(dir, 'seed-cdc.conf'), '--status-file', statusFile]);
    expect(r.code, r.stderr).toBe(0);
    const status = JSON.parse(readFileSync(statusFile, 'utf8'));
    expect(status.outputs[0]).toMatchObject({
      table: `hms.${tenant.id}_silver.orders`,
      format: 'iceberg',
      metrics: { inserted: 2, updated: 0, deleted: 0, late: 0 },
    });
  });
});
