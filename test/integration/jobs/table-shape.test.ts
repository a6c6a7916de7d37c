import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { createTopic, kafkaBootstrap, produce } from '../../support/kafka.js';
import { needs } from '../../support/needs.js';
import { testQuery } from '../../support/sql.js';
import {
  connect,
  deltaShapesWithDeltaRs,
  readDeltaTablesWithDeltaRs,
  readIcebergTablesWithPyIceberg,
  freshTenant,
  icebergShapesWithPyIceberg,
  icebergSnapshotSummary,
  remote,
  runCli,
  runJob,
} from '../../support/stack.js';

needs('spark', 'kafka', 'py-tools');

/**
 * target.partition-by and target.table-properties on the real server (docs/table-shape.md): each
 * template that creates a silver or gold table (cdc-silver-merge, scd2-dim-load, dv-hub,
 * gold-publish) creates it, on Iceberg and on Delta, with the configured spec and properties, read
 * back from the tables' own metadata by PyIceberg (spec, properties) and delta-rs (partition
 * columns, configuration), never by Spark. Then an existing table: `diff` predicts the property the
 * run sets, the run sets it (read back), and a configured spec the table does not have is 78 naming
 * both, nothing written. The bronze templates (jdbc-snapshot-ingest from a SQLite file,
 * kafka-bronze-ingest from the real broker) the same way, `_snapshot_date` first. The refusals that
 * need no server are unit tests (test/unit/jobs/table-shape.test.ts, jdbc-snapshot-ingest.test.ts).
 */
vi.setConfig({ testTimeout: 1_800_000 });

const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;

const sql = (text: string) => client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));

const head = (template: string, version: number, name: string) =>
  `job { template = "${template}", schema-version = ${version}, name = "it-shape-${name}" }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;

type Format = 'iceberg' | 'delta';
const catalogOf = (f: Format) => (f === 'iceberg' ? 'lake' : 'spark_catalog');

interface Case {
  template: string;
  layer: 'silver' | 'gold';
  /** The config, with its target section's body. */
  config: (table: string, format: Format, target: string) => string;
  /** The shape per format: partition-by, table-properties (HOCON), and what the readers must find. */
  shape: Record<Format, { partitionBy: string; properties: string; spec: unknown; props: Record<string, string> }>;
}

const CASES: Case[] = [
  {
    template: 'cdc-silver-merge',
    layer: 'silver',
    config: (table, format, target) => `${head('cdc-silver-merge', 2, table)}
source { table = "orders_cdc", format = iceberg, catalog = "lake" }
cdc { primary-key = ["id"], sequence-by = ["ts"], delete-when = "op = 'd'" }
columns { exclude = ["op"] }
target { table = "${table}", catalog = "${catalogOf(format)}", ${target} }`,
    shape: {
      iceberg: {
        partitionBy: `["days(created_at)", "bucket(4, id)"]`,
        properties: `{ format-version = 2, write.merge.mode = merge-on-read, write.delete.mode = merge-on-read }`,
        spec: [
          { column: 'created_at', transform: 'day' },
          { column: 'id', transform: 'bucket[4]' },
        ],
        props: { 'write.merge.mode': 'merge-on-read', 'write.delete.mode': 'merge-on-read' },
      },
      delta: {
        partitionBy: `["status"]`,
        properties: `{ delta.enableDeletionVectors = true, delta.checkpointInterval = 5 }`,
        spec: ['status'],
        props: { 'delta.enableDeletionVectors': 'true', 'delta.checkpointInterval': '5' },
      },
    },
  },
  {
    template: 'scd2-dim-load',
    layer: 'gold',
    config: (table, format, target) => `${head('scd2-dim-load', 2, table)}
