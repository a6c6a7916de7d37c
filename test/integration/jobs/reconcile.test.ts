import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { openLineageProblems } from '../../support/openlineage.js';
import { type Postgres, startPostgres } from '../../support/postgres.js';
import { connect, freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg, remote, runCli } from '../../support/stack.js';
import { testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'postgres', 'py-tools');

/**
 * reconcile against the real PostgreSQL: an Iceberg and a Delta table holding what a PostgreSQL
 * table holds pass; the same tables against a source in which one order moved to the next day fail
 * with 65 naming exactly those two days, both sides' counts and sums in the status (the table's
 * read back with PyIceberg and delta-rs, the source's with psql); tolerances; the password, given by
 * reference, in no output; the data-quality assertions of its lineage; a missing table 66.
 */
const tenant = freshTenant();
const schema = `rc_${randomBytes(4).toString('hex')}`;
let pg: Postgres;
let dir: string;
let client: SparkConnectClient;
const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));

/** Orders over three days: (id, day, amount). */
const ORDERS: [number, string, string][] = [
  [1, '2026-07-03', '10.00'],
  [2, '2026-07-03', '5.25'],
  [3, '2026-07-04', '7.50'],
  [4, '2026-07-04', '100.00'],
  [5, '2026-07-04', '0.01'],
  [6, '2026-07-05', '42.00'],
];
/** The same orders with order 4 a day later: 2026-07-04 and 2026-07-05 differ. */
const SHIFTED = ORDERS.map(([id, day, amount]): [number, string, string] => [id, id === 4 ? '2026-07-05' : day, amount]);
const values = (rows: [number, string, string][]) => rows.map(([id, day, amount]) => `(${id}, DATE '${day}', ${amount})`).join(', ');

const platform = (lineage: string) => `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc.connections.shop {
  url = "${pg.url}"
  user = "${pg.user}"
  password { env = "PG_TEST_PASSWORD" }
  driver = "org.postgresql.Driver"
}
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
lineage { transports = [{ type = file, path = "${lineage}" }] }
`;

async function reconcile(table: string, source: string, extra = '') {
  const name = `job-${randomBytes(3).toString('hex')}`;
  const lineage = join(dir, `${name}.lineage.jsonl`);
  writeFileSync(join(dir, `${name}.platform.conf`), platform(lineage));
  writeFileSync(
    join(dir, `${name}.conf`),
    `
job    { template = "reconcile", schema-version = 1, name = "it-reconcile" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
table   ${table}
source  { connection = "shop", table = "${schema}.${source}" }
compare { date-column = order_date, sums = [amount] }
${extra}
`,
  );
  const statusFile = join(dir, `${name}.status.json`);
  const r = await runCli(
    ['--config', join(dir, `${name}.conf`), '--env', join(dir, `${name}.platform.conf`), '--remote', remote(), '--status-file', statusFile],
    { PG_TEST_PASSWORD: pg.password },
  );
  for (const text of [r.stdout, r.stderr, readFileSync(statusFile, 'utf8')]) expect(text.includes(pg.password), 'the password leaked').toBe(false);
  const events = () =>
    readFileSync(lineage, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  return { ...r, status: JSON.parse(readFileSync(statusFile, 'utf8')), events };
}

const ICEBERG = `{ layer = silver, table = orders }`;
const DELTA = `{ layer = silver, table = orders_delta, catalog = spark_catalog, format = delta }`;

beforeAll(async () => {
  dir = tempFiles({});
  pg = startPostgres();
  pg.psql(`
CREATE SCHEMA ${schema};
CREATE TABLE ${schema}.orders (id bigint, order_date date, amount numeric(12,2));
INSERT INTO ${schema}.orders VALUES ${values(ORDERS)};
CREATE TABLE ${schema}.orders_shifted (id bigint, order_date date, amount numeric(12,2));
INSERT INTO ${schema}.orders_shifted VALUES ${values(SHIFTED)};
`);
  client = connect();
  for (const [catalog, format, table] of [
    ['lake', 'iceberg', 'orders'],
    ['spark_catalog', 'delta', 'orders_delta'],
  ] as const) {
    await sql(`CREATE NAMESPACE IF NOT EXISTS \`${catalog}\`.\`${tenant.id}_silver\``);
    await sql(
      `CREATE TABLE \`${catalog}\`.\`${tenant.id}_silver\`.\`${table}\` USING ${format} LOCATION '${tenant.root}/silver/${table}' AS SELECT CAST(id AS bigint) AS id, order_date, CAST(amount AS decimal(12,2)) AS amount FROM VALUES ${values(ORDERS)} AS t(id, order_date, amount)`,
    );
  }
}, 300_000);
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
  pg?.psql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
});

