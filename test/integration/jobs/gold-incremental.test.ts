import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { deltaLastCommit, freshTenant, icebergSnapshotSummary, readDeltaTablesWithDeltaRs, readIcebergWithPyIceberg, useClient } from '../../support/stack.js';
import { type Outcome, runInProcess } from '../../support/in-process.js';
import { tempFiles } from '../../support/files.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * gold-publish with `source.read = incremental`: each run finds the dates of the rows the silver
 * commits since gold's position added, changed or removed (Iceberg's changelog, Delta's change data
 * feed: a row moved to another date touches both), recomputes those dates from all of silver and
 * replaces them in one commit that carries the new position. After the runs gold, read by PyIceberg
 * or delta-rs, is compared with an oracle: the same aggregate computed from scratch over silver.
 */
const RUNS_TIMEOUT = 900_000;

let client: SparkConnectClient;
useClient((c) => (client = c));

const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));
async function sparkRows(text: string): Promise<Record<string, unknown>[]> {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? arrowRows(r.table) : [];
}

type Order = [id: number, customer: string, day: string, amount: number];
type GoldRow = { sale_date: string; customer: string; orders: number; revenue: number };

const TRANSFORM = `SELECT order_date AS sale_date, customer, count(*) AS orders, CAST(sum(amount) AS BIGINT) AS revenue FROM silver.orders GROUP BY order_date, customer`;

/** The whole gold from scratch: silver's rows grouped by date and customer. */
function oracle(silver: Record<string, unknown>[]): GoldRow[] {
  const by = new Map<string, GoldRow>();
  for (const r of silver) {
    const day = isoDay(r.order_date);
    const k = `${day}|${String(r.customer)}`;
    const g = by.get(k) ?? { sale_date: day, customer: String(r.customer), orders: 0, revenue: 0 };
    g.orders += 1;
    g.revenue += Number(r.amount);
    by.set(k, g);
  }
  return sorted([...by.values()]);
}

const isoDay = (v: unknown) => String(v).slice(0, 10);
const sorted = (rows: GoldRow[]) => rows.sort((a, b) => a.sale_date.localeCompare(b.sale_date) || a.customer.localeCompare(b.customer));
const goldRows = (rows: Record<string, unknown>[]) =>
  sorted(rows.map((r) => ({ sale_date: isoDay(r.sale_date), customer: String(r.customer), orders: Number(r.orders), revenue: Number(r.revenue) })));