source { table = "orders", catalog = "lake" }
dimension { natural-key = ["id"], tracked-columns = ["status"] }
history { sequence-by = "ts" }
target { table = "${table}", catalog = "${catalogOf(format)}", ${target} }`,
    shape: {
      iceberg: {
        partitionBy: `["bucket(8, id)"]`,
        properties: `{ write.update.mode = merge-on-read, write.target-file-size-bytes = 67108864 }`,
        spec: [{ column: 'id', transform: 'bucket[8]' }],
        props: { 'write.update.mode': 'merge-on-read', 'write.target-file-size-bytes': '67108864' },
      },
      delta: {
        partitionBy: `["status"]`,
        properties: `{ delta.enableChangeDataFeed = true }`,
        spec: ['status'],
        props: { 'delta.enableChangeDataFeed': 'true' },
      },
    },
  },
  {
    template: 'dv-hub',
    layer: 'silver',
    config: (table, format, target) => `${head('dv-hub', 1, table)}
sources = [{ table = "orders", layer = silver, catalog = "lake", record-source = "shop.orders", business-key = ["id"] }]
hub { hash-key = "hk_order", business-key = ["order_id"] }
target { table = "${table}", catalog = "${catalogOf(format)}", ${target} }`,
    shape: {
      iceberg: {
        partitionBy: `["months(load_date)", "bucket(4, hk_order)"]`,
        properties: `{ "write.parquet.compression-codec" = snappy }`,
        spec: [
          { column: 'load_date', transform: 'month' },
          { column: 'hk_order', transform: 'bucket[4]' },
        ],
        props: { 'write.parquet.compression-codec': 'snappy' },
      },
      delta: {
        partitionBy: `["record_source"]`,
        properties: `{ delta.logRetentionDuration = "interval 7 days" }`,
        spec: ['record_source'],
        props: { 'delta.logRetentionDuration': 'interval 7 days' },
      },
    },
  },
  {
    template: 'gold-publish',
    layer: 'gold',
    config: (table, format, target) => `${head('gold-publish', 1, table)}
