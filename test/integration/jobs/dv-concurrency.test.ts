import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../../src/jobs/template.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg } from '../../support/stack.js';
import { type Outcome, pausePoint, runInProcess } from '../../support/in-process.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * Two dv-hub loads of the same batch into one hub, interleaved deterministically with the
 * executor's beforeStep hook: run X measures the hub (empty) and waits before its insert until run Y
 * reaches its own insert, then both MERGEs run at once. Whatever wins, the hub must hold each key
 * once: the loser either fails retryably (75) or inserts nothing, and a rerun inserts nothing.
 */
const tenant = freshTenant();
let dir: string;
let setupClient: SparkConnectClient;
const DAY = '2026-04-01';
const KEYS = Array.from({ length: 20 }, (_, i) => `c${i}`);

/** One load, in this process, on its own Spark session. */
function run(table: string, beforeStep?: (s: Step) => Promise<void>): Promise<Outcome> {
  return runInProcess(
    {
      configFile: join(dir, `${table}.conf`),
      envFile: join(dir, 'platform.conf'),
      overrides: [],
      env: {},
      runId: `it-dvconc-${table}-${Math.random().toString(36).slice(2, 8)}`,
      logicalDate: DAY,
    },
    beforeStep,
  );
}

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  setupClient = connect();
  const q = testQuery(
    `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${DAY}' AS _snapshot_date FROM VALUES ${KEYS.map((k) => `('${k}')`).join(', ')} AS t(customer)`,
  );
  await setupClient.execute(
    compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/customers`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
});
afterAll(async () => {
  await setupClient?.releaseSession().catch(() => undefined);
  setupClient?.close();
});

describe.each([
  ['iceberg', 'lake'],
  ['delta', 'spark_catalog'],
] as const)('two loads of one hub batch on %s', (format, catalog) => {
  it('interleaved at the insert: each key once, the loser 75 or nothing inserted, a rerun inserts nothing', async () => {
    const table = `hub_${format}`;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(
      join(dir, `${table}.conf`),
      `job { template = "dv-hub", schema-version = 1, name = "it-dvconc" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
sources = [ { table = "customers", snapshot-date = "${DAY}", record-source = "crm.customers", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
target { table = "${table}", catalog = "${catalog}", format = ${format} }`,
    );
    const read = () => (format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`));

    const pause = pausePoint();
    const release = pause.release;
    // X creates the hub and measures it empty, then waits before its insert; Y then finds the hub and measures it empty too.
    const x = run(table, pause.hold('insert'));
    await Promise.race([pause.reached, x]);
    // Y runs until its own insert, then X is released: the two MERGEs run at the same time.
    const y = run(table, async (s) => {
      if (s.id === 'insert') release();
    });
    // Never a deadlock: should Y end without reaching its insert, X goes on (and the checks below fail).
    const [xo, yo] = await Promise.all([x, y.finally(release)]);
    release();
    expect(xo.steps).toContain('insert');
    expect(yo.steps).toContain('insert');
    const codes = [xo.code, yo.code];
    for (const c of codes) expect([0, 75], `exit codes ${codes.join(', ')}`).toContain(c);
    expect(codes).toContain(0);

    const rows = read();
    const keys = rows.map((r) => String(r.customer)).sort();
    expect(keys).toEqual([...KEYS].sort());
    expect(new Set(rows.map((r) => r.hk_customer)).size).toBe(KEYS.length);

    // The orchestrator's retry of the loser, and any later rerun: nothing new.
    expect((await run(table)).code).toBe(0);
    expect(read()).toHaveLength(KEYS.length);
  });
});