describe.each(['iceberg', 'delta'] as const)('gold-publish, source.read = incremental, %s silver and gold', (format) => {
  const tenant = freshTenant();
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const SILVER = `${catalog}.${tenant.id}_silver.orders`;
  const GOLD = `${catalog}.${tenant.id}_gold.daily_sales`;
  const key = `read.${SILVER}`;
  let dir: string;

  const config = (expectations = '') => `
job    { template = "gold-publish", schema-version = 1, name = "it-gold-incremental" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "${TRANSFORM}" }
target { table = "daily_sales", catalog = "${catalog}", grain = ["sale_date", "customer"], mode = replace-range, range-column = "sale_date" }
source { table = "silver.orders", date-column = order_date, read = incremental }
${expectations}
`;
  const run = (opts: { beforeStep?: (s: { id: string }) => Promise<void>; overrides?: string[]; conf?: string } = {}): Promise<Outcome> =>
    runInProcess(
      {
        configFile: join(dir, opts.conf ?? 'job.conf'),
        envFile: join(dir, 'platform.conf'),
        overrides: opts.overrides ?? [],
        env: {},
        runId: `it-goldinc-${Math.random().toString(36).slice(2, 8)}`,
      },
      opts.beforeStep,
    );
  const out = (o: Outcome) => o.report.outputs.find((x) => x.table === GOLD);
  /**
   * Gold as the second engine reads it, and the oracle: the aggregate from scratch over silver's rows
   * (Iceberg: the fixture as the server reads it, which saves a Python start; Delta: delta-rs reads both at once).
   */
  async function readBack(): Promise<{ gold: GoldRow[]; expected: GoldRow[] }> {
    if (format === 'iceberg')
      return {
        gold: goldRows(readIcebergWithPyIceberg(`${tenant.id}_gold`, 'daily_sales')),
        expected: oracle(await sparkRows(`SELECT order_date, customer, amount FROM ${SILVER}`)),
      };
    const [s, g] = [`${tenant.root}/silver/orders`, `${tenant.root}/gold/daily_sales`];
    const t = readDeltaTablesWithDeltaRs([s, g]);
    return { gold: goldRows(t[g] ?? []), expected: oracle(t[s] ?? []) };
  }
  const expectOracle = async () => {
    const { gold, expected } = await readBack();
    expect(gold).toEqual(expected);
    return gold;
  };
  const position = () =>
    format === 'iceberg'
      ? icebergSnapshotSummary(`${tenant.id}_gold`, 'daily_sales')[`lakehouse-jobs.${key}`]
      : (JSON.parse(String(deltaLastCommit(`${tenant.root}/gold/daily_sales`).userMetadata)) as { 'lakehouse-jobs': Record<string, string> })['lakehouse-jobs'][
          key
        ];
  const head = async (): Promise<string> => {
    const q = format === 'iceberg' ? `SELECT CAST(snapshot_id AS STRING) AS v FROM ${SILVER}.refs WHERE name = 'main'` : `DESCRIBE HISTORY ${SILVER} LIMIT 1`;
    const [row] = await sparkRows(q);
    return String(row!.v ?? row!.version);
  };
  const insert = (...orders: Order[]) =>
    sql(`INSERT INTO ${SILVER} VALUES ${orders.map(([id, c, d, a]) => `(${id}, '${c}', DATE'2026-07-${d}', ${a}, 'n')`).join(', ')}`);

  beforeAll(async () => {
    dir = tempFiles({
      'job.conf': config(),
      'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
    });
    await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${tenant.id}_silver`);
    // A silver table as cdc-silver-merge leaves it: rows changed in place by MERGE, UPDATE and DELETE (Delta: with its change feed).
    await sql(
      `CREATE TABLE ${SILVER} (id INT, customer STRING, order_date DATE, amount INT, note STRING) USING ${format} LOCATION '${tenant.root}/silver/orders' TBLPROPERTIES (${format === 'iceberg' ? `'format-version' = '2'` : `'delta.enableChangeDataFeed' = 'true'`})`,
    );
  });

  let last: string;

  it(
    'a first run publishes every date and records the position; nothing new is 99; an update that moves a row to another date and a delete replace exactly the dates they touch',
    async () => {
      await insert([1, 'a', '01', 10], [2, 'b', '01', 20], [3, 'a', '02', 30], [4, 'b', '03', 40], [5, 'a', '04', 50]);
      const s1 = await head();
      const first = await run();
      expect(first.code, first.error?.message).toBe(0);
      expect(out(first)).toMatchObject({ read: { source: SILVER, mode: 'full', to: s1, reason: 'first run' }, metrics: { rows: 5, written: 5, dates: 4 } });
      expect(await expectOracle()).toHaveLength(5);
      expect(position()).toBe(s1);
      const again = await run();
      expect(again.code).toBe(0);
      expect(again.report.skipped).toMatch(/^nothing new in/);

      // A CDC merge: order 1 moves from 07-01 to 07-05, order 3 is deleted (07-02), order 4 changes amount (07-03); 07-04 is untouched.
      await sql(
        `MERGE INTO ${SILVER} t USING (SELECT * FROM VALUES (1, 'a', DATE'2026-07-05', 10, 'u', false), (3, 'a', DATE'2026-07-02', 30, 'd', true), (4, 'b', DATE'2026-07-03', 45, 'u', false) AS s(id, customer, order_date, amount, note, del)) s ON t.id = s.id WHEN MATCHED AND s.del THEN DELETE WHEN MATCHED THEN UPDATE SET customer = s.customer, order_date = s.order_date, amount = s.amount, note = s.note`,
      );
      const s2 = await head();
      const second = await run();
      expect(second.code, second.error?.message).toBe(0);
      expect(out(second)).toMatchObject({ read: { source: SILVER, mode: 'incremental', from: s1, to: s2 }, metrics: { dates: 4 } });
      // Recomputed: 07-01 (b only now), 07-02 (empty now), 07-03, 07-05; 07-04's row is not rewritten.
      expect(out(second)?.metrics).toMatchObject({ rows: 3, written: 3 });
      const gold = await expectOracle();
      expect(gold.find((r) => r.sale_date === '2026-07-02')).toBeUndefined();
      expect(position()).toBe(s2);
      if (format === 'iceberg') expect(icebergSnapshotSummary(`${tenant.id}_gold`, 'daily_sales')['changed-partition-count']).toBe('4');
      last = s2;
    },
    RUNS_TIMEOUT,
  );

  it(
    'a late event into an old date recomputes that date alone; a change that leaves the aggregate as it was commits the position alone',
    async () => {
      await insert([6, 'a', '04', 5]);
      const s3 = await head();
      const late = await run();
      expect(late.code, late.error?.message).toBe(0);
      expect(out(late)).toMatchObject({ read: { mode: 'incremental', from: last, to: s3 }, metrics: { dates: 1, rows: 1, written: 1 } });
      await expectOracle();
      expect(position()).toBe(s3);

      // A note changes: the dates it touches are recomputed and come out equal, so nothing is replaced.
      await sql(`UPDATE ${SILVER} SET note = 'edited' WHERE id = 2`);
      const s4 = await head();
      const noop = await run();
      expect(noop.code, noop.error?.message).toBe(0);
      expect(noop.steps).not.toContain('publish');
      expect(noop.steps).toContain('record-position');
      expect(out(noop)).toMatchObject({ committed: false, read: { mode: 'incremental', from: s3, to: s4 }, metrics: { dates: 1, written: 1 } });
      expect(position()).toBe(s4);
      await expectOracle();
      last = s4;
    },
    RUNS_TIMEOUT,
  );

  // The kill, the quality gate and the lost position: proved once, on Iceberg (each run costs server time).
  if (format !== 'iceberg') return;

  it(
    'a run killed between reading the changes and its commit leaves the position; its retry replaces the same dates once (no double count)',
    async () => {
      await insert([7, 'b', '03', 7], [8, 'c', '06', 8]);
      const s5 = await head();
      const died = await run({
        beforeStep: async (s) => {
          if (s.id === 'publish') throw new Error('killed before the publish');
        },
      });
      expect(died.code).not.toBe(0);
      expect(died.steps).toContain('read-touched-dates');
      expect(position()).toBe(last);
      const retry = await run();
      expect(retry.code, retry.error?.message).toBe(0);
      expect(out(retry)).toMatchObject({ read: { mode: 'incremental', from: last, to: s5 }, metrics: { dates: 2 } });
      await expectOracle();
      last = s5;
    },
    RUNS_TIMEOUT,
  );

  it(
    "the expectations judge the recomputed dates' rows: a failing one stops the run before anything is written (65), its position stays",
    async () => {
      writeFileSync(join(dir, 'gated.conf'), config(`expectations = [{ name = "revenue_positive", type = expression, expr = "revenue > 0", action = fail }]`));
      await insert([9, 'd', '07', -3]);
      const before = (await readBack()).gold;
      const failed = await run({ conf: 'gated.conf' });
      expect(failed.code).toBe(65);
      expect(failed.error?.code).toBe('EXPECTATION_FAILED');
      expect(out(failed)?.expectations?.[0]).toMatchObject({ name: 'revenue_positive', outcome: 'failed', failedRows: 1 });
      expect((await readBack()).gold).toEqual(before);
      expect(position()).toBe(last);
      await sql(`UPDATE ${SILVER} SET amount = 3 WHERE id = 9`);
      const fixed = await run({ conf: 'gated.conf' });
      expect(fixed.code, fixed.error?.message).toBe(0);
      expect(out(fixed)).toMatchObject({ metrics: { dates: 1, rows: 1 } });
      await expectOracle();
      last = await head();
    },
    RUNS_TIMEOUT,
  );

  it(
    'a compaction of silver carries no change (99); a consumed snapshot silver no longer holds is 65 naming both; source.read=full recomputes every date',
    async () => {
      await sql(`CALL lake.system.rewrite_data_files(table => '${tenant.id}_silver.orders', options => map('min-input-files', '2'))`);
      const compacted = await run();
      expect(compacted.code, compacted.error?.message).toBe(0);
      expect(compacted.report.skipped).toMatch(/only rewrites \(compaction\) since/);

      await insert([10, 'a', '01', 1]);
      await insert([11, 'e', '08', 2]);
      const now = new Date(Date.now() + 1000).toISOString().replace('T', ' ').replace('Z', '');
      await sql(`CALL lake.system.expire_snapshots(table => '${tenant.id}_silver.orders', older_than => TIMESTAMP '${now}', retain_last => 1)`);
      const lost = await run();
      expect(lost.code).toBe(65);
      expect(lost.error?.code).toBe('SOURCE_POSITION_LOST');
      expect(lost.error?.message).toContain(`snapshot ${last}`);
      expect(lost.error?.message).toContain(SILVER);
      const full = await run({ overrides: ['source.read=full'] });
      expect(full.code, full.error?.message).toBe(0);
      expect(out(full)).toMatchObject({ read: { mode: 'full', reason: 'source.read = full' } });
      await expectOracle();
    },
    RUNS_TIMEOUT,
  );

  it(
    "a merge-on-read silver: Iceberg's changelog cannot read delete files, so the run recomputes every date, saying why (it was 70); then nothing new is 99",
    async () => {
      await insert([12, 'f', '09', 12]);
      expect((await run()).code).toBe(0);
      await sql(
        `ALTER TABLE ${SILVER} SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read', 'write.delete.mode' = 'merge-on-read')`,
      );
      await sql(`UPDATE ${SILVER} SET amount = 13, order_date = DATE'2026-07-10' WHERE id = 12`);
      const s = await head();
      const o = await run();
      expect(o.code, o.error?.message).toBe(0);
      expect(out(o)).toMatchObject({ read: { source: SILVER, mode: 'full', to: s, reason: expect.stringContaining('holds delete files (merge-on-read)') } });
      await expectOracle();
      expect((await run()).report.skipped).toMatch(/^nothing new in/);
    },
    RUNS_TIMEOUT,
  );
});