/** Per day: rows and the sum of amount, as the second engine (or psql) reads them. */
function perDay(rows: { order_date: unknown; amount: unknown }[]): Record<string, { rows: number; amount: number }> {
  const out: Record<string, { rows: number; amount: number }> = {};
  for (const r of rows) {
    const d = String(r.order_date).slice(0, 10);
    out[d] ??= { rows: 0, amount: 0 };
    out[d].rows++;
    out[d].amount = Math.round((out[d].amount + Number(r.amount)) * 100) / 100;
  }
  return out;
}
const pgPerDay = (table: string) =>
  Object.fromEntries(
    pg
      .psql(`SELECT order_date, count(*), sum(amount) FROM ${schema}.${table} GROUP BY order_date ORDER BY order_date`)
      .split('\n')
      .map((l) => l.split('|'))
      .map(([d, n, s]) => [d, { rows: Number(n), amount: Number(s) }]),
  );

describe('reconcile against PostgreSQL', () => {
  it('passes an Iceberg and a Delta table that hold what the source holds, the status counting what both engines read', async () => {
    const expected = pgPerDay('orders');
    expect(perDay(readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders') as never)).toEqual(expected);
    expect(perDay(readDeltaWithDeltaRs(`${tenant.root}/silver/orders_delta`) as never)).toEqual(expected);
    for (const [table, name] of [
      [ICEBERG, `lake.${tenant.id}_silver.orders`],
      [DELTA, `spark_catalog.${tenant.id}_silver.orders_delta`],
    ] as const) {
      const r = await reconcile(table, 'orders');
      expect(r.code, r.stderr).toBe(0);
      expect(r.status.outputs).toEqual([
        expect.objectContaining({
          table: name,
          committed: false,
          metrics: { daysCompared: 3, daysDiffering: 0, tableRows: 6, sourceRows: 6 },
          reconcile: { source: `shop/${schema}.orders`, dateColumn: 'order_date', daysDiffering: 0, days: [] },
        }),
      ]);
      expect(r.status.outputs[0].expectations.map((e: any) => [e.name, e.outcome])).toEqual([
        // eslint-disable-line @typescript-eslint/no-explicit-any
        ['reconcile.rows', 'passed'],
        ['reconcile.sum.amount', 'passed'],
      ]);
    }
  }, 240_000);

  it('fails (65) on a source where one order moved a day: exactly those two days, with both sides; on Iceberg and on Delta', async () => {
    const source = pgPerDay('orders_shifted');
    for (const table of [ICEBERG, DELTA]) {
      const r = await reconcile(table, 'orders_shifted');
      expect(r.code, r.stderr).toBe(65);
      expect(r.status.error).toMatchObject({ code: 'RECONCILE_MISMATCH', category: 'data' });
      expect(r.status.error.message).toMatch(
        /^2 of 3 day\(s\) differ between \S+ and shop\/\S+\.orders_shifted \(table vs source\): 2026-07-04 \(rows 3 vs 2, sum\.amount 107\.51 vs 7\.51\); 2026-07-05 \(rows 1 vs 2, sum\.amount 42\.00 vs 142\.00\)$/,
      );
      const out = r.status.outputs[0];
      expect(out.metrics).toEqual({ daysCompared: 3, daysDiffering: 2, tableRows: 6, sourceRows: 6 });
      expect(out.reconcile.days).toEqual([
        { day: '2026-07-04', table: { rows: 3, sums: { amount: '107.51' } }, source: { rows: 2, sums: { amount: '7.51' } }, differs: ['rows', 'sum.amount'] },
        { day: '2026-07-05', table: { rows: 1, sums: { amount: '42.00' } }, source: { rows: 2, sums: { amount: '142.00' } }, differs: ['rows', 'sum.amount'] },
      ]);
      // The source's side is what PostgreSQL itself counts.
      for (const d of out.reconcile.days) expect({ rows: d.source.rows, amount: Number(d.source.sums.amount) }).toEqual(source[d.day]);
      // The FAIL event carries the checks as data-quality assertions on the table read.
      const fail = r.events().at(-1);
      expect(fail.eventType).toBe('FAIL');
      expect(openLineageProblems(fail)).toEqual([]);
      expect(fail.outputs).toEqual([]);
      const checked = fail.inputs.find((i: any) => i.inputFacets); // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(checked.inputFacets.dataQualityAssertions.assertions).toEqual([
        { assertion: 'reconcile.rows', success: false },
        { assertion: 'reconcile.sum.amount', success: false, column: 'amount' },
      ]);
      expect(fail.inputs.map((i: any) => i.namespace)).toContain(`postgres://127.0.0.1:${new URL(pg.url.slice(5)).port}`); // eslint-disable-line @typescript-eslint/no-explicit-any
    }
  }, 240_000);

  it('accepts the shifted day within a tolerance, and ends with 66 for a table that does not exist', async () => {
    // 1 row and 100.00 apart on each of the two days: an absolute tolerance of 1 row and 100 passes them.
    const within = await reconcile(ICEBERG, 'orders_shifted', 'tolerance { rows { absolute = 1 }, sums { absolute = 100 } }');
    expect(within.code, within.stderr).toBe(0);
    expect(within.status.outputs[0].metrics.daysDiffering).toBe(0);
    const missing = await reconcile(`{ layer = gold, table = nowhere }`, 'orders');
    expect(missing.code, missing.stderr).toBe(66);
    expect(missing.status.error.message).toBe(`table: lake.${tenant.id}_gold.nowhere does not exist`);
  }, 240_000);
});
