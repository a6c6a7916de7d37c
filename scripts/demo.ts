/**
 * scripts/demo: the reference scenario with real change data capture, checked by readers that are
 * not Spark. See the header of scripts/demo for what it starts; docs/templates/kafka-bronze-ingest.md
 * ("Kafka to silver") for the chain's configs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const kafkaPort = process.env.KAFKA_PORT ?? '19092';
const env = { ...process.env, KAFKA_PORT: kafkaPort };

const say = (m: string) => process.stderr.write(`demo: ${m}\n`);
/** Seconds since `t` (performance.now()), for the lines that say where the time goes. */
const since = (t: number) => `${((performance.now() - t) / 1000).toFixed(1)} s`;
const script = (name: string, ...args: string[]) =>
  execFileSync('bash', [join(root, 'scripts', name), ...args], { env, encoding: 'utf8', stdio: ['pipe', 'pipe', 'inherit'], timeout: 900_000 }).trim();
const psql = (sql: string) =>
  execFileSync('bash', [join(root, 'scripts/postgres'), 'psql', '-tA', '-q', '-v', 'ON_ERROR_STOP=1', '-F', '\t', '-f', '-'], {
    env,
    input: sql,
    encoding: 'utf8',
  }).trim();

say('starting PostgreSQL (logical decoding), Kafka, Kafka Connect with Debezium, Spark Connect');
const started = performance.now();
const jdbcUrl = script('postgres', 'start', '--logical').split('\n').pop()!;
script('kafka', 'start');
script('kafka-connect', 'start');
script('spark-connect', 'start');
const lake = script('spark-connect', 'warehouse');
say(`servers up in ${since(started)}`);

const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const tenant = `shop_${stamp}`;
const schema = `demo_${stamp}`;
const storageRoot = `file://${lake}/${tenant}`;
const dir = mkdtempSync(join(tmpdir(), 'lakehouse-demo-'));
const topic = `${tenant}.${schema}.orders`;
say(`tenant ${tenant}, PostgreSQL table ${schema}.orders, topic ${topic}, lake ${storageRoot}`);

writeFileSync(
  join(dir, 'platform.conf'),
  `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant} { storage-roots = ["${storageRoot}"] } }
kafka.clusters.shop_cdc {
  bootstrap-servers = "127.0.0.1:${kafkaPort}"
  default = true
  tenants { ${tenant} { topic-prefixes = ["${tenant}."] } }
}
`,
);
const configs: Record<string, string> = {
  bronze: `job    { template = "kafka-bronze-ingest", schema-version = 1, name = "shop-orders-bronze" }
tenant { id = "${tenant}", storage-root = "${storageRoot}" }
source {
  topics = ["${topic}"]
  value-format = debezium-json
  value-schema { order_id = string, customer_id = string, status = string, amount = "decimal(12,2)", currency = string, created_at = timestamp }
}
target { table = "orders_cdc", format = iceberg }
`,
  // The documented Kafka-to-silver config (docs/templates/kafka-bronze-ingest.md), for this bronze table.
  silver: `job    { template = "cdc-silver-merge", schema-version = 2, name = "shop-orders-silver" }
tenant { id = "${tenant}", storage-root = "${storageRoot}" }
source { table = "orders_cdc", format = iceberg, catalog = "lake", where = "op IS NOT NULL" }
cdc {
  primary-key = ["order_id"]
  sequence-by = ["_cdc_lsn", "_cdc_ts_ms", "_kafka_offset"]
  delete-when = "op = 'd'"
}
columns { exclude = ["op", "_cdc_unavailable", "_kafka_undecoded", "_kafka_key", "_kafka_value", "_kafka_topic",
                     "_kafka_partition", "_kafka_timestamp", "_kafka_timestamp_type", "_kafka_headers"] }
schema-evolution = add-columns
target { table = "orders", format = iceberg }
`,
  gold: `job    { template = "gold-publish", schema-version = 1, name = "shop-daily-revenue" }
tenant { id = "${tenant}", storage-root = "${storageRoot}" }
transform {
  sql = """
    SELECT CAST(created_at AS DATE) AS revenue_date, currency, count(*) AS orders, CAST(sum(amount) AS DECIMAL(14,2)) AS revenue
    FROM silver.orders
    WHERE status IN ('PAID', 'SHIPPED', 'DELIVERED')
    GROUP BY CAST(created_at AS DATE), currency
  """
}
target { table = "daily_revenue", grain = ["revenue_date", "currency"], mode = full-refresh }
expectations = [
  { name = "date_present", type = not-null, columns = ["revenue_date"], action = fail }
  { name = "revenue_not_negative", type = expression, expr = "revenue >= 0", action = fail }
]
`,
  maintenance: `job    { template = "table-maintenance", schema-version = 1, name = "shop-maintenance" }
tenant { id = "${tenant}", storage-root = "${storageRoot}" }
tables = [
  { layer = silver, table = "orders", compact { strategy = binpack, min-input-files = 2 }, rewrite-manifests = true,
    expire-snapshots { older-than-hours = 168, retain-last = 20 }, remove-orphan-files { older-than-hours = 168 } }
  { layer = bronze, table = "orders_cdc", compact { strategy = binpack, min-input-files = 2 }, expire-snapshots { older-than-hours = 168, retain-last = 20 } }
]
`,
};
for (const [name, text] of Object.entries(configs)) writeFileSync(join(dir, `${name}.conf`), text);

