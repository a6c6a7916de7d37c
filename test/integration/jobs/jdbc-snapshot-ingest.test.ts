import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { type Postgres, startPostgres } from '../../support/postgres.js';
import { freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg, remote, repoRoot, runCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'iceberg-rest', 'postgres', 'py-tools');

/**
 * jdbc-snapshot-ingest end to end through the real CLI on the real local Spark Connect server:
 * a real PostgreSQL (scripts/postgres) with awkward types, and the quickstart's SQLite file; the
 * bronze parquet is read back by DuckDB and compared value by value with what the database holds.
 */

const tenant = freshTenant();
const schema = `it_${randomBytes(4).toString('hex')}`;
let pg: Postgres;
let dir: string;

// numeric(38,10) at its limits, timestamptz with microseconds, unicode and empty text, NULLs in
// every column, bytea, json (kept byte for byte) and jsonb (normalised by PostgreSQL), boolean, date.
const SETUP = (s: string) => `
CREATE SCHEMA ${s};
CREATE TABLE ${s}.customers (
  id bigint PRIMARY KEY, name text, amount numeric(38,10), seen_at timestamptz, photo bytea,
  profile json, tags jsonb, active boolean, born date, country text NOT NULL
);
INSERT INTO ${s}.customers VALUES
  (1, 'Grüße, 世界 🚀', 9999999999999999999999999999.9999999999, '2026-07-05 12:34:56.789012+02', '\\x00ff10', '{"a": [1, 2.5, null], "b": "ü"}', '{"z": 1, "a": true}', true, '1970-01-01', 'de'),
  (2, '', -0.0000000001, '1999-12-31 23:59:59.999999+00', '\\x', '[]', '[]', false, '2026-02-28', 'de'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'fr'),
  (4, 'O''Brien "quoted"' || chr(10) || 'second line', 0, '2026-07-05 00:00:00+14', '\\xdeadbeef', '{"nested": {"x": "y"}}', '{"k": "v"}', true, '9999-12-31', 'fr'),
  (5, 'tab	and \\ backslash', 12345.6789, '2038-01-19 03:14:08+00', '\\x41', '"just a string"', 'null', false, '2000-02-29', 'us');
`;

// What PostgreSQL holds, in a canonical form both sides can produce exactly.
const CANONICAL_PG = (s: string, where = 'true') => `
SELECT coalesce(json_agg(r ORDER BY id), '[]') FROM (
  SELECT id, name, amount::text AS amount, (extract(epoch FROM seen_at) * 1000000)::bigint AS seen_at,
         encode(photo, 'hex') AS photo, profile::text AS profile, tags::text AS tags, active, born::text AS born, country
  FROM ${s}.customers WHERE ${where}) r;`;

// The same canonical form from the bronze parquet, by DuckDB (not Spark).
const READ_BRONZE = `
import duckdb, json, sys
path = sys.argv[1]
con = duckdb.connect()
src = f"read_parquet('{path}/**/*.parquet', hive_partitioning = true)"
cols = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
def canon(name, typ):
    q = '"' + name + '"'
    if typ.startswith('TIMESTAMP'): return f"epoch_us({q}) AS {q}"
    if typ.startswith('DECIMAL') or typ == 'DATE': return f"CAST({q} AS VARCHAR) AS {q}"
    if typ == 'BLOB': return f"lower(hex({q})) AS {q}"
    return q
sql = f"SELECT {', '.join(canon(n, t) for n, t, *_ in cols)} FROM {src}"
cur = con.execute(sql)
names = [d[0] for d in cur.description]
for row in cur.fetchall():
    print(json.dumps(dict(zip(names, row)), default=str, ensure_ascii=False))
`;

type BronzeRow = Record<string, unknown> & { _snapshot_date: string; _lake_ingested_at: number };

function bronze(root: string, table: string): BronzeRow[] {
  const path = join(fileURLToPath(root), 'bronze', table);
  const out = execFileSync('bash', [join(repoRoot, 'scripts/py-tools'), 'python', '-c', READ_BRONZE, path], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as BronzeRow);
}

const payload = (rows: BronzeRow[], date: string) =>
  rows
    .filter((r) => r._snapshot_date === date)
    .map(({ _lake_tenant: _t, _lake_source: _s, _lake_ingested_at: _i, _snapshot_date: _d, ...rest }) => rest)
    .sort((a, b) => Number(a.id) - Number(b.id));

