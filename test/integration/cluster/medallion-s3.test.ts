import { execFileSync } from 'node:child_process';
import { testCommand } from '../../support/sql.js';
import { readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { QUICKSTART_ORDERS, writeOrderEvents } from '../../support/shop-source.js';
import {
  freshTenant,
  objectsUnder,
  queryWithDuckDb,
  deltaLogWithDeltaRs,
  readDeltaWithDeltaRs,
  readIcebergWithPyIceberg,
  repoRoot,
  runJob,
  useClusterRemote,
} from '../../support/stack.js';
import { writeFileAt } from '../../support/storage.js';
import { needs } from '../../support/needs.js';

needs('spark-install', 'iceberg-rest', 'object-store', 'py-tools');

/**
 * The medallion chain in the seeds' shape: every table on the object store (S3A on
 * scripts/object-store, `s3a://lake/<tenant>`), Spark Connect on the standalone cluster
 * (scripts/spark-connect --cluster: a master, two workers, executors in JVMs of their own, the jars
 * and the project's plugins shipped to them). jdbc → cdc → scd2 → vault → gold → maintenance →
 * zero-copy for the quickstart's two days; every result is read back over S3 by PyIceberg, delta-rs
 * or DuckDB, never by our client. The platform names the tenant's root `s3://…`, the job configs
 * `s3a://…`: one root. The cluster runs the History Server (--history): a run's jobs and SQL
 * executions are read back from its REST API.
 */

const tenant = freshTenant('s3');
const ns = (layer: string) => `${tenant.id}_${layer}`;
const DAYS = ['2026-07-05', '2026-07-06'] as const;
let remote = '';
let dir = '';
/** The run id of the second test's gold-publish run, whose jobs the History Server must show. */
const GOLD_RUN = `it-gold-${Date.now()}`;
useClusterRemote((r) => (remote = r));

const header = (template: string, version = 1) =>
  `job { template = "${template}", schema-version = ${version} }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;

const configs = (db: string): Record<string, string> => ({
  'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta }, rest { format = iceberg } }
jdbc { inline-urls = allow }
tenants { ${tenant.id} { storage-roots = ["${tenant.root.replace(/^s3a:/, 's3:')}"] } }
maintenance { retention-floor-hours = 0 }`,
  'ingest.conf': `${header('jdbc-snapshot-ingest')}source { table = "orders_cdc", url = "jdbc:sqlite:${db}", driver = "org.sqlite.JDBC" }
target { table = "orders_cdc", snapshot-date = "${DAYS[0]}" }`,
  // Delta bronze on S3, written by runs at once through the one Connect server.
  'delta-bronze.conf': `${header('jdbc-snapshot-ingest', 2)}source { table = "orders_cdc", url = "jdbc:sqlite:${db}", driver = "org.sqlite.JDBC" }
target { table = "orders_delta", snapshot-date = "2026-07-01", format = delta, catalog = "spark_catalog" }`,
  'merge.conf': `${header('cdc-silver-merge')}source { table = "orders_cdc", where = "_snapshot_date = '${DAYS[0]}'" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }`,
  // Every bronze date at once into the REST catalog, whose server writes the table's metadata to S3 itself.
  'merge-rest.conf': `${header('cdc-silver-merge', 2)}source { table = "orders_cdc" }
cdc { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"] }
target { table = "orders_rest", format = iceberg, catalog = "rest" }`,
  'scd2.conf': `${header('scd2-dim-load')}source { table = "orders", catalog = "lake" }
dimension { natural-key = ["id"], tracked-columns = ["status"], exclude-columns = ["ts"], effective-at = "2026-07-06T00:00:00Z" }
target { table = "dim_order_status", catalog = "lake" }`,
  'hub.conf': `${header('dv-hub')}sources = [ { table = "orders_cdc", record-source = "shop.orders", business-key = ["id"] } ]
hub { hash-key = "hk_order", business-key = ["order_id"] }
ghost-record = true
target { table = "hub_order", catalog = "lake", format = iceberg }`,
  'sat.conf': `${header('dv-satellite')}source { table = "orders_cdc", where = "op <> 'd'", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["customer", "status", "amount"], order-by = ["ts"] }
ghost-record = true
target { table = "sat_order", catalog = "lake", format = iceberg }`,
  'gold.conf': `${header('gold-publish')}transform {
  catalogs { silver = "lake" }
  sql = """
    SELECT CAST(h.order_id AS BIGINT) AS order_id, s.customer, s.status, CAST(s.amount AS DECIMAL(12,2)) AS amount
    FROM silver.hub_order h
    JOIN (SELECT hk_order, customer, status, amount,
                 row_number() OVER (PARTITION BY hk_order ORDER BY load_date DESC, load_seq DESC) AS rn
          FROM silver.sat_order WHERE record_source <> 'SYSTEM') s
      ON s.hk_order = h.hk_order AND s.rn = 1
  """
}
target { table = "orders_current", catalog = "spark_catalog", format = delta, grain = ["order_id"], mode = full-refresh }
expectations = [ { name = "customer_present", type = not-null, columns = ["customer"], action = fail } ]`,
  'maintenance.conf': `${header('table-maintenance')}tables = [
  { layer = silver, table = "orders", catalog = "lake",
    compact { strategy = binpack, min-input-files = 2 }, rewrite-manifests = true,
    expire-snapshots { older-than-hours = 0, retain-last = 1 }, remove-orphan-files { older-than-hours = 24 } }
  { layer = gold, table = "orders_current", catalog = "spark_catalog", format = delta,
    compact { strategy = zorder, zorder-by = ["order_id"] }, vacuum { retain-hours = 0 } }
]`,
  'zero-copy.conf': `${header('iceberg-zero-copy-append')}source { table = "orders_2025", layer = silver }
target { table = "orders_history", layer = silver, catalog = "lake" }`,
  'expire-history.conf': `${header('table-maintenance')}tables = [ { layer = silver, table = "orders_history", catalog = "lake", expire-snapshots { older-than-hours = 0, retain-last = 1 } } ]`,
});