transform { catalogs { silver = "lake" }, sql = "SELECT id, status, created_at FROM silver.orders" }
target { table = "${table}", catalog = "${catalogOf(format)}", grain = ["id"], mode = merge, ${target} }`,
    shape: {
      iceberg: {
        partitionBy: `["hours(created_at)", "status"]`,
        properties: `{ write.merge.mode = merge-on-read, write.distribution-mode = hash }`,
        spec: [
          { column: 'created_at', transform: 'hour' },
          { column: 'status', transform: 'identity' },
        ],
        props: { 'write.merge.mode': 'merge-on-read', 'write.distribution-mode': 'hash' },
      },
      delta: {
        partitionBy: `["status"]`,
        properties: `{ delta.enableDeletionVectors = true }`,
        spec: ['status'],
        props: { 'delta.enableDeletionVectors': 'true' },
      },
    },
  },
];

const ROWS = `(1, 'NEW', TIMESTAMP'2026-07-05 08:00:00', TIMESTAMP'2026-07-05 08:00:01', 'c'),
  (2, 'PAID', TIMESTAMP'2026-07-05 09:30:00', TIMESTAMP'2026-07-05 09:30:01', 'c'),
  (3, 'NEW', TIMESTAMP'2026-07-06 10:00:00', TIMESTAMP'2026-07-06 10:00:01', 'c')`;

const tableName = (c: Case, format: Format) => `${c.template.replace(/-/g, '_')}_${format}`;
const configFile = (c: Case, format: Format, target: string) => {
  const file = join(dir, `${tableName(c, format)}-${Math.random().toString(36).slice(2, 8)}.conf`);
  writeFileSync(file, c.config(tableName(c, format), format, target));
  return file;
};
const shapeTarget = (c: Case, format: Format) => `partition-by = ${c.shape[format].partitionBy}, table-properties ${c.shape[format].properties}`;
const run = (file: string) => runJob(file, join(dir, 'platform.conf'), ['--logical-date', '2026-07-06']);

async function diffCli(file: string) {
  const statusFile = join(dir, 'diff-status.json');
  const r = await runCli([
    'diff',
    '--config',
    file,
    '--env',
    join(dir, 'platform.conf'),
    '--remote',
    remote(),
    '--status-file',
    statusFile,
    '--logical-date',
    '2026-07-06',
  ]);
  return { ...r, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}

beforeAll(async () => {
  client = connect();
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
jdbc { inline-urls = allow }
kafka.clusters.local { bootstrap-servers = "${kafkaBootstrap()}", tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } } }`,
  });
  // The test's own reads see every commit: Iceberg's catalog would serve a table cached up to 30 s.
  await client.config.set({ 'spark.sql.catalog.lake.cache-enabled': 'false' });
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_bronze`);
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_silver`);
  const columns = '(id BIGINT, status STRING, created_at TIMESTAMP, ts TIMESTAMP, op STRING)';
  await sql(`CREATE TABLE lake.${tenant.id}_bronze.orders_cdc ${columns} USING iceberg LOCATION '${tenant.root}/bronze/orders_cdc'`);
  await sql(`INSERT INTO lake.${tenant.id}_bronze.orders_cdc VALUES ${ROWS}`);
  await sql(`CREATE TABLE lake.${tenant.id}_silver.orders ${columns} USING iceberg LOCATION '${tenant.root}/silver/orders'`);
  await sql(`INSERT INTO lake.${tenant.id}_silver.orders VALUES ${ROWS}`);
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('each template creates its table in the configured shape', () => {
  const created: { c: Case; format: Format }[] = [];
  const icebergTables = (layer: string) => created.filter((x) => x.format === 'iceberg' && x.c.layer === layer).map((x) => tableName(x.c, 'iceberg'));

  it.each(CASES.flatMap((c) => (['iceberg', 'delta'] as const).map((format) => [`${c.template} on ${format}`, c, format] as const)))(
    '%s',
    async (_name, c, format) => {
      const r = await run(configFile(c, format, shapeTarget(c, format)));
      expect(r.code, r.stderr).toBe(0);
      created.push({ c, format });
    },
  );

  it('PyIceberg and delta-rs read the specs and properties from the tables themselves', () => {
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const layer of ['silver', 'gold'] as const) {
      const tables = icebergTables(layer);
      if (!tables.length) continue;
      const shapes = icebergShapesWithPyIceberg(`${tenant.id}_${layer}`, tables);
      for (const t of tables) {
        const c = created.find((x) => tableName(x.c, 'iceberg') === t)!.c;
        found[t] = { spec: shapes[t]!.spec, props: pick(shapes[t]!.properties, c.shape.iceberg.props), formatVersion: shapes[t]!.formatVersion };
        wanted[t] = { spec: c.shape.iceberg.spec, props: c.shape.iceberg.props, formatVersion: 2 };
      }
    }
    const deltas = created.filter((x) => x.format === 'delta');
    const paths = deltas.map((x) => `${tenant.root}/${x.c.layer}/${tableName(x.c, 'delta')}`);
    const shapes = deltaShapesWithDeltaRs(paths);
    deltas.forEach((x, i) => {
      const s = shapes[paths[i]!]!;
      found[tableName(x.c, 'delta')] = { spec: s.partitionColumns, props: pick(s.configuration, x.c.shape.delta.props) };
      wanted[tableName(x.c, 'delta')] = { spec: x.c.shape.delta.spec, props: x.c.shape.delta.props };
    });
    expect(created).toHaveLength(CASES.length * 2);
    expect(found).toEqual(wanted);
  });
});

