import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError, DataError } from '../../../src/core/errors.js';
import { planAccess } from '../../../src/app/plan-view.js';
import { age } from '../../../src/jobs/ops/freshness-check.js';
import type { QueryStep } from '../../../src/jobs/steps.js';
import { factsOf } from '../../support/facts.js';
import { tempFiles } from '../../support/files.js';

const header = `
job    { template = "freshness-check", schema-version = 1, name = "acme-freshness" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
`;
const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

async function load(tables: string) {
  const dir = tempFiles({ 'job.conf': `${header}\ntables = [ ${tables} ]`, 'platform.conf': platform });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env: {}, runId: 'test-run' });
}

async function issues(tables: string): Promise<string[]> {
  const err = await load(tables).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
}

/** `latest` as the step's query returns it: microseconds since the epoch, as text, `secondsAgo` before now. */
const ago = (secondsAgo: number) => String(BigInt(Date.now() - secondsAgo * 1000) * 1000n);

const ICEBERG = `{ layer = silver, table = orders, max-age = 6h }`;
const DELTA = `{ layer = silver, table = orders_delta, catalog = spark_catalog, max-age = "90 minutes" }`;
const EVENT = `{ layer = bronze, table = events, event-time = _lake_ingested_at, max-age = "2 days" }`;

describe('freshness-check config', () => {
  it('takes durations with their unit, and refuses a bare number, an unknown unit and a zero', async () => {
    const job = await load(`${ICEBERG}, ${DELTA}, ${EVENT}`);
    expect(job.plan.steps.map((s) => s.id)).toEqual(['measure-0', 'measure-1', 'measure-2']);
    expect(
      await issues(
        `{ layer = silver, table = a, max-age = 30 }, { layer = silver, table = b, max-age = "3 fortnights" }, { layer = silver, table = c, max-age = "0s" }`,
      ),
    ).toEqual([
      expect.stringMatching(/^tables\[0\]\.max-age: .*string/),
      expect.stringMatching(/^tables\[1\]\.max-age: has the unknown unit "fortnights"/),
      'tables[2].max-age: must be between 1 second and 3650 days (it is 0s)',
    ]);
  });

  it('refuses a table listed twice, a format its catalog does not hold, and an unknown key', async () => {
    expect(await issues(`${ICEBERG}, { layer = silver, table = orders, max-age = 1h }`)).toEqual(['tables[1]: checks the same table as tables[0]']);
    expect(await issues(`{ layer = silver, table = orders, format = delta, max-age = 1h }`)).toEqual([
      'tables[0].format: is delta, but catalog "lake" holds iceberg tables',
    ]);
    expect((await issues(`{ layer = silver, table = orders, max-age = 1h, max-agee = 2h }`))[0]).toMatch(/^tables\[0\]/);
  });

  it('reads only the tables it checks (metadata, or the table itself for an event-time column) and writes nothing', async () => {
    const job = await load(`${ICEBERG}, ${DELTA}, ${EVENT}`);
    const access = planAccess(job.plan);
    expect(access.writes).toEqual([]);
    expect(access.reads.map((a) => (a.kind === 'table' ? a.table : a.kind)).sort()).toEqual([
      'lake.acme_bronze.events',
      'lake.acme_silver.orders',
      'spark_catalog.acme_silver.orders_delta',
    ]);
    expect(job.plan.steps.every((s) => s.kind === 'query')).toBe(true);
  });
});

describe('freshness-check judgement', () => {
  async function judged(rows: Record<string, unknown>[][]) {
    const job = await load(`${ICEBERG}, ${DELTA}, ${EVENT}`);
    const steps = job.plan.steps as QueryStep<'latest' | 'empty'>[];
    const facts = factsOf(job.plan.steps, Object.fromEntries(steps.slice(0, -1).map((s, i) => [s.id, rows[i]!])));
    const effects = steps.map((s, i) => s.interpret(rows[i] as never, facts));
    return effects;
  }

  it('passes fresh tables, with their ages and limits in the outputs', async () => {
    const effects = await judged([[{ latest: ago(60), empty: false }], [{ latest: ago(120), empty: false }], [{ latest: ago(3600), empty: false }]]);
    expect(effects.map((e) => e.fail)).toEqual([undefined, undefined, undefined]);
    const [a, , c] = effects.map((e) => e.output!);
    expect(a).toMatchObject({ table: 'lake.acme_silver.orders', format: 'iceberg', committed: false, metrics: { maxAgeSeconds: 21_600 } });
    expect(a!.metrics!.ageSeconds).toBeGreaterThanOrEqual(60);
    expect(a!.metrics!.ageSeconds).toBeLessThan(70);
    expect(a!.expectations).toEqual([expect.objectContaining({ name: 'freshness', type: 'freshness', action: 'fail', outcome: 'passed', failedRows: 0 })]);
    expect(c!.expectations![0]).toMatchObject({ name: 'freshness._lake_ingested_at', observed: { measure: 'event-time', maxAgeSeconds: 172_800 } });
  });

  it('fails (65) once, naming every stale table with its age and limit, and an empty table or one with no commit as stale', async () => {
    const effects = await judged([[{ latest: ago(7 * 3600), empty: false }], [{ latest: null, empty: false }], [{ latest: ago(10), empty: true }]]);
    expect(effects.slice(0, 2).map((e) => e.fail)).toEqual([undefined, undefined]);
    const fail = effects[2]!.fail;
    expect(fail).toBeInstanceOf(DataError);
    expect(fail!.exitCode).toBe(65);
    expect(fail!.message).toMatch(/^2 of 3 table\(s\) are stale: /);
    expect(fail!.message).toContain('lake.acme_silver.orders: the latest commit (');
    expect(fail!.message).toMatch(/is 7h 0m old, older than its limit of 6h/);
    expect(fail!.message).toContain('spark_catalog.acme_silver.orders_delta has no commit (limit 90 minutes)');
    // An event-time check judges the newest value, which there is: not empty-stale.
    expect(fail!.message).not.toContain('events');
    expect(effects[1]!.output!.expectations![0]).toMatchObject({ outcome: 'failed', observed: { latest: null, ageSeconds: null } });
    expect(effects[1]!.output!.metrics).toEqual({ maxAgeSeconds: 5400 });

    const empty = await judged([[{ latest: ago(10), empty: true }], [{ latest: ago(10), empty: false }], [{ latest: null, empty: true }]]);
    expect(empty[2]!.fail!.message).toContain('lake.acme_silver.orders is empty: its latest commit (');
    expect(empty[2]!.fail!.message).toContain('lake.acme_bronze.events has no rows (limit 2 days)');
  });

  it('writes ages as a person reads them', () => {
    expect([age(42), age(125), age(7 * 3600 + 300), age(3 * 86_400 + 4 * 3600 + 5)]).toEqual(['42s', '2m 5s', '7h 5m', '3d 4h']);
  });
});
