import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, runJob, serverLog } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * Every run works in its tenant's scheduler pool on the shared server (docs/security-policy.md,
 * "Scheduler pools"): binding a session puts its work in the pool `tenant:<id>`, which the server
 * (spark.scheduler.mode = FAIR) creates FAIR inside. Two tenants' runs at the same time, each run's
 * jobs as the server's own listener saw them (the plugin's line per job in the server's log, from the
 * job's properties, which the scheduler places it by): every job of both runs' operations ran in its
 * own tenant's pool, the table formats' own jobs included: Iceberg's checkpointed batch, MERGEs and
 * metadata tables (cdc-silver-merge), Delta's create, write and log replay (gold-publish into Delta).
 * The maintenance procedures and streams are covered by the server's event log of every template's
 * run (bench/passes; bench/RESULTS.md).
 */
vi.setConfig({ testTimeout: 600_000, hookTimeout: 300_000 });

const iceberg = freshTenant();
const delta = freshTenant();
let client: SparkConnectClient;
let dir: string;

/** A day of CDC events in a tenant's bronze: inserts, an update, a delete. */
const bronze = (tenant: { id: string; root: string }) =>
  testQuery(`
SELECT id, name, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
       '${tenant.id}' AS _lake_tenant, 'it.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at,
       DATE'2026-07-05' AS _snapshot_date
FROM VALUES (1, 'one', '1.10', '2026-07-05 08:00:00', 'c'), (1, 'one*', '1.20', '2026-07-05 09:00:00', 'u'),
            (2, 'two', '2.00', '2026-07-05 08:00:00', 'c'), (3, 'three', '3.00', '2026-07-05 08:00:00', 'c'),
            (3, 'three', '3.00', '2026-07-05 10:00:00', 'd')
AS t(id, name, amount, ts, op)`).writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite', partitionBy: ['_snapshot_date'] });

beforeAll(async () => {
  client = connect();
  await client.execute(compileCommandPlan(bronze(iceberg), { reveal: true }));
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${iceberg.id} { storage-roots = ["${iceberg.root}"] }, ${delta.id} { storage-roots = ["${delta.root}"] } }`,
    'iceberg.conf': `job { template = "cdc-silver-merge", schema-version = 1, name = "it-pools-iceberg" }
tenant { id = "${iceberg.id}", storage-root = "${iceberg.root}" }
source { table = "orders_cdc" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }`,
    'delta.conf': `job { template = "gold-publish", schema-version = 1, name = "it-pools-delta" }
tenant { id = "${delta.id}", storage-root = "${delta.root}" }
transform { sql = """SELECT c.customer, count(*) AS orders, sum(o.amount) AS revenue
  FROM VALUES (1, 'a', 10.0), (2, 'b', 5.5), (3, 'a', 1.0) AS o(id, cust, amount) JOIN VALUES ('a', 'alice'), ('b', 'bob') AS c(cust, customer) ON o.cust = c.cust
  GROUP BY c.customer""" }
target { table = "sales", catalog = "spark_catalog", grain = ["customer"], mode = full-refresh }
expectations = [{ name = "positive", type = expression, expr = "revenue > 0", action = fail }]`,
  });
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

/** The plugin's line for every job of a bound session's operation: job, operation, tenant, pool. */
const JOB_LINE = /Scheduling: job (\d+) of operation ([0-9a-f-]{36}) \(tenant ([^)]+)\) in pool (\S+?)(,|$)/gm;

describe("each tenant's runs work in the tenant's own scheduler pool", () => {
  it('two tenants at once: every job of each run, the formats’ own included, in its own tenant’s pool', async () => {
    const platform = join(dir, 'platform.conf');
    const runs = await Promise.all([
      runJob(join(dir, 'iceberg.conf'), platform, ['--tenant', iceberg.id]),
      runJob(join(dir, 'delta.conf'), platform, ['--tenant', delta.id]),
    ]);
    const log = serverLog();
    const jobs = [...log.matchAll(JOB_LINE)].map((m) => ({ job: Number(m[1]), op: m[2]!, tenant: m[3]!, pool: m[4]! }));
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    expect(runs[0].status.outputs[0].metrics).toMatchObject({ inserted: 2, deleted: 0 });
    expect(runs[1].status.outputs[0]).toMatchObject({ format: 'delta', metrics: { written: 2 } });
    for (const [run, tenant] of [
      [runs[0], iceberg],
      [runs[1], delta],
    ] as const) {
      const ops = new Set<string>(run.status.spark.operationIds);
      const own = jobs.filter((j) => ops.has(j.op));
      // The run's jobs as the server tagged them: all in the tenant's pool (a day-one merge is some 20 jobs, a Delta publish 15).
      expect(own.length, `jobs of ${tenant.id}'s run`).toBeGreaterThanOrEqual(8);
      expect(new Set(own.map((j) => j.pool))).toEqual(new Set([`tenant:${tenant.id}`]));
      expect(new Set(own.map((j) => j.tenant))).toEqual(new Set([tenant.id]));
      // No job of the run's operations outside its pool (the plugin warns of each).
      const astray = log.split('\n').filter((l) => l.includes('not in its tenant') && [...ops].some((op) => l.includes(op)));
      expect(astray).toEqual([]);
      // The server created the pool FAIR inside when the tenant's first session was bound.
      expect(log).toContain(`created the scheduler pool tenant:${tenant.id} (FAIR inside`);
    }
  });
});
