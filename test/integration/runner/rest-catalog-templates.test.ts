import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { templates } from '../../../src/jobs/registry.js';
import { tempFiles } from '../../support/files.js';
import { type RecordId, createTopic, kafkaBootstrap, produce, recordKey } from '../../support/kafka.js';
import { connect, freshTenant, readDeltaWithDeltaRs, icebergRestUri, icebergSnapshotSummary, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'iceberg-rest', 'kafka', 'py-tools');

/**
 * Every template that writes or maintains Iceberg tables, run through the CLI against the stack's
 * Iceberg REST catalog (scripts/iceberg-rest, the Spark catalog "rest"), read back by PyIceberg
 * through the REST protocol, never by Spark. One row of CASES per template (version): its config,
 * what the run must report, and what the table must hold; each case then runs again and must
 * commit nothing (the templates' idempotency, which is also what a catalog that loses or
 * duplicates a commit would break). Tiny data: the file is about the catalog, not the templates'
 * semantics (their own integration files hold those, on the JDBC catalog "lake").
 *
 * The platform config describes "rest" as what it is (`type = rest` with its URI), so validation,
 * naming and the status document go through the typed catalog. Runs sequentially: later cases
 * read tables earlier setup wrote.
 */

const CATALOG = 'rest';
const DAY = '2026-07-05';
const tenant = freshTenant();
const ns = (layer: string) => `${tenant.id}_${layer}`;
let client: SparkConnectClient;
let dir: string;

async function sql(statement: string): Promise<void> {
  await client.execute(compileCommandPlan(testCommand(statement), { reveal: true }));
}

/** A parquet bronze snapshot as jdbc-snapshot-ingest v1 writes it (the stamps and `_snapshot_date`). */
async function bronze(table: string, select: string, date: string): Promise<void> {
  const q = testQuery(
    `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM (${select})`,
  );
  await client.execute(
    compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/${table}`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
}

/** An Iceberg table of the tenant's layer in the REST catalog, at the tenant's layout. */
async function icebergTable(layer: string, table: string, columns: string, rows: string[]): Promise<void> {
  await sql(`CREATE NAMESPACE IF NOT EXISTS ${CATALOG}.${ns(layer)}`);
  await sql(
    `CREATE TABLE ${CATALOG}.${ns(layer)}.${table} (${columns}) USING iceberg LOCATION '${tenant.root}/${layer}/${table}' TBLPROPERTIES ('format-version' = '2')`,
  );
  // One INSERT per row: several small files and snapshots, for table-maintenance to act on.
  for (const r of rows) await sql(`INSERT INTO ${CATALOG}.${ns(layer)}.${table} VALUES ${r}`);
}

const platform = () => `catalogs {
  ${CATALOG} { format = iceberg, default = true, type = rest, uri = "${icebergRestUri()}" }
  spark_catalog { format = delta }
}
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
maintenance { retention-floor-hours = 0 }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } }
}`;

const head = (template: string, version = 1) =>
  `job { template = "${template}", schema-version = ${version}, name = "it-rest-${template}" }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;

async function run(config: string, logicalDate = DAY) {
  const name = `job-${Math.random().toString(36).slice(2)}`;
  writeFileSync(join(dir, `${name}.conf`), config);
  return runJob(join(dir, `${name}.conf`), join(dir, 'platform.conf'), ['--logical-date', logicalDate]);
}

type Row = Record<string, unknown>;
/** A table read by a second engine: PyIceberg through the REST protocol, or delta-rs from its location. */
const read = (w: Where, layer: string, table: string): Row[] =>
  w.format === 'iceberg' ? readIcebergWithPyIceberg(ns(layer), table, w.catalog) : readDeltaWithDeltaRs(`${tenant.root}/${layer}/${table}`);
/** The named columns of each row (numbers as numbers), in a stable order: by the columns' values in turn. */
function sorted(rows: Row[], ...keys: string[]): Row[] {
  const num = (v: unknown) => (typeof v === 'bigint' ? Number(v) : v);
  const cmp = (a: unknown, b: unknown) => (typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b)));
  return rows.map((r) => Object.fromEntries(keys.map((k) => [k, num(r[k])]))).sort((a, b) => keys.map((k) => cmp(a[k], b[k])).find((c) => c !== 0) ?? 0);
}