interface Run {
  code: number;
  status: { outputs?: { table: string; snapshotId?: string; metrics?: Record<string, number>; committed?: boolean }[]; error?: { message: string } };
}
function job(name: string): Run {
  const statusFile = join(dir, `${name}.status.json`);
  say(`running ${name} (${configs[name]!.split('\n')[0]!.match(/template = "([^"]+)"/)![1]})`);
  const t = performance.now();
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      join(root, 'src/cli.ts'),
      '--config',
      join(dir, `${name}.conf`),
      '--env',
      join(dir, 'platform.conf'),
      '--remote',
      'local',
      '--status-file',
      statusFile,
    ],
    { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', timeout: 900_000 },
  );
  const status = JSON.parse(readFileSync(statusFile, 'utf8')) as Run['status'];
  say(`  ${name}: exit ${r.status} in ${since(t)}${status.error ? ` (${status.error.message})` : ''}`);
  return { code: r.status ?? -1, status };
}

type Row = Record<string, unknown>;
/**
 * The tables read back without Spark (scripts/stack/read_lake.py), several requests in one Python
 * start: `rows:<ns>.<table>[@<snapshot>]` (PyIceberg), `duckdb:<ns>.<table>` (DuckDB),
 * `snapshots:<ns>.<table>` (snapshot ids, oldest first).
 */
function readLake(...requests: string[]): unknown[] {
  const t = performance.now();
  const out = execFileSync('bash', [join(root, 'scripts/py-tools'), 'python', join(root, 'scripts/stack/read_lake.py'), lake, ...requests], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as unknown);
  say(`read back ${requests.map((r) => r.split(':')[0]).join(', ')} without Spark in ${since(t)}`);
  return out;
}

// Rows as comparable text: PostgreSQL's and the lake's spelling of the same values.
const order = (r: Row) =>
  [
    r.order_id,
    r.customer_id,
    r.status,
    Number(r.amount).toFixed(2),
    r.currency,
    String(r.created_at)
      .replace('T', ' ')
      .replace(/(\+00:00|Z)$/, ''),
  ].join('|');
const revenue = (r: Row) => [String(r.revenue_date), r.currency, Number(r.orders), Number(r.revenue).toFixed(2)].join('|');
const sorted = (xs: string[]) => [...xs].sort();
const pgOrders = () =>
  sorted(
    psql(`SELECT order_id, customer_id, status, amount, currency, to_char(created_at, 'YYYY-MM-DD HH24:MI:SS') FROM ${schema}.orders`)
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [id, customer, status, amount, currency, created] = l.split('\t');
        return order({ order_id: id, customer_id: customer, status, amount, currency, created_at: created });
      }),
  );