async function ok(file: string, args: string[] = []): Promise<any> {
  const r = await runJob(join(dir, file), join(dir, 'platform.conf'), args, remote);
  expect(r.code, `${file} ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return r.status;
}

const byId = (rows: Record<string, unknown>[]) => rows.map((r) => ({ id: Number(r.id), status: r.status })).sort((a, b) => a.id - b.id);
const EXPECTED = [
  { id: 1, status: 'PAID' },
  { id: 2, status: 'SHIPPED' },
  { id: 5, status: 'NEW' },
];
const parquetUnder = (uri: string) => objectsUnder(uri).filter((o) => o.path.endsWith('.parquet'));

/** GET a History Server REST path (under /api/v1), as JSON. */
async function api(base: string, path: string): Promise<unknown> {
  const r = await fetch(`${base}/api/v1${path}`);
  if (!r.ok) throw new Error(`${base}/api/v1${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** The first value `probe` gives within `ms`, asked every second. */
async function until<T>(ms: number, probe: () => Promise<T | undefined | 0 | false>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`not there after ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

beforeAll(() => {
  dir = tempFiles({});
  for (const [name, text] of Object.entries(configs(join(dir, 'sources/shop.db')))) writeFileSync(join(dir, name), text);
});

describe('the medallion chain on S3 through the standalone cluster', () => {
  it('jdbc-snapshot-ingest → cdc-silver-merge for two days, then dv-hub and dv-satellite: bronze parquet read by DuckDB, silver and vault by PyIceberg', async () => {
    for (const day of DAYS) {
      writeOrderEvents(dir, QUICKSTART_ORDERS[day]);
      const ingest = await ok('ingest.conf', ['--set', `target.snapshot-date=${day}`]);
      expect(ingest.outputs[0]).toMatchObject({ path: `${tenant.root}/bronze/orders_cdc`, format: 'parquet' });
      const merge = await ok('merge.conf', ['--set', `source.where="_snapshot_date = '${day}'"`]);
      expect(merge.outputs[0]).toMatchObject({ table: `lake.${ns('silver')}.orders`, location: `${tenant.root}/silver/orders` });
    }
    // The raw vault of both days at once: the satellite keeps each change in order of ts.
    await ok('hub.conf', ['--logical-date', DAYS[1]]);
    await ok('sat.conf', ['--logical-date', DAYS[1]]);
    const bronze = queryWithDuckDb(
      `SELECT _snapshot_date::VARCHAR AS day, count(*) AS n FROM read_parquet('s3://lake/${tenant.id}/bronze/orders_cdc/**/*.parquet', hive_partitioning = true) GROUP BY 1 ORDER BY 1`,
    );
    expect(bronze).toEqual([
      { day: DAYS[0], n: QUICKSTART_ORDERS[DAYS[0]].length },
      { day: DAYS[1], n: QUICKSTART_ORDERS[DAYS[1]].length },
    ]);
    expect(byId(readIcebergWithPyIceberg(ns('silver'), 'orders'))).toEqual(EXPECTED);
    expect(
      readIcebergWithPyIceberg(ns('silver'), 'hub_order')
        .map((r) => r.order_id)
        .sort(),
    ).toEqual(['1', '2', '3', '4', '5', null].sort());
    // Every table's files are objects under the tenant's prefix of the bucket.
    expect(parquetUnder(`${tenant.root}/silver/orders`).length).toBeGreaterThan(0);
  }, 1_800_000);

  it('scd2-dim-load, gold-publish and a silver table of the REST catalog: read by PyIceberg (JDBC and REST), delta-rs and DuckDB', async () => {
    expect((await ok('merge-rest.conf')).outputs[0]).toMatchObject({
      table: `rest.${ns('silver')}.orders_rest`,
      location: `${tenant.root}/silver/orders_rest`,
    });
    expect(byId(readIcebergWithPyIceberg(ns('silver'), 'orders_rest', 'rest'))).toEqual(EXPECTED);
    expect(objectsUnder(`${tenant.root}/silver/orders_rest/metadata`).some((o) => o.path.endsWith('.metadata.json'))).toBe(true);
    expect((await ok('scd2.conf')).outputs[0]).toMatchObject({ table: `lake.${ns('gold')}.dim_order_status`, format: 'iceberg' });
    expect(byId(readIcebergWithPyIceberg(ns('gold'), 'dim_order_status').filter((r) => r._scd_current === true))).toEqual(EXPECTED);
    expect((await ok('gold.conf', ['--logical-date', DAYS[1], '--run-id', GOLD_RUN])).outputs[0]).toMatchObject({
      table: `spark_catalog.${ns('gold')}.orders_current`,
      format: 'delta',
    });
    const gold = readDeltaWithDeltaRs(`${tenant.root}/gold/orders_current`)
      .map((r) => `${Number(r.order_id)} ${r.status}`)
      .sort();
    expect(gold).toEqual(['1 PAID', '2 SHIPPED', '3 NEW', '4 NEW', '5 NEW']);
    expect(queryWithDuckDb(`SELECT count(*) AS n FROM delta_scan('s3://lake/${tenant.id}/gold/orders_current')`)).toEqual([{ n: 5 }]);
  }, 900_000);

  it('table-maintenance compacts, expires and VACUUMs on S3: rows identical, fewer objects, a young orphan object kept', async () => {
    const silverBefore = byId(readIcebergWithPyIceberg(ns('silver'), 'orders'));
    const goldObjects = parquetUnder(`${tenant.root}/gold/orders_current`).length;
    // An object the table does not reference, younger than the orphan retention (an object's time
    // cannot be set back): a job's uncommitted file looks like this, and it must survive.
    const orphan = `${tenant.root}/silver/orders/data/uncommitted-${Date.now()}.parquet`;
    writeFileAt(orphan, 'not referenced by any snapshot');
    const r = await ok('maintenance.conf');
    expect(r.outputs.map((o: any) => o.table).sort()).toEqual([`lake.${ns('silver')}.orders`, `spark_catalog.${ns('gold')}.orders_current`]);
    expect(byId(readIcebergWithPyIceberg(ns('silver'), 'orders'))).toEqual(silverBefore);
    expect(readDeltaWithDeltaRs(`${tenant.root}/gold/orders_current`)).toHaveLength(5);
    // OPTIMIZE rewrote the gold table into one file and VACUUM (retain 0) deleted the old objects.
    expect(parquetUnder(`${tenant.root}/gold/orders_current`).length).toBeLessThan(goldObjects);
    expect(objectsUnder(`${tenant.root}/silver/orders/data`).map((o) => o.path)).toContain(orphan.slice(`${tenant.root}/silver/orders/data`.length));
  }, 900_000);

  it('iceberg-zero-copy-append adopts a table’s objects by reference; expiring the adopter is refused (78) and the shared objects stay', async () => {
    const spec = parseConnectionString(remote);
    if (spec.kind !== 'remote') throw new Error(remote);
    const client = SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-tests' });
    const sql = (q: string) => client.execute(compileCommandPlan(testCommand(q), { reveal: true }));
    try {
      await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${ns('silver')}`);
      for (const t of ['orders_2025', 'orders_history'])
        await sql(
          `CREATE TABLE lake.${ns('silver')}.${t} (id BIGINT, status STRING) USING iceberg LOCATION '${tenant.root}/silver/${t}' TBLPROPERTIES ('format-version' = '2')`,
        );
      await sql(`INSERT INTO lake.${ns('silver')}.orders_2025 VALUES (1, 'PAID'), (2, 'SHIPPED')`);
      await sql(`INSERT INTO lake.${ns('silver')}.orders_2025 VALUES (3, 'NEW')`);
    } finally {
      await client.releaseSession().catch(() => undefined);
      client.close();
    }
    const shared = parquetUnder(`${tenant.root}/silver/orders_2025`);
    const first = await ok('zero-copy.conf');
    expect(first.outputs[0]).toMatchObject({ table: `lake.${ns('silver')}.orders_history`, committed: true });
    expect(byId(readIcebergWithPyIceberg(ns('silver'), 'orders_history'))).toEqual(byId(readIcebergWithPyIceberg(ns('silver'), 'orders_2025')));
    // Nothing copied: the history table has no data objects of its own.
    expect(parquetUnder(`${tenant.root}/silver/orders_history`)).toEqual([]);
    const rerun = await ok('zero-copy.conf');
    expect(rerun.outputs[0]).toMatchObject({ committed: false });
    const refused = await runJob(join(dir, 'expire-history.conf'), join(dir, 'platform.conf'), [], remote);
    expect(refused.code, refused.stderr).toBe(78);
    expect(refused.status.error.message).toContain('outside its location');
    expect(parquetUnder(`${tenant.root}/silver/orders_2025`)).toEqual(shared);
  }, 900_000);
  it('Delta on S3 through one Connect server: runs at once commit one after the other or exit 75, never losing a commit (delta-rs reads the log)', async () => {
    // Delta's S3 log store makes a commit safe against the other commits of its own JVM (docs/object-storage.md):
    // three runs at once, two of them replacing the same date, through the one server.
    const rows = QUICKSTART_ORDERS[DAYS[1]].length; // the source holds the second day's events since the first test
    const path = `${tenant.root}/bronze/orders_delta`;
    await ok('delta-bronze.conf');
    const before = deltaLogWithDeltaRs(path).commits.length;
    const dates = ['2026-07-02', '2026-07-03', '2026-07-02'];
    const runs = await Promise.all(
      dates.map((d) => runJob(join(dir, 'delta-bronze.conf'), join(dir, 'platform.conf'), ['--set', `target.snapshot-date=${d}`], remote)),
    );
    for (const r of runs) expect([0, 75], r.stderr).toContain(r.code);
    const log = deltaLogWithDeltaRs(path);
    // One commit per run that succeeded, versions without a gap: no commit was overwritten by another.
    expect(log.commits.length - before).toBe(runs.filter((r) => r.code === 0).length);
    expect(log.commits.map((c) => c.version)).toEqual(log.commits.map((_, i) => i));
    // Each date holds its snapshot once: a date whose every run exited 75 holds nothing, and a 75 is retryable.
    const succeeded = new Set(['2026-07-01', ...dates.filter((_, i) => runs[i]!.code === 0)]);
    const perDate: Record<string, number> = {};
    for (const r of log.rows) perDate[String(r._snapshot_date)] = (perDate[String(r._snapshot_date)] ?? 0) + 1;
    expect(perDate).toEqual(Object.fromEntries([...succeeded].sort().map((d) => [d, rows])));
    for (const r of runs.filter((x) => x.code === 75)) expect(r.status.error.retryable).toBe(true);
  }, 900_000);

  it('the History Server shows the server’s application while it runs, with a run’s Spark jobs (by its tag) and their SQL executions', async () => {
    const port = /:(\d+)/.exec(remote)![1]!;
    const history = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'history-url', '--port', port])
      .toString()
      .trim();
    // The gold-publish run of the second test: its jobs carry its run's tag.
    const tag = `lakehouse-jobs_${GOLD_RUN}`;
    // The History Server scans the event log folder every 5 s: wait for the run's jobs to be there.
    const found = await until(120_000, async () => {
      const apps = (await api(history, '/applications')) as { id: string; name: string; attempts: { completed: boolean }[] }[];
      const app = apps.find((a) => a.name === `lakehouse-jobs Spark Connect :${port}`);
      if (!app) return undefined;
      const jobs = (await api(history, `/applications/${app.id}/jobs`)) as { jobId: number; status: string; jobTags?: string[] }[];
      const mine = jobs.filter((j) => (j.jobTags ?? []).some((t) => t.includes(tag)));
      return mine.length && mine.every((j) => j.status !== 'RUNNING') ? { app, mine } : undefined;
    });
    // The Connect server runs on: its application is listed as it runs, not only once it ends.
    expect(found.app.attempts[0]!.completed).toBe(false);
    expect(found.mine.map((j) => j.status)).toEqual(found.mine.map(() => 'SUCCEEDED'));
    const executions = (await api(history, `/applications/${found.app.id}/sql?details=false&length=100000`)) as { id: number; successJobIds: number[] }[];
    const ids = new Set(found.mine.map((j) => j.jobId));
    expect(executions.filter((e) => e.successJobIds.some((j) => ids.has(j))).length).toBeGreaterThan(0);
  }, 600_000);

  it('ran on a master and two workers: the server’s executors on both, each given the stack’s jars and the project’s plugins', () => {
    // The workers' folders (scripts/spark-connect start --cluster): one executor of this server each.
    const port = /:(\d+)/.exec(remote)![1];
    const cluster = join(
      dirname(
        execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'jars'])
          .toString()
          .trim(),
      ),
      `run-${port}`,
      'cluster',
    );
    for (const worker of ['worker-1', 'worker-2']) {
      const apps = readdirSync(join(cluster, worker)).filter((d) => d.startsWith('app-'));
      expect(apps.length, worker).toBeGreaterThan(0);
      const newest = join(cluster, worker, apps.sort().at(-1)!);
      const jars = readdirSync(newest).flatMap((executor) => readdirSync(join(newest, executor)));
      expect(jars, worker).toContain('lakehouse-spark-plugins.jar');
      expect(
        jars.some((j) => j.startsWith('hadoop-aws-')),
        worker,
      ).toBe(true);
      expect(
        jars.some((j) => j.startsWith('iceberg-spark-runtime-')),
        worker,
      ).toBe(true);
    }
  }, 600_000);
});