/** Where a case writes: a catalog of the platform config and the format of its tables. */
interface Where {
  catalog: string;
  format: 'iceberg' | 'delta';
}
const REST: Where = { catalog: CATALOG, format: 'iceberg' };
/** Delta tables live in the session catalog; only cases no other integration file runs on Delta list it. */
const DELTA: Where = { catalog: 'spark_catalog', format: 'delta' };

/**
 * A table's name per format: the tenant's layout puts every table of a layer at
 * <storage-root>/<layer>/<table> whatever its catalog, so an Iceberg and a Delta table of one name
 * would share a location (Delta refuses to create a table on a non-Delta directory, the runner an
 * Iceberg table where another catalog has a table of the name).
 */
const named = (w: Where, table: string) => (w.format === 'delta' ? `${table}_delta` : table);

interface Case {
  name: string;
  /** The job config (after the `job`/`tenant` header), writing to `w`. */
  config: (w: Where) => string;
  /** Where the case runs (default: the REST catalog only). */
  where?: Where[];
  template: string;
  version?: number;
  /** The output table (layer, name) the run writes to `w`. */
  output: (w: Where) => [layer: string, table: string];
  /** The table read back by PyIceberg through REST after the first run. */
  check: (rows: Row[], output: Record<string, any>) => void;
  /** The rerun's output: nothing committed unless said otherwise. */
  rerun?: Record<string, unknown>;
  /** The rerun's exit code when it is not 0 (a stream with nothing new is skipped: 99). */
  rerunCode?: number;
  /** The first run's output, beyond its table and format: a commit unless said otherwise. */
  first?: Record<string, unknown>;
  /** Runs before the first run (e.g. records produced to the case's topic). */
  setup?: () => void;
}

/** The records the Kafka case produced: each must land once. */
let produced: RecordId[] = [];
const TOPIC = `${tenant.id}.orders.rest`;

