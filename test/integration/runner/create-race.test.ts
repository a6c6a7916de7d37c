import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, icebergRestUri, readDeltaTablesWithDeltaRs, readIcebergTablesWithPyIceberg } from '../../support/stack.js';
import { type Outcome, barrier, runInProcess } from '../../support/in-process.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'iceberg-rest', 'py-tools');

/**
 * Issue 29: the first runs of a new tenant's DAG start at once. Eight first runs of one tenant on an
 * empty lake (four cdc-silver-merge, four dv-hub; one namespace for all; two cdc runs on the same
 * target), each held before its create steps until all eight are there, then released together:
 * their namespace creates race, then their table creates (two of them for one table and one
 * tombstone table). Every run ends 0 or 75, never 70 or 78; the reruns of the 75s end 0; and every
 * table, read by a second engine, holds what the same runs one after the other produce.
 */
const DAY = '2026-05-01';
const CREATE_STEPS = ['create-namespace', 'create-table', 'create-tombstones'];

type Run = { template: 'cdc' | 'hub'; table: string };
const RUNS: Run[] = [
  { template: 'cdc', table: 'orders' },
  { template: 'cdc', table: 'orders' },
  { template: 'cdc', table: 'orders_b' },
  { template: 'cdc', table: 'orders_c' },
  { template: 'hub', table: 'hub_a' },
  { template: 'hub', table: 'hub_b' },
  { template: 'hub', table: 'hub_c' },
  { template: 'hub', table: 'hub_d' },
];
const TABLES = [...new Set(RUNS.map((r) => r.table))];

type Where = { catalog: 'lake' | 'rest' | 'spark_catalog'; format: 'iceberg' | 'delta' };
const WHERE: Where[] = [
  { catalog: 'lake', format: 'iceberg' },
  { catalog: 'rest', format: 'iceberg' },
  { catalog: 'spark_catalog', format: 'delta' },
];

let setupClient: SparkConnectClient;
const seconds: Record<string, number> = {};

function configOf(tenant: { id: string; root: string }, where: Where, r: Run): string {
  const head = `tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\ntarget { table = "${r.table}", catalog = "${where.catalog}", format = ${where.format} }\n`;
  return r.template === 'cdc'
    ? `job { template = "cdc-silver-merge", schema-version = 2, name = "it-race-${r.table}" }
${head}source { table = "orders_cdc", where = "_snapshot_date = DATE'${DAY}'" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }`
    : `job { template = "dv-hub", schema-version = 1, name = "it-race-${r.table}" }
${head}sources = [ { table = "customers", snapshot-date = "${DAY}", record-source = "crm.customers", business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }`;
}