const pgRevenue = () =>
  sorted(
    psql(`SELECT created_at::date, currency, count(*), sum(amount) FROM ${schema}.orders WHERE status IN ('PAID', 'SHIPPED', 'DELIVERED') GROUP BY 1, 2`)
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [d, currency, n, sum] = l.split('\t');
        return revenue({ revenue_date: d, currency, orders: n, revenue: sum });
      }),
  );

const results: { name: string; ok: boolean; detail: string }[] = [];
function check(name: string, ok: boolean, detail: string): void {
  results.push({ name, ok, detail });
  process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}\n`);
}
const same = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);

// 1. The application database and its initial orders; Debezium snapshots them (op = r).
psql(`
CREATE SCHEMA ${schema};
CREATE TABLE ${schema}.orders (order_id text PRIMARY KEY, customer_id text NOT NULL, status text NOT NULL,
  amount numeric(12,2) NOT NULL, currency text NOT NULL, created_at timestamp NOT NULL);
INSERT INTO ${schema}.orders VALUES
  ('o-1001', 'c-1', 'PAID',    120.50, 'EUR', '2026-11-03 09:15:00'),
  ('o-1002', 'c-2', 'NEW',      35.00, 'EUR', '2026-11-03 10:02:00'),
  ('o-1003', 'c-3', 'SHIPPED',  99.99, 'USD', '2026-11-03 11:40:00'),
  ('o-1004', 'c-1', 'PAID',     15.25, 'EUR', '2026-11-04 08:05:00'),
  ('o-1005', 'c-4', 'NEW',     250.00, 'USD', '2026-11-04 12:30:00'),
  ('o-1006', 'c-5', 'DELIVERED', 42.10, 'EUR', '2026-11-04 16:45:00'),
  ('o-1007', 'c-2', 'PAID',      8.99, 'USD', '2026-11-05 07:20:00');