const platform = () => `
jdbc.connections.shop {
  url = "${pg.url}"
  user = "${pg.user}"
  password { env = "PG_TEST_PASSWORD" }
  driver = "org.postgresql.Driver"
}
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
`;

const jobConfig = (source: string) => `
job    { template = "jdbc-snapshot-ingest", schema-version = 1, name = "it-customers" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { connection = "shop", table = "${schema}.customers"${source} }
target { table = "customers", snapshot-date = "2026-07-05", partition-by = ["country"] }
`;

async function ingest(date: string, opts: { source?: string; command?: string; env?: Record<string, string> } = {}) {
  const name = `job-${randomBytes(3).toString('hex')}.conf`;
  const files = tempFiles({ [name]: jobConfig(opts.source ?? '') });
  const statusFile = join(dir, `status-${name}.json`);
  const result = await runCli(
    [
      ...(opts.command ? [opts.command] : []),
      '--job',
      'jdbc-snapshot-ingest',
      '--config',
      join(files, name),
      '--env',
      join(dir, 'platform.conf'),
      '--remote',
      remote(),
      '--set',
      `target.snapshot-date=${date}`,
      '--run-id',
      `it__${date}`,
      '--status-file',
      statusFile,
    ],
    { PG_TEST_PASSWORD: pg.password, ...opts.env },
  );
  const status = JSON.parse(readFileSync(statusFile, 'utf8'));
  return { ...result, status };
}

function expectNoPassword(...texts: string[]) {
  for (const t of texts) expect(t.includes(pg.password), 'the password leaked').toBe(false);
}

beforeAll(() => {
  pg = startPostgres();
  pg.psql(SETUP(schema));
  dir = tempFiles({ 'platform.conf': platform() });
});