describe('an existing table', () => {
  const cdc = CASES[0]!;

  it('diff predicts the property the run sets; the run sets it, Iceberg and Delta', async () => {
    const changed: Record<Format, string> = {
      iceberg: `partition-by = ${cdc.shape.iceberg.partitionBy}, table-properties { format-version = 2, write.merge.mode = copy-on-write }`,
      delta: `partition-by = ${cdc.shape.delta.partitionBy}, table-properties { delta.checkpointInterval = 10 }`,
    };
    for (const format of ['iceberg', 'delta'] as const) {
      const file = configFile(cdc, format, changed[format]);
      const d = await diffCli(file);
      expect(d.code, d.stderr).toBe(0);
      const change = d.status.diff.changes.find((x: { table?: string }) => x.table?.endsWith(`.${tableName(cdc, format)}`));
      expect(change?.setProperties).toEqual(format === 'iceberg' ? { 'write.merge.mode': 'copy-on-write' } : { 'delta.checkpointInterval': '10' });
      const r = await run(file);
      expect(r.code, r.stderr).toBe(0);
    }
    const ice = icebergShapesWithPyIceberg(`${tenant.id}_silver`, [tableName(cdc, 'iceberg')])[tableName(cdc, 'iceberg')]!;
    expect(ice.properties['write.merge.mode']).toBe('copy-on-write');
    expect(ice.spec).toEqual(cdc.shape.iceberg.spec);
    const path = `${tenant.root}/silver/${tableName(cdc, 'delta')}`;
    expect(deltaShapesWithDeltaRs([path])[path]!.configuration['delta.checkpointInterval']).toBe('10');
  });

  it('a configured spec the table does not have is 78 naming both, in diff and run, nothing written', async () => {
    for (const format of ['iceberg', 'delta'] as const) {
      const other = format === 'iceberg' ? `["status"]` : `["id"]`;
      const file = configFile(cdc, format, `partition-by = ${other}`);
      const snapshot = () => (format === 'iceberg' ? icebergSnapshotSummary(`${tenant.id}_silver`, tableName(cdc, format)).snapshot_id : undefined);
      const before = snapshot();
      const d = await diffCli(file);
      expect(d.code).toBe(78);
      const r = await run(file);
      expect(r.code).toBe(78);
      const table = `${catalogOf(format)}.${tenant.id}_silver.${tableName(cdc, format)}`;
      const spec =
        format === 'iceberg'
          ? /exists partitioned by \[days\(created_at\), bucket\(4, id\)\], not by \[status\]/
          : /exists partitioned by \[status\], not by \[id\]/;
      for (const out of [d.stderr, r.stderr]) {
        expect(out).toContain(`target.partition-by: table ${table}`);
        expect(out).toMatch(spec);
      }
      expect(snapshot()).toBe(before);
    }
  });
});