/** A tenant of its own (so its namespaces are new), its bronze batches, its configs; runs in this process. */
async function lakeFor(where: Where) {
  const tenant = freshTenant();
  const dir = tempFiles({
    'platform.conf': `catalogs {
  lake { format = iceberg, default = true }
  rest { format = iceberg, type = rest, uri = "${icebergRestUri()}" }
  spark_catalog { format = delta }
}
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  const stamp = `'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${DAY}' AS _snapshot_date`;
  const orders = Array.from({ length: 12 }, (_, i) => `(${i + 1}, 1, 'c', 'v${i + 1}')`).concat(["(2, 5, 'd', 'gone')", "(3, 6, 'u', 'v3b')"]);
  const customers = Array.from({ length: 10 }, (_, i) => `('c${i}')`);
  for (const [table, sql] of [
    ['orders_cdc', `SELECT *, ${stamp} FROM VALUES ${orders.join(', ')} AS t(id, ts, op, v)`],
    ['customers', `SELECT *, ${stamp} FROM VALUES ${customers.join(', ')} AS t(customer)`],
  ] as const)
    await setupClient.execute(
      compileCommandPlan(testQuery(sql).writeFiles(`${tenant.root}/bronze/${table}`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), {
        reveal: true,
      }),
    );
  RUNS.forEach((r, i) => writeFileSync(join(dir, `run${i}.conf`), configOf(tenant, where, r)));
  const run = (i: number, beforeStep?: Parameters<typeof runInProcess>[1], log?: (line: string) => void): Promise<Outcome> =>
    runInProcess(
      {
        configFile: join(dir, `run${i}.conf`),
        envFile: join(dir, 'platform.conf'),
        overrides: [],
        env: {},
        runId: `it-race-${i}-${Math.random().toString(36).slice(2, 8)}`,
        logicalDate: DAY,
      },
      beforeStep,
      log,
    );
  /** Every table, read by a second engine in one process: what the runs decide (keys, values, hash keys), not the load times or run ids they stamp. */
  const readAll = (): Record<string, string[]> => {
    const rows =
      where.format === 'iceberg'
        ? readIcebergTablesWithPyIceberg(`${tenant.id}_silver`, TABLES, where.catalog)
        : Object.fromEntries(
            Object.entries(readDeltaTablesWithDeltaRs(TABLES.map((t) => `${tenant.root}/silver/${t}`))).map(([p, r]) => [p.split('/').pop()!, r]),
          );
    return Object.fromEntries(
      TABLES.map((t) => [
        t,
        (rows[t] ?? [])
          .map((r) => (t.startsWith('hub') ? `${String(r.customer)}:${String(r.hk_customer)}` : `${Number(r.id)}:${Number(r.ts)}:${String(r.v)}`))
          .sort(),
      ]),
    );
  };
  return { tenant, run, readAll };
}

/** What the eight runs leave behind when they run one after the other: the oracle. */
let oracle: Record<string, string[]>;

beforeAll(async () => {
  setupClient = connect();
  const started = performance.now();
  const lake = await lakeFor(WHERE[0]!);
  for (const i of RUNS.keys()) expect((await lake.run(i)).code, `sequential run ${i}`).toBe(0);
  oracle = lake.readAll();
  seconds.oracle = (performance.now() - started) / 1000;
  // The oracle itself is what the batches say: a deleted key gone, an update applied, each hub key once.
  expect(oracle.orders).toHaveLength(11);
  expect(oracle.orders).toContain('3:6:v3b');
  expect(oracle.hub_a).toHaveLength(10);
}, 600_000);
afterAll(async () => {
  process.stderr.write(`create-race: server seconds ${JSON.stringify(Object.fromEntries(Object.entries(seconds).map(([k, v]) => [k, Math.round(v)])))}\n`);
  await setupClient?.releaseSession().catch(() => undefined);
  setupClient?.close();
});

describe.each(WHERE)('eight first runs of one tenant at once on $catalog ($format)', (where) => {
  it("every run ends 0 or 75, the reruns of the 75s end 0, and the tables are the sequential runs' tables", async () => {
    const started = performance.now();
    const lake = await lakeFor(where);
    const gate = barrier(RUNS.length, CREATE_STEPS);
    // What the losers did: took the winner's table, or sent their namespace's create once more.
    const lost = { tables: 0, namespaces: 0 };
    const log = (line: string) => {
      if (line.includes('another run created the table first')) lost.tables++;
      if (line.includes('another run created it at the same moment')) lost.namespaces++;
    };
    const outcomes = await Promise.all(RUNS.map((_, i) => lake.run(i, gate.hold(i), log).finally(() => gate.end(i))));
    const codes = outcomes.map((o) => o.code);
    process.stderr.write(
      `create-race ${where.catalog}: ${outcomes.map((o, i) => `run ${i} ${RUNS[i]!.table}: ${o.code}${o.error?.code ? ` ${o.error.code}` : ''}`).join(', ')} after ${Math.round((performance.now() - started) / 1000)} s; lost races: ${lost.tables} tables, ${lost.namespaces} namespaces\n`,
    );
    // Every run got to its create steps, all at once.
    expect(gate.reached('create-namespace'), `codes ${codes.join(', ')}`).toBe(RUNS.length);
    for (const c of codes) expect([0, 75], `exit codes ${codes.join(', ')}`).toContain(c);
    // The race was run, not dodged: the two runs of one target both created it, and one lost.
    expect(lost.tables + outcomes.filter((o) => o.error?.code === 'CREATE_RACE').length, 'lost table creates').toBeGreaterThan(0);
    for (const [i, o] of outcomes.entries()) if (o.code === 75) expect((await lake.run(i)).code, `rerun of run ${i}`).toBe(0);
    expect(lake.readAll()).toEqual(oracle);
    seconds[where.catalog] = (performance.now() - started) / 1000;
  }, 900_000);
});