const CASES: Case[] = [
  {
    name: 'kafka-bronze-ingest: records of a topic into a REST bronze table, each offset once',
    template: 'kafka-bronze-ingest',
    setup: () => {
      createTopic(TOPIC, 2);
      produced = produce(TOPIC, [
        { key: 'k1', value: { id: 1, status: 'NEW' }, partition: 0 },
        { key: 'k2', value: { id: 2, status: 'NEW' }, partition: 1 },
        { key: 'k1', value: { id: 1, status: 'PAID' }, partition: 0 },
      ]);
    },
    config: (w) => `source { topics = ["${TOPIC}"] }
target { table = "orders_events", catalog = "${w.catalog}", format = ${w.format} }`,
    output: () => ['bronze', 'orders_events'],
    check: (rows) => {
      expect(rows.map(recordKey).sort()).toEqual(produced.map(recordKey).sort());
      expect(produced).toHaveLength(3);
    },
    // A stream reports the records it wrote (its sink commits once per micro-batch).
    first: { metrics: expect.objectContaining({ rowsWritten: 3 }) },
    rerunCode: 99,
  },
  {
    name: 'gold-publish: a transform over a REST silver table, merged on its grain into REST gold',
    template: 'gold-publish',
    config: (w) => `transform { sql = "SELECT customer, count(*) AS orders FROM silver.orders GROUP BY customer" }
target { table = "customer_orders", catalog = "${w.catalog}", grain = ["customer"], mode = merge }`,
    output: () => ['gold', 'customer_orders'],
    check: (rows) =>
      expect(sorted(rows, 'customer', 'orders')).toEqual([
        { customer: 'alice', orders: 1 },
        { customer: 'bob', orders: 1 },
        { customer: 'erin', orders: 1 },
      ]),
  },
  {
    name: 'scd2-dim-load v1: a REST silver table into a REST gold dimension',
    template: 'scd2-dim-load',
    config: (w) => `source { table = "orders", catalog = "${w.catalog}" }
dimension { natural-key = ["id"], tracked-columns = ["status"], effective-at = "2026-07-06T00:00:00Z" }
target { table = "dim_order_status", catalog = "${w.catalog}" }`,
    output: () => ['gold', 'dim_order_status'],
    check: (rows) =>
      expect(sorted(rows, 'id', 'status', '_scd_current')).toEqual([
        { id: 1, status: 'PAID', _scd_current: true },
        { id: 2, status: 'SHIPPED', _scd_current: true },
        { id: 5, status: 'NEW', _scd_current: true },
      ]),
  },
  {
    name: 'scd2-dim-load v2: a bronze change feed into a REST gold dimension with tombstones',
    template: 'scd2-dim-load',
    version: 2,
    config: (w) => `source { layer = bronze, table = "orders_cdc", snapshot-date = "${DAY}" }
dimension { natural-key = ["id"], tracked-columns = ["status"] }
history { sequence-by = "ts", op-column = "op", delete-values = ["d"], tombstones = true }
target { table = "dim_orders", format = ${w.format}, catalog = "${w.catalog}" }`,
    output: () => ['gold', 'dim_orders'],
    check: (rows) =>
      // 1: NEW then PAID; 2: NEW; 3: NEW then its tombstone.
      expect(sorted(rows, 'id', 'status', '_scd_current', '_scd_deleted')).toEqual([
        { id: 1, status: 'NEW', _scd_current: false, _scd_deleted: false },
        { id: 1, status: 'PAID', _scd_current: true, _scd_deleted: false },
        { id: 2, status: 'NEW', _scd_current: true, _scd_deleted: false },
        { id: 3, status: 'NEW', _scd_current: false, _scd_deleted: false },
        { id: 3, status: 'NEW', _scd_current: true, _scd_deleted: true },
      ]),
  },
  {
    name: 'dv-hub: a bronze snapshot into a hub with its ghost record',
    template: 'dv-hub',
    where: [REST, DELTA],
    config: (w) => `sources = [ { table = "orders_cdc", snapshot-date = "${DAY}", record-source = "shop.orders", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
ghost-record = true
target { table = "${named(w, 'hub_customer')}", catalog = "${w.catalog}", format = ${w.format} }`,
    output: (w) => ['silver', named(w, 'hub_customer')],
    check: (rows) => {
      expect(sorted(rows, 'customer')).toEqual([{ customer: 'alice' }, { customer: 'bob' }, { customer: 'carol' }, { customer: null }]);
      expect(rows.find((r) => r.customer === null)?.hk_customer).toBe('0'.repeat(32));
    },
  },
  {
    name: 'dv-link: a bronze snapshot into a link',
    template: 'dv-link',
    where: [REST, DELTA],
    config: (w) => `source { table = "orders_cdc", snapshot-date = "${DAY}", record-source = "shop.orders" }
link { hash-key = "lhk_order_customer", hubs = [ { hash-key = "hk_order", business-key = ["id"] }, { hash-key = "hk_customer", business-key = ["customer"] } ] }
target { table = "${named(w, 'link_order_customer')}", catalog = "${w.catalog}", format = ${w.format} }`,
    output: (w) => ['silver', named(w, 'link_order_customer')],
    check: (rows) => {
      expect(rows).toHaveLength(3); // (1, alice), (2, bob), (3, carol)
      expect(new Set(rows.map((r) => r.lhk_order_customer)).size).toBe(3);
    },
  },
  {
    name: 'dv-satellite: a bronze snapshot into a satellite, repeated payloads dropped',
    template: 'dv-satellite',
    where: [REST, DELTA],
    config: (w) => `source { table = "orders_cdc", snapshot-date = "${DAY}", where = "op <> 'd'", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["status"], order-by = ["ts"] }
target { table = "${named(w, 'sat_order')}", catalog = "${w.catalog}", format = ${w.format} }`,
    output: (w) => ['silver', named(w, 'sat_order')],
    // 1: NEW, PAID; 2: NEW; 3: NEW (its delete filtered out).
    check: (rows) => expect(rows.map((r) => r.status).sort()).toEqual(['NEW', 'NEW', 'NEW', 'PAID']),
  },
  {
    name: 'iceberg-zero-copy-append: a REST silver table appended by reference to another',
    template: 'iceberg-zero-copy-append',
    config: (w) => `source { table = "orders_2025" }
target { table = "orders_history", catalog = "${w.catalog}" }`,
    output: () => ['silver', 'orders_history'],
    check: (rows, out) => {
      expect(sorted(rows, 'id')).toEqual([{ id: 1 }, { id: 2 }, { id: 10 }]);
      expect(icebergSnapshotSummary(ns('silver'), 'orders_history', CATALOG)['lakehouse-jobs.zero-copy.source-snapshot-id']).toMatch(/^\d+$/);
      expect(out.metrics).toMatchObject({ records: 2 });
    },
  },
  {
    name: 'table-maintenance: Iceberg procedures through the REST catalog (compact, manifests, expiry, orphans)',
    template: 'table-maintenance',
    config: (w) => `dry-run = false
tables = [ { layer = silver, table = "events", catalog = "${w.catalog}", compact { min-input-files = 2 }, rewrite-manifests = true,
  expire-snapshots { older-than-hours = 0, retain-last = 1 }, remove-orphan-files { older-than-hours = 24 } } ]`,
    output: () => ['silver', 'events'],
    check: (rows, out) => {
      expect(sorted(rows, 'id')).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }]);
      expect(out.metrics.filesBefore).toBeGreaterThanOrEqual(4);
      // The compaction's snapshot and the one expiry must keep (retain-last = 1 counts before the compaction commits).
      expect(out.metrics).toMatchObject({ filesAfter: 1, snapshotsBefore: 4, snapshotsAfter: 2 });
    },
    // Maintenance is not an append: a second run finds the one file and leaves one file.
    rerun: { metrics: expect.objectContaining({ filesBefore: 1, filesAfter: 1 }) },
  },
  {
    name: 'freshness-check: the age of a REST table’s current snapshot, read through the catalog',
    template: 'freshness-check',
    config: (w) => `tables = [ { layer = silver, table = "orders_2025", catalog = "${w.catalog}", max-age = "1 day" } ]`,
    output: () => ['silver', 'orders_2025'],
    // It reads; it commits nothing.
    first: { committed: false },
    check: (rows, out) => {
      expect(sorted(rows, 'id')).toEqual([{ id: 1 }, { id: 2 }]);
      expect(out.metrics.maxAgeSeconds).toBe(86_400);
      expect(out.metrics.ageSeconds).toBeGreaterThanOrEqual(0);
      expect(out.metrics.ageSeconds).toBeLessThan(86_400);
    },
  },
];

