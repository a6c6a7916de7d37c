/**
 * Seeds the quickstart's bronze layer: two days of CDC events for acme's orders, written as the
 * bronze layer stores them (parquet under <storage-root>/bronze/orders_cdc, partitioned by
 * _snapshot_date, stamped with the bronze metadata columns). Rerunning replaces the same days.
 *
 *   node --import tsx scripts/seed-example.ts <sc://address> <storage-root>
 */
import { Query } from '../src/spark/plan/query.js';
import { compileCommandPlan } from '../src/spark/plan/compile.js';
import { parseConnectionString } from '../src/spark/connection.js';
import { SparkConnectClient } from '../src/spark/client.js';

const [remote, storageRoot] = process.argv.slice(2);
if (!remote || !storageRoot) {
  process.stderr.write('usage: seed-example.ts <sc://address> <storage-root>\n');
  process.exit(64);
}

// Day 1: order 1 is created and paid, 2 and 4 created, 3 created then deleted.
// Day 2: order 2 ships, 4 is deleted, 5 is created.
const events = `
SELECT id, customer, status, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
       'acme' AS _lake_tenant, 'shop.public.orders' AS _lake_source,
       CAST(ts AS TIMESTAMP) + INTERVAL 5 MINUTES AS _lake_ingested_at, CAST(_snapshot_date AS DATE) AS _snapshot_date
FROM VALUES
  (1, 'alice', 'NEW',     '10.00', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (1, 'alice', 'PAID',    '10.00', '2026-07-05 09:00:00', 'u', '2026-07-05'),
  (2, 'bob',   'NEW',     '25.50', '2026-07-05 08:30:00', 'c', '2026-07-05'),
  (3, 'carol', 'NEW',     '7.25',  '2026-07-05 08:45:00', 'c', '2026-07-05'),
  (3, 'carol', 'NEW',     '7.25',  '2026-07-05 10:00:00', 'd', '2026-07-05'),
  (4, 'dave',  'NEW',     '99.99', '2026-07-05 11:00:00', 'c', '2026-07-05'),
  (2, 'bob',   'SHIPPED', '25.50', '2026-07-06 09:00:00', 'u', '2026-07-06'),
  (4, 'dave',  'NEW',     '99.99', '2026-07-06 09:30:00', 'd', '2026-07-06'),
  (5, 'erin',  'NEW',     '42.00', '2026-07-06 10:00:00', 'c', '2026-07-06')
AS t(id, customer, status, amount, ts, op, _snapshot_date)`;

const spec = parseConnectionString(remote);
if (spec.kind !== 'remote') throw new Error('seed-example needs an sc:// address');
const client = SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-seed' });
try {
  const write = Query.sql(events).writeFiles(`${storageRoot.replace(/\/+$/, '')}/bronze/orders_cdc`, 'parquet', {
    mode: 'overwrite',
    partitionBy: ['_snapshot_date'],
    options: { partitionOverwriteMode: 'dynamic' },
  });
  await client.execute(compileCommandPlan(write, { reveal: true }));
  process.stderr.write(`seeded 9 CDC events into ${storageRoot}/bronze/orders_cdc\n`);
} finally {
  await client.releaseSession().catch(() => undefined);
  client.close();
}