describe('the bronze templates: _snapshot_date first, then the configured fields', () => {
  const topic = `${tenant.id}.shape-events`;
  const db = () => join(dir, 'shop.db');
  const jdbc = (table: string, format: Format, target: string) => `${head('jdbc-snapshot-ingest', 2, table)}
source { table = "orders", url = "jdbc:sqlite:${db()}", driver = "org.sqlite.JDBC" }
target { table = "${table}", snapshot-date = "2026-07-05", format = ${format}, catalog = "${catalogOf(format)}", ${target} }`;
  const kafka = (table: string, format: Format, target: string) => `${head('kafka-bronze-ingest', 1, table)}
source { topics = ["${topic}"] }
target { table = "${table}", format = ${format}, catalog = "${catalogOf(format)}", ${target} }`;
  const BRONZE = [
    {
      table: 'jdbc_iceberg',
      format: 'iceberg',
      config: jdbc,
      target: `partition-by = ["bucket(4, id)", "status"], table-properties { write.merge.mode = merge-on-read, format-version = 2 }`,
      spec: ['_snapshot_date identity', 'id bucket[4]', 'status identity'],
      props: { 'write.merge.mode': 'merge-on-read' },
    },
    {
      table: 'jdbc_delta',
      format: 'delta',
      config: jdbc,
      target: `partition-by = ["status"], table-properties { delta.dataSkippingNumIndexedCols = 8 }`,
      spec: ['_snapshot_date', 'status'],
      // The change data feed incremental readers need stays on beside the configured property.
      props: { 'delta.dataSkippingNumIndexedCols': '8', 'delta.enableChangeDataFeed': 'true' },
    },
    {
      table: 'kafka_iceberg',
      format: 'iceberg',
      config: kafka,
      target: `partition-by = ["_kafka_topic", "hours(_kafka_timestamp)"], table-properties { write.distribution-mode = none }`,
      spec: ['_snapshot_date identity', '_kafka_topic identity', '_kafka_timestamp hour'],
      props: { 'write.distribution-mode': 'none' },
    },
    {
      table: 'kafka_delta',
      format: 'delta',
      config: kafka,
      target: `partition-by = ["_kafka_partition"], table-properties { delta.checkpointInterval = 3 }`,
      spec: ['_snapshot_date', '_kafka_partition'],
      props: { 'delta.checkpointInterval': '3', 'delta.enableChangeDataFeed': 'true' },
    },
  ] as const;
  const write = (b: (typeof BRONZE)[number], target: string = b.target) => {
    const file = join(dir, `${b.table}-${Math.random().toString(36).slice(2, 8)}.conf`);
    writeFileSync(file, b.config(b.table, b.format, target));
    return file;
  };

  it('jdbc-snapshot-ingest and kafka-bronze-ingest create Iceberg and Delta bronze in the configured shape; PyIceberg and delta-rs read spec, properties and rows', async () => {
    execFileSync('python3', [
      '-c',
      `import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE orders (id INTEGER, status TEXT)")\ndb.executemany("INSERT INTO orders VALUES (?, ?)", [(1, "NEW"), (2, "PAID"), (3, "NEW")])\ndb.commit()`,
      db(),
    ]);
    createTopic(topic, 2);
    produce(topic, [
      { key: 'a', partition: 0, value: { n: 1 } },
      { key: 'b', partition: 1, value: { n: 2 } },
    ]);
    for (const b of BRONZE) {
      const r = await run(write(b));
      expect(r.code, `${b.table}\n${r.stderr}`).toBe(0);
    }
    const ns = `${tenant.id}_bronze`;
    const ice = icebergShapesWithPyIceberg(ns, ['jdbc_iceberg', 'kafka_iceberg']);
    const iceRows = readIcebergTablesWithPyIceberg(ns, ['jdbc_iceberg', 'kafka_iceberg']);
    const deltaPaths = ['jdbc_delta', 'kafka_delta'].map((t) => `${tenant.root}/bronze/${t}`);
    const delta = deltaShapesWithDeltaRs(deltaPaths);
    const deltaRows = readDeltaTablesWithDeltaRs(deltaPaths);
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const b of BRONZE) {
      const rows = b.format === 'iceberg' ? iceRows[b.table]! : deltaRows[`${tenant.root}/bronze/${b.table}`]!;
      if (b.format === 'iceberg') {
        const shape = ice[b.table]!;
        found[b.table] = { spec: shape.spec.map((f) => `${f.column} ${f.transform}`), props: pick(shape.properties, b.props), rows: rows.length };
      } else {
        const shape = delta[`${tenant.root}/bronze/${b.table}`]!;
        found[b.table] = { spec: shape.partitionColumns, props: pick(shape.configuration, b.props), rows: rows.length };
      }
      wanted[b.table] = { spec: [...b.spec], props: b.props, rows: b.config === jdbc ? 3 : 2 };
    }
    expect(found).toEqual(wanted);
  });

  it('an existing bronze table partitioned otherwise is 78 naming both specs, nothing written', async () => {
    const b = BRONZE[0];
    const before = icebergSnapshotSummary(`${tenant.id}_bronze`, b.table).snapshot_id;
    const r = await run(write(b, `partition-by = ["status"]`));
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(
      `target.partition-by: table lake.${tenant.id}_bronze.${b.table} exists partitioned by [_snapshot_date, bucket(4, id), status], not by [_snapshot_date, status]`,
    );
    expect(icebergSnapshotSummary(`${tenant.id}_bronze`, b.table).snapshot_id).toBe(before);
  });
});

function pick(props: Record<string, string>, keys: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(keys).map((k) => [k, props[k]!]));
}