describe('jdbc-snapshot-ingest v1 from PostgreSQL', () => {
  let firstRun: BronzeRow[];

  it('lands every row with its exact values and the bronze stamps, partitioned by date and country', async () => {
    const { code, status, stdout, stderr } = await ingest('2026-07-05');
    expect(code, stderr).toBe(0);
    expectNoPassword(stdout, stderr, JSON.stringify(status));
    expect(status).toMatchObject({
      status: 'succeeded',
      job: { template: 'jdbc-snapshot-ingest', schemaVersion: 1, name: 'it-customers' },
      metrics: { rowsRead: 5, rowsWritten: 5 },
      outputs: [{ path: `${tenant.root}/bronze/customers`, format: 'parquet', location: `${tenant.root}/bronze/customers`, metrics: { rowsWritten: 5 } }],
    });
    const rows = bronze(tenant.root, 'customers');
    expect(payload(rows, '2026-07-05')).toEqual(JSON.parse(pg.psql(CANONICAL_PG(schema))));
    expect(new Set(rows.map((r) => r._lake_tenant))).toEqual(new Set([tenant.id]));
    expect(new Set(rows.map((r) => r._lake_source))).toEqual(new Set([`shop/${schema}.customers`]));
    expect(new Set(rows.map((r) => r._lake_ingested_at)).size).toBe(1);
    expect(Math.abs(rows[0]!._lake_ingested_at / 1000 - Date.now())).toBeLessThan(120_000);
    const layout = join(fileURLToPath(tenant.root), 'bronze/customers/_snapshot_date=2026-07-05');
    expect(
      readdirSync(layout)
        .filter((f) => !f.startsWith('_') && !f.startsWith('.'))
        .sort(),
    ).toEqual(['country=de', 'country=fr', 'country=us']);
    firstRun = rows;
  });

  it('replaces the date on a rerun: no duplicates, the new copy, a partition value the source no longer has gone', async () => {
    // The only 'us' customer moves: the date's country=us folder must not keep its old row.
    pg.psql(`UPDATE ${schema}.customers SET name = 'renamed', country = 'fr' WHERE id = 5;`);
    const { code, stderr } = await ingest('2026-07-05');
    expect(code, stderr).toBe(0);
    const rows = bronze(tenant.root, 'customers');
    expect(rows).toHaveLength(5);
    expect(payload(rows, '2026-07-05')).toEqual(JSON.parse(pg.psql(CANONICAL_PG(schema))));
    expect(readdirSync(join(fileURLToPath(tenant.root), 'bronze/customers/_snapshot_date=2026-07-05')).filter((f) => f.startsWith('country='))).toEqual([
      'country=de',
      'country=fr',
    ]);
    expect(rows[0]!._lake_ingested_at).toBeGreaterThan(firstRun[0]!._lake_ingested_at);
  });

  it('adds a second date and leaves the first untouched', async () => {
    const before = bronze(tenant.root, 'customers');
    pg.psql(`INSERT INTO ${schema}.customers (id, name, country) VALUES (6, 'new on the 6th', 'jp');`);
    const { code, status, stderr } = await ingest('2026-07-06');
    expect(code, stderr).toBe(0);
    expect(status.metrics).toEqual({ rowsRead: 6, rowsWritten: 6 });
    const rows = bronze(tenant.root, 'customers');
    expect(rows.filter((r) => r._snapshot_date === '2026-07-05')).toEqual(expect.arrayContaining(before));
    expect(rows.filter((r) => r._snapshot_date === '2026-07-05')).toHaveLength(5);
    expect(payload(rows, '2026-07-06')).toEqual(JSON.parse(pg.psql(CANONICAL_PG(schema))));
  });

  it('reads the same rows in parallel ranges of a partition column', async () => {
    const { code, stderr } = await ingest('2026-07-07', {
      source: ', partition-column = "id", lower-bound = 1, upper-bound = 6, num-partitions = 3, fetch-size = 2',
    });
    expect(code, stderr).toBe(0);
    const rows = bronze(tenant.root, 'customers');
    expect(payload(rows, '2026-07-07')).toEqual(payload(rows, '2026-07-06'));
  });

  it('applies source.where as a filter the database sees', async () => {
    const { code, status, stderr } = await ingest('2026-07-08', { source: ', where = "country = \'fr\' OR amount IS NULL"' });
    expect(code, stderr).toBe(0);
    const expected = JSON.parse(pg.psql(CANONICAL_PG(schema, "country = 'fr' OR amount IS NULL"))) as unknown[];
    // Customers 3 and 4 (fr) and 5 (moved to fr by the rerun test), not the others.
    expect(expected).toHaveLength(3 + 1);
    expect(status.metrics.rowsWritten).toBe(expected.length);
    const rows = bronze(tenant.root, 'customers');
    expect(payload(rows, '2026-07-08')).toEqual(expected);
  });

  it('never prints the password: plan shows [redacted], a failing run does not leak it either', async () => {
    const plan = await ingest('2026-07-09', { command: 'plan' });
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('[redacted]');
    expectNoPassword(plan.stdout, plan.stderr);
    const failed = await ingest('2026-07-09', { source: ', where = "no_such_column = 1"' });
    expect(failed.code).not.toBe(0);
    expect(failed.status.status).toBe('failed');
    expectNoPassword(failed.stdout, failed.stderr, JSON.stringify(failed.status));
  });

  it('fails with 78 naming the platform path when the password variable is missing, writing nothing', async () => {
    const { code, status } = await ingest('2026-07-10', { env: { PG_TEST_PASSWORD: '' } });
    expect(code).toBe(78);
    expect(status.error).toMatchObject({ category: 'config', path: '(platform) jdbc.connections.shop.password' });
    expect(bronze(tenant.root, 'customers').some((r) => r._snapshot_date === '2026-07-10')).toBe(false);
  });

  it('refuses a wrong password (no rows written)', async () => {
    const { code, stdout, stderr, status } = await ingest('2026-07-11', { env: { PG_TEST_PASSWORD: 'wrong-password-123' } });
    expect(code).not.toBe(0);
    expect(status.status).toBe('failed');
    expectNoPassword(stdout, stderr);
    expect(bronze(tenant.root, 'customers').some((r) => r._snapshot_date === '2026-07-11')).toBe(false);
  });

  it('skips (99) an empty source', async () => {
    const { code, status } = await ingest('2026-07-12', { source: ', where = "id < 0"' });
    expect(code).toBe(99);
    expect(status.skipReason).toMatch(/returned no rows/);
  });
});