/** Run against the REST catalog by their own integration files (they need a JDBC source or Kafka). */
const ELSEWHERE: Record<string, string> = {
  'jdbc-snapshot-ingest v2': 'test/integration/jobs/jdbc-snapshot-ingest.test.ts',
  'cdc-silver-merge v2': 'test/integration/jobs/cdc-silver-merge-v2.test.ts',
};
/** Versions without a catalog of their own to test: parquet bronze only, or migrated into a version run above. */
const NO_CATALOG = new Set(['jdbc-snapshot-ingest v1', 'cdc-silver-merge v1']);
/** Not yet run against the REST catalog: reconcile reads a JDBC source, which this file does not start (it reads tables as freshness-check does). */
const KNOWN_GAPS = new Set<string>(['reconcile v1']);

beforeAll(async () => {
  dir = tempFiles({ 'platform.conf': platform() });
  client = connect();
  // The CDC events of one day (as the quickstart's), parquet bronze: the vault and v2 dimension's source.
  await bronze(
    'orders_cdc',
    `SELECT * FROM VALUES
       (1, 'alice', 'NEW', 1, 'c'), (1, 'alice', 'PAID', 2, 'u'), (2, 'bob', 'NEW', 3, 'c'), (3, 'carol', 'NEW', 4, 'c'), (3, 'carol', 'NEW', 5, 'd')
     AS t(id, customer, status, ts, op)`,
    DAY,
  );
  await icebergTable('silver', 'orders', 'id BIGINT, customer STRING, status STRING', ["(1, 'alice', 'PAID'), (2, 'bob', 'SHIPPED'), (5, 'erin', 'NEW')"]);
  await icebergTable('silver', 'orders_2025', 'id BIGINT, status STRING', ["(1, 'PAID'), (2, 'SHIPPED')"]);
  await icebergTable('silver', 'orders_history', 'id BIGINT, status STRING', ["(10, 'NEW')"]);
  await icebergTable('silver', 'events', 'id BIGINT, v STRING', ["(1, 'a')", "(2, 'b')", "(3, 'c')", "(4, 'd')"]);
}, 300_000);
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe.sequential('templates against the Iceberg REST catalog', () => {
  it('has a case (here or in a named file) for every template version of the registry', () => {
    const covered = new Set([...CASES.map((c) => `${c.template} v${c.version ?? 1}`), ...Object.keys(ELSEWHERE), ...NO_CATALOG, ...KNOWN_GAPS]);
    const all = templates.flatMap((t) => t.versions.map((v) => `${t.name} v${v.version}`));
    expect(all.filter((t) => !covered.has(t))).toEqual([]);
  });

  const runs = CASES.flatMap((c) => (c.where ?? [REST]).map((w) => ({ ...c, w, label: `${c.name} (${w.catalog}, ${w.format})` })));
  // A plain loop, not it.each: its $-interpolation cuts a long name, and the catalog is at its end.
  for (const c of runs)
    it(
      c.label,
      async () => {
        const config = `${head(c.template, c.version)}${c.config(c.w)}`;
        c.setup?.();
        const first = await run(config);
        expect(first.code, first.stderr).toBe(0);
        const [layer, table] = c.output(c.w);
        const out = first.status.outputs[0];
        expect(out).toMatchObject({ table: `${c.w.catalog}.${ns(layer)}.${table}`, format: c.w.format, ...(c.first ?? { committed: true }) });
        c.check(read(c.w, layer, table), out);

        const again = await run(config);
        expect(again.code, again.stderr).toBe(c.rerunCode ?? 0);
        if (c.rerunCode === undefined) expect(again.status.outputs[0]).toMatchObject(c.rerun ?? { committed: false });
        // Whatever the rerun reported, the table holds what the first run left.
        c.check(read(c.w, layer, table), out);
      },
      300_000,
    );
});