`);
const initial = pgOrders();
const secret = join(dir, 'pg.properties');
writeFileSync(secret, `password=${script('postgres', 'password')}\n`, { mode: 0o600 });
const pg = new URL(jdbcUrl.replace(/^jdbc:/, ''));
const captured = performance.now();
execFileSync('bash', [join(root, 'scripts/kafka-connect'), 'register', tenant], {
  env,
  stdio: ['pipe', 'ignore', 'inherit'],
  input: JSON.stringify({
    'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
    'tasks.max': '1',
    'database.hostname': pg.hostname,
    'database.port': pg.port,
    'database.dbname': pg.pathname.slice(1),
    'database.user': script('postgres', 'user'),
    'database.password': `\${file:${secret}:password}`,
    'topic.prefix': tenant,
    'plugin.name': 'pgoutput',
    'slot.name': tenant,
    // The slot holds PostgreSQL's WAL until it is dropped: with the connector, at the end.
    'slot.drop.on.stop': 'true',
    'publication.name': tenant,
    'publication.autocreate.mode': 'filtered',
    'table.include.list': `${schema}.orders`,
    'topic.creation.default.replication.factor': '1',
    'topic.creation.default.partitions': '1',
    'value.converter.schemas.enable': 'false',
    'key.converter.schemas.enable': 'false',
  }),
});
/** Wait (one process asking the broker) until the topic holds `n` records. */
function waitForTopic(n: number, what: string): void {
  const t = performance.now();
  script('kafka', 'tool', 'wait-records', '180', `${topic}=${n}`);
  say(`${what}: ${n} records in ${topic} after ${since(t)}`);
}
waitForTopic(7, `connector registered in ${since(captured)}, its snapshot`);

// Each check runs only the jobs it needs: gold is published once, after the changes, and checked then.
const ns = (layer: string) => `${tenant}_${layer}`;
const bronzeTable = `${ns('bronze')}.orders_cdc`;
const silverTable = `${ns('silver')}.orders`;
const goldTable = `${ns('gold')}.daily_revenue`;
const first = { bronze: job('bronze'), silver: job('silver') };
// The silver snapshot of this run, as its status names it (read back at the end, by PyIceberg).
const silverBefore = first.silver.status.outputs?.[0]?.snapshotId ?? '';
check('first run', first.bronze.code === 0 && first.silver.code === 0, `exit codes ${first.bronze.code}, ${first.silver.code} (bronze, silver)`);

// 2. The day's changes: pay one, delete one, add one.
psql(`
UPDATE ${schema}.orders SET status = 'PAID' WHERE order_id = 'o-1002';
DELETE FROM ${schema}.orders WHERE order_id = 'o-1005';
INSERT INTO ${schema}.orders VALUES ('o-1008', 'c-6', 'PAID', 64.00, 'EUR', '2026-11-05 09:10:00');
`);
waitForTopic(11, 'the changes'); // 7 snapshot rows, an update, a delete and its tombstone, an insert
const second = { bronze: job('bronze'), silver: job('silver'), gold: job('gold') };
check(
  'second run',
  second.bronze.code === 0 && second.silver.code === 0 && second.gold.code === 0,
  `exit codes ${second.bronze.code}, ${second.silver.code}, ${second.gold.code} (bronze, silver, gold)`,
);

const [bronze, silverAfter, goldAfter, silverNow] = readLake(
  `rows:${bronzeTable}`,
  `rows:${silverTable}`,
  `duckdb:${goldTable}`,
  `snapshots:${silverTable}`,
) as [Row[], Row[], Row[], string[]];
const ops = bronze.map((r) => String(r.op ?? 'tombstone')).sort();
const offsets = new Set(bronze.map((r) => `${String(r._kafka_partition)}/${String(r._kafka_offset)}`));
check(
  'bronze keeps every change event',
  bronze.length === 11 && offsets.size === 11 && same(ops, ['c', 'd', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'tombstone', 'u']),
  `${bronze.length} records, ${offsets.size} distinct offsets, ops ${ops.join(' ')} (PyIceberg)`,
);
const silverRows = sorted(silverAfter.map(order));
check('silver equals PostgreSQL', same(silverRows, pgOrders()), `${silverRows.length} orders, each as SELECT on PostgreSQL returns it (PyIceberg)`);
const goldRows = sorted(goldAfter.map(revenue));
check('gold equals SQL on PostgreSQL', same(goldRows, pgRevenue()), `daily revenue ${goldRows.join(', ')} (DuckDB)`);

// 3. A rerun processes nothing twice: the ingest finds nothing new, the merge changes no row.
const again = { bronze: job('bronze'), silver: job('silver') };
const merged = again.silver.status.outputs?.[0]?.metrics ?? {};
const [bronzeAgain, silverAgain, travelled] = readLake(`rows:${bronzeTable}`, `snapshots:${silverTable}`, `rows:${silverTable}@${silverBefore}`) as [
  Row[],
  string[],
  Row[],
];
check(
  'a rerun processes nothing twice',
  again.bronze.code === 99 &&
    bronzeAgain.length === 11 &&
    (again.silver.code === 99 || (again.silver.code === 0 && !merged.inserted && !merged.updated && !merged.deleted)) &&
    silverAgain.pop() === silverNow.pop(),
  `bronze exit ${again.bronze.code} (nothing new), silver exit ${again.silver.code} (${JSON.stringify(merged)}), no new silver snapshot`,
);

// 4. Time travel: silver as it was before the changes.
const before = sorted(travelled.map(order));
check(
  'the silver snapshot from before the changes is still readable',
  same(before, initial),
  `snapshot ${silverBefore}: the ${before.length} initial orders (PyIceberg)`,
);

// 5. Maintenance, then the tables still answer the same.
const maintenance = job('maintenance');
const [silverMaintained, travelledMaintained] = readLake(`rows:${silverTable}`, `rows:${silverTable}@${silverBefore}`) as [Row[], Row[]];
check(
  'maintenance runs',
  maintenance.code === 0 && same(sorted(silverMaintained.map(order)), pgOrders()) && same(sorted(travelledMaintained.map(order)), initial),
  `exit ${maintenance.code}; silver still equals PostgreSQL, the old snapshot is still readable`,
);

execFileSync('bash', [join(root, 'scripts/kafka-connect'), 'unregister', tenant], { env, stdio: 'inherit' });
const failed = results.filter((r) => !r.ok).length;
process.stdout.write(`${results.length - failed} of ${results.length} checks passed\n`);
process.exit(failed ? 1 : 0);
