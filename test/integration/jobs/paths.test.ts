import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { rows } from '../../../src/spark/arrow.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { type Storage, connect, freshTenant, remote, runCli, runJob } from '../../support/stack.js';
import { filesUnder, makeFolder, writeFileAt } from '../../support/storage.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'object-store', 'py-tools');

/**
 * Literal paths on the real server: bronze is read by the exact partitions selected, so a corrupt
 * or mistyped file in another date's partition cannot break a run; a table found by name at another
 * location is refused (78) and left untouched, on Iceberg and on Delta; one location holds one kind
 * of thing. The location checks run on a local folder and on the object store (S3A: no directories,
 * only objects and directory markers).
 */
const STORAGES: readonly Storage[] = ['file', 's3'];

let client: SparkConnectClient;
let dir: string;

const sql = async (text: string) => {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? rows(r.table) : [];
};

async function bronze(root: string, date: string, select = `SELECT * FROM VALUES (1, 1, 'c', 'one'), (2, 1, 'c', 'two') AS t(id, ts, op, name)`) {
  const q = testQuery(
    `SELECT *, 'it' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM (${select})`,
  );
  await client.execute(
    compileCommandPlan(q.writeFiles(`${root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
}

const config = (t: { id: string; root: string }, format: 'iceberg' | 'delta') => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-paths" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op" }
target { table = "orders", format = ${format}, catalog = ${format === 'iceberg' ? 'lake' : 'spark_catalog'} }
`;

async function run(t: { id: string; root: string }, format: 'iceberg' | 'delta', set: string[] = []) {
  const file = join(dir, `${t.id}-${format}.conf`);
  writeFileSync(file, config(t, format));
  writeFileSync(
    join(dir, `${t.id}.platform.conf`),
    `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${t.id} { storage-roots = ["${t.root}"] } }`,
  );
  return runJob(file, join(dir, `${t.id}.platform.conf`), ['--run-id', `it-paths-${t.id}`, ...set.flatMap((s) => ['--set', s])]);
}

beforeAll(() => {
  client = connect();
  dir = tempFiles({});
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('bronze partitions', () => {
  const tenant = freshTenant();
  const partition = (d: string) => join(tenant.root.replace(/^file:\/\//, ''), 'bronze/orders_cdc', `_snapshot_date=${d}`);

  beforeAll(async () => {
    await bronze(tenant.root, '2026-09-01');
    await bronze(tenant.root, '2026-09-02', `SELECT * FROM VALUES (1, 2, 'u', 'one*'), (3, 1, 'c', 'three') AS t(id, ts, op, name)`);
    // The old date goes bad: a file that is no parquet at all, and one whose id is text.
    writeFileSync(join(partition('2026-09-01'), 'part-99999-corrupt.snappy.parquet'), 'this is not parquet');
    await client.execute(
      compileCommandPlan(
        testQuery(`SELECT 'x' AS id, 9 AS ts, 'c' AS op, 'bad' AS name`).writeFiles(`file://${join(dir, 'mistyped')}`, 'parquet', { mode: 'overwrite' }),
        {
          reveal: true,
        },
      ),
    );
    const mistyped = readdirSync(join(dir, 'mistyped')).find((f) => f.endsWith('.parquet'))!;
    writeFileSync(join(partition('2026-09-01'), 'part-99998-mistyped.snappy.parquet'), readFileSync(join(dir, 'mistyped', mistyped)));
  });

  it('the bad old partition breaks a run that reads the whole tree (the control)', async () => {
    const r = await run(tenant, 'iceberg');
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.code).not.toBe(99);
    expect(r.status.error.category).not.toBe('config');
    // Reading the old partition's files for the merged schema is what fails: bad source data (65).
    expect(r.code).toBe(65);
    expect(r.status.error.category).toBe('data');
  });

  it('a run of the newer date with source.snapshot-date reads only that partition and succeeds', async () => {
    const r = await run(tenant, 'iceberg', ['source.snapshot-date=2026-09-02']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0]).toMatchObject({ table: `lake.${tenant.id}_silver.orders`, metrics: { inserted: 2, updated: 0, deleted: 0, late: 0 } });
    expect(await sql(`SELECT id, name, ts FROM lake.${tenant.id}_silver.orders ORDER BY id`)).toEqual([
      { id: 1, name: 'one*', ts: 2 },
      { id: 3, name: 'three', ts: 1 },
    ]);
  });

  it('a selected date without a partition skips (99), alone or in a list, writing nothing', async () => {
    const one = await run(tenant, 'iceberg', ['source.snapshot-date=2026-09-03']);
    expect(one.code, one.stderr).toBe(99);
    expect(one.status.status).toBe('skipped');
    expect(JSON.stringify(one.status)).toContain('2026-09-03');
    const list = await run(tenant, 'iceberg', ['source.snapshot-date=["2026-09-02", "2026-09-04"]']);
    expect(list.code, list.stderr).toBe(99);
    expect(JSON.stringify(list.status)).toContain('2026-09-04');
    expect(await sql(`SELECT count(*) AS n FROM lake.${tenant.id}_silver.orders`)).toEqual([{ n: 2n }]);
  });
});

describe.each(STORAGES.flatMap((storage) => (['iceberg', 'delta'] as const).map((format) => [format, storage] as const)))(
  'a %s table at another location (%s)',
  (format, storage) => {
    const tenant = freshTenant(storage);
    const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
    const name = `${catalog}.${tenant.id}_silver.orders`;
    const elsewhere = storage === 's3' ? `s3a://lake/old-home-${tenant.id}/orders` : `file://${mkdtempSync(join(tmpdir(), 'lakehouse-old-home-'))}/orders`;
    const state = async () => ({
      rows: await sql(`SELECT id, name FROM ${name} ORDER BY id`),
      version:
        format === 'iceberg'
          ? await sql(`SELECT snapshot_id FROM ${name}.snapshots ORDER BY committed_at`)
          : await sql(`DESCRIBE HISTORY ${name}`).then((h) => h.map((r) => r.version)),
    });

    beforeAll(async () => {
      await bronze(tenant.root, '2026-09-01');
      await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${tenant.id}_silver`);
      await sql(`CREATE TABLE ${name} (id INT, ts INT, name STRING) USING ${format} LOCATION '${elsewhere}'`);
      await sql(`INSERT INTO ${name} VALUES (7, 1, 'old home')`);
    });

    it("is refused with 78 naming the table and the expected location (never the other one, which may be another tenant's), and left untouched", async () => {
      const before = await state();
      const r = await run(tenant, format);
      expect(r.code, r.stderr).toBe(78);
      expect(r.status.error).toMatchObject({ code: 'CONFIG_INVALID', path: 'target.table' });
      const message = String(r.status.error.message);
      expect(message).toContain(`${name} already exists outside the tenant's storage roots`);
      expect(message).toContain(`${tenant.root}/silver/orders`);
      expect(message).not.toContain(elsewhere.replace(/^file:\/\//, '').replace(/^s3a:\/\//, ''));
      expect(await state()).toEqual(before);
      expect(before.rows).toEqual([{ id: 7, name: 'old home' }]);
    });

    it('is used once it is where the layout says (the same check passes for the real location)', async () => {
      await sql(`DROP TABLE ${name}`);
      const r = await run(tenant, format);
      expect(r.code, r.stderr).toBe(0);
      const again = await run(tenant, format);
      expect(again.code, again.stderr).toBe(0);
      expect(again.status.outputs[0]).toMatchObject({ location: `${tenant.root}/silver/orders`, metrics: { inserted: 0, late: 2 } });
    });
  },
);

describe('the tombstones table at another location', () => {
  const tenant = freshTenant();
  const name = `lake.${tenant.id}_silver.orders__cdc_tombstones`;
  const elsewhere = `file://${mkdtempSync(join(tmpdir(), 'lakehouse-old-home-'))}/orders__cdc_tombstones`;

  it('is refused with 78 before the silver table is written', async () => {
    await bronze(tenant.root, '2026-09-01');
    await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_silver`);
    await sql(`CREATE TABLE ${name} (id INT, ts INT, _cdc_deleted_at TIMESTAMP, _lake_run_id STRING) USING iceberg LOCATION '${elsewhere}'`);
    const r = await run(tenant, 'iceberg');
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error).toMatchObject({
      path: 'target.table',
      message: expect.stringContaining(`${name} already exists outside the tenant's storage roots, not at ${tenant.root}/silver/orders__cdc_tombstones`),
    });
    // The silver table was created (an earlier step) but nothing was merged into it.
    expect(await sql(`SELECT count(*) AS n FROM lake.${tenant.id}_silver.orders`)).toEqual([{ n: 0n }]);
  });
});

describe.each([
  ['iceberg', 'lake'],
  ['delta', 'spark_catalog'],
] as const)('a jdbc-snapshot-ingest bronze %s table at another location', (format, catalog) => {
  it('is refused with 78 and left untouched', async () => {
    const t = freshTenant();
    const name = `${catalog}.${t.id}_bronze.orders`;
    const elsewhere = `file://${mkdtempSync(join(tmpdir(), 'lakehouse-old-home-'))}/orders`;
    const conf = tempFiles({
      'job.conf': `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders", url = "jdbc:sqlite:${join(dir, 'shop.db')}", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-09-01", format = ${format}, catalog = "${catalog}" }
`,
      'platform.conf': 'catalogs { lake { format = iceberg }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }',
    });
    execFileSync('python3', [
      '-c',
      'import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER, name TEXT)")\ndb.execute("DELETE FROM orders")\ndb.execute("INSERT INTO orders VALUES (1, \'one\')")\ndb.commit()',
      join(dir, 'shop.db'),
    ]);
    await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${t.id}_bronze`);
    await sql(`CREATE TABLE ${name} (id BIGINT, name STRING, _snapshot_date DATE) USING ${format} LOCATION '${elsewhere}'`);
    await sql(`INSERT INTO ${name} VALUES (7, 'old home', DATE'2026-09-01')`);
    const r = await runCli(['--config', join(conf, 'job.conf'), '--env', join(conf, 'platform.conf'), '--remote', remote()]);
    expect(r.code, r.stderr).toBe(78);
    const status = JSON.parse(r.stdout);
    expect(status.error).toMatchObject({
      path: 'target.table',
      message: expect.stringContaining(`${name} already exists outside the tenant's storage roots, not at ${t.root}/bronze/orders`),
    });
    expect(await sql(`SELECT id, name FROM ${name}`)).toEqual([{ id: 7n, name: 'old home' }]);
  });
});

/**
 * One location holds one kind of thing. The layout gives a table one directory whatever its format,
 * and parquet bronze lives at the same place as a bronze table: a table is created only where no
 * files are, and parquet bronze is never read where a table keeps its log or metadata.
 */
describe.each(STORAGES)('one location, one kind (%s)', (storage) => {
  const files = (root: string, sub: string) => filesUnder(`${root}/${sub}`);
  const platform = (t: { id: string; root: string }) =>
    `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${t.id} { storage-roots = ["${t.root}"] } }\njdbc { inline-urls = allow }`;
  const cli = (t: { id: string; root: string }, job: string) => {
    const conf = tempFiles({ 'job.conf': job, 'platform.conf': platform(t) });
    return runCli(['--config', join(conf, 'job.conf'), '--env', join(conf, 'platform.conf'), '--remote', remote()]).then((r) => ({
      ...r,
      status: JSON.parse(r.stdout) as { exitCode: number; error?: { code: string; path: string; message: string } },
    }));
  };
  const cdc = (t: { id: string; root: string }, source: string, target: string) => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { ${source} }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op" }
target { ${target} }
`;

  it('a bronze Iceberg table over parquet bronze files: 78 TABLE_LOCATION_TAKEN, the files untouched, no table', async () => {
    const t = freshTenant(storage);
    await bronze(t.root, '2026-09-01');
    const before = files(t.root, 'bronze/orders_cdc');
    execFileSync('python3', [
      '-c',
      'import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE IF NOT EXISTS o (id INTEGER, name TEXT)")\ndb.execute("DELETE FROM o")\ndb.execute("INSERT INTO o VALUES (1, \'one\')")\ndb.commit()',
      join(dir, 'one-kind.db'),
    ]);
    const r = await cli(
      t,
      `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "o", url = "jdbc:sqlite:${join(dir, 'one-kind.db')}", driver = "org.sqlite.JDBC" }
target { table = "orders_cdc", snapshot-date = "2026-09-02", format = iceberg, catalog = lake }
`,
    );
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'target.table' });
    expect(r.status.error!.message).toMatch(/\d+ file\(s\) already there/);
    expect(files(t.root, 'bronze/orders_cdc')).toEqual(before);
    expect(await sql(`SHOW TABLES IN lake.${t.id}_bronze`).catch(() => [])).toEqual([]);
  });

  it('parquet bronze where a Delta table keeps its log: 78 at source.table, nothing read or written', async () => {
    const t = freshTenant(storage);
    const at = `${t.root}/bronze/orders_cdc`;
    // A Delta table whose first version is later deleted: its removed file still lies there.
    await sql(`CREATE TABLE delta.\`${at}\` USING delta AS SELECT * FROM VALUES (1, 1, 'c', 'gone') AS t(id, ts, op, name)`);
    await sql(`DELETE FROM delta.\`${at}\` WHERE id = 1`);
    const r = await cli(t, cdc(t, 'table = "orders_cdc"', 'table = "orders", format = delta, catalog = spark_catalog'));
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'source.table' });
    expect(r.status.error!.message).toContain('a Delta table (_delta_log)');
    expect(await sql(`SHOW TABLES IN spark_catalog.${t.id}_silver`).catch(() => [])).toEqual([]);
  });

  it('an Iceberg table over a dropped Iceberg table’s files: 78 at target.table, the files kept', async () => {
    const t = freshTenant(storage);
    await bronze(t.root, '2026-09-01');
    const name = `lake.${t.id}_silver.orders`;
    await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${t.id}_silver`);
    await sql(`CREATE TABLE ${name} (id INT, ts INT, name STRING) USING iceberg LOCATION '${t.root}/silver/orders'`);
    await sql(`INSERT INTO ${name} VALUES (7, 1, 'dropped')`);
    await sql(`DROP TABLE ${name}`); // without PURGE: the files stay
    const before = files(t.root, 'silver/orders');
    expect(before.some((f) => f.endsWith('.parquet'))).toBe(true);
    const r = await cli(t, cdc(t, 'table = "orders_cdc"', 'table = "orders", format = iceberg, catalog = lake'));
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'target.table' });
    expect(files(t.root, 'silver/orders')).toEqual(before);
  });

  it('a Delta table over a Delta log no catalog names: 78 at target.table, the log kept', async () => {
    const t = freshTenant(storage);
    await bronze(t.root, '2026-09-01');
    await sql(`CREATE TABLE delta.\`${t.root}/silver/orders\` USING delta AS SELECT * FROM VALUES (7, 1, 'unnamed') AS t(id, ts, name)`);
    const before = files(t.root, 'silver/orders');
    const r = await cli(t, cdc(t, 'table = "orders_cdc"', 'table = "orders", format = delta, catalog = spark_catalog'));
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'target.table' });
    expect(r.status.error!.message).toContain('a Delta table (_delta_log) already there');
    expect(files(t.root, 'silver/orders')).toEqual(before);
    expect(await sql(`SELECT id, name FROM delta.\`${t.root}/silver/orders\``)).toEqual([{ id: 7, name: 'unnamed' }]);
  });

  it('hidden files (_SUCCESS, .keep) and an empty folder (on S3 a directory marker) do not count: the table is created and loaded', async () => {
    const t = freshTenant(storage);
    await bronze(t.root, '2026-09-01');
    const silver = `${t.root}/silver/orders`;
    makeFolder(silver);
    makeFolder(`${silver}/data`);
    writeFileAt(`${silver}/_SUCCESS`, '');
    writeFileAt(`${silver}/.keep`, '');
    const r = await cli(t, cdc(t, 'table = "orders_cdc"', 'table = "orders", format = iceberg, catalog = lake'));
    expect(r.code, r.stderr).toBe(0);
    expect(await sql(`SELECT id, name FROM lake.${t.id}_silver.orders ORDER BY id`)).toEqual([
      { id: 1, name: 'one' },
      { id: 2, name: 'two' },
    ]);
  });
});