describe('jdbc-snapshot-ingest v1 from SQLite (the quickstart example)', () => {
  it('runs configs/examples/jdbc-snapshot-ingest.v1.conf against a SQLite file under LAKEHOUSE_LAKE_HOME', async () => {
    const lakeHome = tempFiles({});
    mkdirSync(join(lakeHome, 'sources'));
    execFileSync('python3', [
      '-c',
      `import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE orders_cdc (id INTEGER, name TEXT, amount DECIMAL(12,2), ts TEXT, op TEXT)")
db.executemany("INSERT INTO orders_cdc VALUES (?, ?, ?, ?, ?)", [
  (1, "one", "1.10", "2026-07-05 08:00:00", "c"), (1, "one*", "1.20", "2026-07-05 09:00:00", "u"),
  (2, "zwei ü", None, "2026-07-05 08:00:00", None)])
db.commit()`,
      join(lakeHome, 'sources/shop.db'),
    ]);
    const env = { LAKEHOUSE_LAKE_HOME: lakeHome };
    const args = [
      '--config',
      join(repoRoot, 'configs/examples/jdbc-snapshot-ingest.v1.conf'),
      '--env',
      join(repoRoot, 'configs/examples/platform-local.conf'),
      '--remote',
      remote(),
    ];
    for (let i = 0; i < 2; i++) {
      const { code, stdout, stderr } = await runCli(args, env);
      expect(code, stderr).toBe(0);
      expect(JSON.parse(stdout).metrics).toEqual({ rowsRead: 3, rowsWritten: 3 });
    }
    const rows = bronze(`file://${lakeHome}/acme`, 'orders_cdc');
    expect(payload(rows, '2026-07-05')).toEqual([
      { id: 1, name: 'one', amount: '1.10', ts: '2026-07-05 08:00:00', op: 'c' },
      { id: 1, name: 'one*', amount: '1.20', ts: '2026-07-05 09:00:00', op: 'u' },
      { id: 2, name: 'zwei ü', amount: null, ts: '2026-07-05 08:00:00', op: null },
    ]);
    expect(new Set(rows.map((r) => `${r._lake_tenant} ${r._lake_source}`))).toEqual(new Set(['acme sqlite:shop.db/orders_cdc']));
  });
});

describe('jdbc-snapshot-ingest v2 into bronze Iceberg and Delta tables', () => {
  // Iceberg twice: the JDBC catalog "lake" and the REST catalog "rest" (scripts/iceberg-rest).
  for (const [format, catalog] of [
    ['iceberg', 'lake'],
    ['iceberg', 'rest'],
    ['delta', 'spark_catalog'],
  ] as const) {
    it(`replaces exactly the snapshot date in a ${format} table of ${catalog}, read back by a second engine`, async () => {
      const t = freshTenant();
      const dbDir = tempFiles({});
      const db = join(dbDir, 'shop.db');
      const fill = (rows: string) =>
        execFileSync('python3', [
          '-c',
          `import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER, name TEXT)")\ndb.execute("DELETE FROM orders")\ndb.executemany("INSERT INTO orders VALUES (?, ?)", ${rows})\ndb.commit()`,
          db,
        ]);
      const conf = tempFiles({
        'job.conf': `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders", url = "jdbc:sqlite:${db}", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-07-05", format = ${format}, catalog = "${catalog}" }
`,
        'platform.conf': `catalogs { lake { format = iceberg }, rest { format = iceberg }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }`,
      });
      const ingest = async (date: string) => {
        const r = await runCli([
          '--config',
          join(conf, 'job.conf'),
          '--env',
          join(conf, 'platform.conf'),
          '--remote',
          remote(),
          '--set',
          `target.snapshot-date=${date}`,
        ]);
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout);
      };
      const read = (): Record<string, unknown>[] =>
        (format === 'iceberg' ? readIcebergWithPyIceberg(`${t.id}_bronze`, 'orders', catalog) : readDeltaWithDeltaRs(`${t.root}/bronze/orders`))
          .map((r) => ({ id: r.id, name: r.name, day: String(r._snapshot_date), tenant: r._lake_tenant }))
          .sort((a, b) => `${a.day}${a.id}`.localeCompare(`${b.day}${b.id}`));

      fill(`[(1, "one"), (2, "two")]`);
      const first = await ingest('2026-07-05');
      expect(first.outputs[0]).toMatchObject({
        table: `${catalog}.${t.id}_bronze.orders`,
        format,
        location: `${t.root}/bronze/orders`,
        metrics: { rowsWritten: 2 },
      });
      fill(`[(1, "one*"), (2, "two"), (3, "three")]`);
      await ingest('2026-07-05'); // rerun of the same date with changed source rows: replaced, not appended
      await ingest('2026-07-06');
      expect(read()).toEqual([
        { id: 1, name: 'one*', day: '2026-07-05', tenant: t.id },
        { id: 2, name: 'two', day: '2026-07-05', tenant: t.id },
        { id: 3, name: 'three', day: '2026-07-05', tenant: t.id },
        { id: 1, name: 'one*', day: '2026-07-06', tenant: t.id },
        { id: 2, name: 'two', day: '2026-07-06', tenant: t.id },
        { id: 3, name: 'three', day: '2026-07-06', tenant: t.id },
      ]);
    });
  }
});