/**
 * What the catalog layer refuses, before Spark is asked anything: a Delta table asked of the REST
 * catalog (it holds Iceberg tables) and a catalog the platform config does not describe. Exit 78
 * with the config path; no table appears in the REST catalog.
 */
describe('catalog refusals', () => {
  it.each([
    { name: 'a Delta table in the Iceberg REST catalog', target: `catalog = "${CATALOG}", format = delta`, path: 'target.format' },
    { name: 'a catalog the platform config does not describe', target: 'catalog = "rest2", format = iceberg', path: 'target.catalog' },
  ])('$name: exit 78 at $path, the catalog unchanged', async ({ target, path }) => {
    const config = `${head('dv-hub')}sources = [ { table = "orders_cdc", snapshot-date = "${DAY}", record-source = "shop.orders", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
target { table = "refused_hub", ${target} }`;
    const r = await run(config);
    expect(r.code).toBe(78);
    expect(r.status).toMatchObject({ exitCode: 78 });
    expect(r.stdout).toContain(path);
    expect(() => read(REST, 'silver', 'refused_hub')).toThrow(/NoSuchTable/);
  });
});

describe('one location per table name across catalogs', () => {
  it('a Delta table named like a REST catalog Iceberg table of the layer: exit 78 TABLE_LOCATION_TAKEN, the Iceberg table unchanged', async () => {
    const before = sorted(read(REST, 'silver', 'orders'), 'id', 'status');
    const config = `${head('dv-hub')}sources = [ { table = "orders_cdc", snapshot-date = "${DAY}", record-source = "shop.orders", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
target { table = "orders", catalog = "spark_catalog", format = delta }`;
    const r = await run(config);
    expect(r.code, r.stderr).toBe(78);
    expect(r.status).toMatchObject({ exitCode: 78, error: { code: 'TABLE_LOCATION_TAKEN', path: 'target.table' } });
    expect(r.stderr).toContain('target.table: ');
    expect(sorted(read(REST, 'silver', 'orders'), 'id', 'status')).toEqual(before);
  }, 300_000);

  it('a REST catalog Iceberg table named like a Delta table of the layer: exit 78 TABLE_LOCATION_TAKEN, the Delta table unchanged', async () => {
    // Spark itself would create the Iceberg table over the Delta table's directory: the runner looks first.
    const hub = (
      where: string,
    ) => `${head('dv-hub')}sources = [ { table = "orders_cdc", snapshot-date = "${DAY}", record-source = "shop.orders", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
target { table = "hub_taken", ${where} }`;
    const first = await run(hub('catalog = "spark_catalog", format = delta'));
    expect(first.code, first.stderr).toBe(0);
    const before = sorted(read(DELTA, 'silver', 'hub_taken'), 'hk_customer');
    expect(before.length).toBeGreaterThan(0);
    const r = await run(hub('catalog = "rest", format = iceberg'));
    expect(r.code, r.stderr).toBe(78);
    expect(r.status).toMatchObject({ exitCode: 78, error: { code: 'TABLE_LOCATION_TAKEN', path: 'target.table' } });
    expect(r.stderr).toContain('of catalog spark_catalog is there');
    expect(sorted(read(DELTA, 'silver', 'hub_taken'), 'hk_customer')).toEqual(before);
    expect(() => read(REST, 'silver', 'hub_taken')).toThrow(/NoSuchTable/);
  }, 300_000);
});
