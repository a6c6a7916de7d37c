import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError, DataError } from '../../../src/core/errors.js';
import { formatPlan, planAccess } from '../../../src/app/plan-view.js';
import { beyond } from '../../../src/jobs/ops/reconcile.js';
import type { QueryStep } from '../../../src/jobs/steps.js';
import { tempFiles } from '../../support/files.js';

const SECRET = 'pg-secret-2718';
const header = `
job    { template = "reconcile", schema-version = 1, name = "acme-reconcile" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
`;
const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
jdbc.connections.crm { url = "jdbc:postgresql://db.example:5432/crm", user = "app", password { env = "CRM_PASSWORD" }, driver = "org.postgresql.Driver" }
`;
const base = `
table   { layer = silver, table = orders }
source  { connection = crm, table = "public.orders" }
compare { date-column = order_date, sums = [amount, qty] }
`;

async function load(body: string) {
  const dir = tempFiles({ 'job.conf': `${header}\n${body}`, 'platform.conf': platform });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env: { CRM_PASSWORD: SECRET }, runId: 'r' });
}

async function issues(body: string): Promise<string[]> {
  const err = await load(body).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
}

type Row = Record<string, unknown>;
const day = (d: string, t: [number, string | null, string | null], s: [number, string | null, string | null]): Row => ({
  day: d,
  t_rows: t[0],
  s_rows: s[0],
  t_sum_0: t[1],
  s_sum_0: s[1],
  t_sum_1: t[2],
  s_sum_1: s[2],
});

async function judged(rows: Row[], extra = '') {
  const job = await load(base + extra);
  const [step] = job.plan.steps as QueryStep<string>[];
  return step!.interpret(rows as never);
}

describe('reconcile plan', () => {
  it('is one query over the table and the JDBC source, writing nothing; the password never in the plan', async () => {
    const job = await load(base);
    expect(job.plan.steps.map((s) => s.id)).toEqual(['compare-days']);
    const access = planAccess(job.plan);
    expect(access.writes).toEqual([]);
    expect(access.reads).toEqual([
      expect.objectContaining({ kind: 'table', table: 'lake.acme_silver.orders' }),
      expect.objectContaining({ kind: 'jdbc', table: 'crm.public.orders' }),
    ]);
    const text = formatPlan(job.plan);
    expect(text).not.toContain(SECRET);
    expect(text).toContain('Join FULL USING (day)');
  });

  it('refuses a literal password, a range backwards, a sum listed twice, and an unknown key, all at once', async () => {
    expect(
      await issues(`
table   { layer = silver, table = orders, colour = red }
source  { url = "jdbc:postgresql://db.example/crm", table = orders, password = "hunter22" }
compare { date-column = d, sums = [a, a], from = "2026-07-05", to = "2026-07-01" }
`),
    ).toEqual([
      'table.colour: unknown key (known: layer, table, catalog, format, where)',
      expect.stringMatching(/^source\.password: a literal password is not accepted/),
      'compare.to: is before compare.from (2026-07-05)',
      'compare.sums[1]: "a" appears twice',
    ]);
  });
});

describe('reconcile judgement', () => {
  it('passes equal days, with the comparison in the status', async () => {
    const e = await judged([day('2026-07-04', [2, '30.00', '3'], [2, '30.00', '3']), day('2026-07-05', [1, '5.50', '1'], [1, '5.50', '1'])]);
    expect(e.fail).toBeUndefined();
    expect(e.output).toMatchObject({
      table: 'lake.acme_silver.orders',
      committed: false,
      metrics: { daysCompared: 2, daysDiffering: 0, tableRows: 3, sourceRows: 3 },
      reconcile: { source: 'crm/public.orders', dateColumn: 'order_date', daysDiffering: 0, days: [] },
    });
    expect(e.output!.expectations!.map((x) => [x.name, x.outcome, x.column])).toEqual([
      ['reconcile.rows', 'passed', undefined],
      ['reconcile.sum.amount', 'passed', 'amount'],
      ['reconcile.sum.qty', 'passed', 'qty'],
    ]);
  });

  it('fails (65) with the days that differ: a row moved to the next day differs on both days; a day only one side has', async () => {
    const e = await judged([
      day('2026-07-04', [3, '30.00', '3'], [2, '20.00', '2']),
      day('2026-07-05', [1, '10.00', '1'], [2, '20.00', '2']),
      day('2026-07-06', [0, null, null], [1, '7.00', '1']),
      day('2026-07-07', [1, '1.00', '1'], [1, '1.00', '1']),
    ]);
    expect(e.fail).toBeInstanceOf(DataError);
    expect(e.fail!.exitCode).toBe(65);
    expect(e.fail!.message).toBe(
      '3 of 4 day(s) differ between lake.acme_silver.orders and crm/public.orders (table vs source): ' +
        '2026-07-04 (rows 3 vs 2, sum.amount 30.00 vs 20.00, sum.qty 3 vs 2); 2026-07-05 (rows 1 vs 2, sum.amount 10.00 vs 20.00, sum.qty 1 vs 2); ' +
        '2026-07-06 (rows 0 vs 1, sum.amount null vs 7.00, sum.qty null vs 1)',
    );
    expect(e.output!.reconcile!.days.map((d) => d.day)).toEqual(['2026-07-04', '2026-07-05', '2026-07-06']);
    expect(e.output!.metrics).toMatchObject({ daysCompared: 4, daysDiffering: 3, tableRows: 5, sourceRows: 6 });
  });

  it('names the first 10 of many differing days and counts them all', async () => {
    const rows = Array.from({ length: 14 }, (_, i) => day(`2026-07-${String(i + 1).padStart(2, '0')}`, [1, '1', '1'], [2, '1', '1']));
    const e = await judged(rows);
    expect(e.fail!.message).toMatch(/^14 of 14 day\(s\) differ .*\(table vs source\); the first 10: 2026-07-01 /);
    expect(e.fail!.message).not.toContain('2026-07-11');
    expect(e.output!.reconcile!.days).toHaveLength(10);
    expect(e.output!.reconcile!.daysDiffering).toBe(14);
  });

  it('accepts differences within the tolerance: above both the absolute and the relative bound differs', async () => {
    expect(beyond(100, 100, { absolute: 0, relative: 0 })).toBe(false);
    expect(beyond(101, 100, { absolute: 0, relative: 0 })).toBe(true);
    expect(beyond(101, 100, { absolute: 1, relative: 0 })).toBe(false);
    expect(beyond(101, 100, { absolute: 0, relative: 0.01 })).toBe(false);
    expect(beyond(102, 100, { absolute: 1, relative: 0.01 })).toBe(true);
    const e = await judged([day('2026-07-04', [100, '1000.004', '5'], [100, '1000.000', '5'])], 'tolerance { sums { absolute = 0.005 } }');
    expect(e.fail).toBeUndefined();
  });
});
