import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tenantPolicyError, wrapTenantLogic } from '../../../src/spark/policy/index.js';
import { tempFiles } from '../../support/files.js';
import { freshTenant, releaseSession, remote, runCli, runJob, runSession, useClient } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * What one tenant's logic can make the shared server allocate is bounded. Values and generated rows
 * are bounded before anything runs: `repeat` of multi-GB strings, nested repeats, `LATERAL
 * range(10^12)` are refused (78). Rows the data makes a plan produce, and time, are bounded while it
 * runs by the server's watchdog: a cross join exploding is cancelled (65), a slow query past the
 * tenant's step limit is cancelled (75). After each the server still answers `ping`, and another
 * tenant's run succeeds.
 */
vi.setConfig({ testTimeout: 1_200_000 });

const greedy = freshTenant();
const slow = freshTenant();
const other = freshTenant();
let client: SparkConnectClient;
let dir: string;
useClient((c) => (client = c));
const sql = (text: string) => client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));

const gold = (t: { id: string; root: string }, name: string, transform: string, delta = false) => `
job    { template = "gold-publish", schema-version = 1, name = "${name}" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
transform { sql = "${transform}" }
target { table = "${name}", grain = ["k"], mode = full-refresh${delta ? ', catalog = "spark_catalog", format = delta' : ''} }`;

/** The reads of more than the greedy tenant's row-floor: grouped and windowed, from its Iceberg and its Delta table of 3M rows. */
const reads = (['lake', 'spark_catalog'] as const).flatMap((catalog) => [
  [
    `${catalog}-grouped`,
    'SELECT k % 7 AS k, max(sha2(concat(v, CAST(k AS STRING)), 512)) AS n FROM silver.big GROUP BY 1',
    catalog === 'spark_catalog',
  ] as const,
  [`${catalog}-windowed`, 'SELECT k, lag(v) OVER (PARTITION BY k % 1000 ORDER BY k) AS p FROM silver.big', catalog === 'spark_catalog'] as const,
]);

beforeAll(async () => {
  // Each tenant's silver table of 2,000 rows: small input, for a cross join to explode from.
  for (const t of [greedy, slow, other]) {
    await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${t.id}_silver`);
    await sql(
      `CREATE TABLE lake.${t.id}_silver.n USING iceberg LOCATION '${t.root}/silver/n' AS SELECT id AS k, repeat(CAST(id AS STRING), 20) AS v FROM range(2000)`,
    );
  }
  // The greedy tenant's tables of 3M rows, in two files each (two long scan tasks on two cores).
  for (const [catalog, format] of [
    ['lake', 'iceberg'],
    ['spark_catalog', 'delta'],
  ] as const) {
    await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${greedy.id}_silver`);
    await sql(
      `CREATE TABLE ${catalog}.${greedy.id}_silver.big USING ${format} LOCATION '${greedy.root}/silver/big-${format}' AS SELECT id AS k, CAST(id % 977 AS STRING) AS v FROM range(0, 3000000, 1, 2)`,
    );
  }
  dir = tempFiles({
    ...Object.fromEntries(reads.map(([name, transform, delta]) => [`${name}.conf`, gold(greedy, name.replace('-', '_'), transform, delta)])),
    // The greedy tenant may grow an operator's rows 10 times what it read, at least 100,000 rows;
    // the slow one may run an operation for 5 seconds (and grow its rows at will); the other has the platform's defaults.
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants {
  ${greedy.id} { storage-roots = ["${greedy.root}"], limits { row-growth = 10, row-floor = 100000 } }
  ${slow.id} { storage-roots = ["${slow.root}"], limits { step-seconds = 5, row-growth = 1000000000 } }
  ${other.id} { storage-roots = ["${other.root}"] }
}`,
    'explode.conf': gold(greedy, 'exploded', 'SELECT 1 AS k, count(*) AS n FROM silver.n a CROSS JOIN silver.n b CROSS JOIN silver.n c'),
    'generated.conf': gold(
      greedy,
      'generated',
      `SELECT 1 AS k, count(*) AS n FROM ${['a', 'b', 'c'].map((x) => `(SELECT explode(sequence(1, 2000)) AS ${x})`).join(' CROSS JOIN ')}`,
    ),
    'slow.conf': gold(
      slow,
      'slow',
      'SELECT 1 AS k, max(sha2(concat(a.v, b.v, c.v), 512)) AS n FROM silver.n a CROSS JOIN silver.n b CROSS JOIN (SELECT * FROM silver.n LIMIT 20) c',
    ),
    'small.conf': gold(other, 'small', 'SELECT k, v FROM silver.n WHERE k < 10'),
  });
});

/** Tenant logic of the tenant `other`, judged and run in a session bound to it: its rows, or the config's error. */
async function judged(text: string): Promise<Record<string, unknown>[] | Error> {
  const session = await runSession(platformSchema.parse({ catalogs: { lake: { format: 'iceberg' } } }), tenantContext(other.id, other.root));
  try {
    const r = await session.execute(compileRelationPlan(wrapTenantLogic(testQuery(text.replaceAll('{t}', other.id)).rel, ['transform.sql']), { reveal: true }));
    return r.table ? arrowRows(r.table) : [];
  } catch (x) {
    return tenantPolicyError(x) ?? (x as Error);
  } finally {
    await releaseSession(session);
  }
}

/** After each case: the shared server answers, and another tenant's run succeeds. */
async function serverStillServes(): Promise<void> {
  const ping = await runCli(['ping', '--remote', remote()]);
  expect(ping.code, ping.stdout).toBe(0);
  const r = await runJob(join(dir, 'small.conf'), join(dir, 'platform.conf'), ['--run-id', `it-small-${Date.now()}`]);
  expect(r.code, JSON.stringify(r.status.error)).toBe(0);
  expect(r.status.outputs[0].metrics.written).toBe(10);
}

describe('values and generated rows are bounded before anything runs', () => {
  it.each([
    [
      'repeat of a multi-GB string',
      `SELECT length(repeat(v, 2000000000)) AS n FROM lake.{t}_silver.n`,
      /repeat's count is 2000000000, more than the platform allows/,
    ],
    ['nested repeats multiplying', `SELECT length(repeat(repeat(v, 50), 50)) AS n FROM lake.{t}_silver.n`, /repeat can build a value of 2500 times the row/],
    ['lpad to two billion characters', `SELECT lpad(v, 2000000000, 'x') AS p FROM lake.{t}_silver.n`, /lpad's length is 2000000000/],
    ['a repeat count computed from the data', `SELECT repeat(v, k) AS r FROM lake.{t}_silver.n`, /repeat's count must be a literal/],
    ['array_repeat of a billion elements', `SELECT size(array_repeat(v, 1000000000)) AS n FROM lake.{t}_silver.n`, /array_repeat's count is 1000000000/],
    ['sequence of a trillion elements', `SELECT size(sequence(1, 1000000000000)) AS n`, /sequence builds 1000000000000 elements/],
    ['LATERAL range(10^12)', `SELECT count(*) AS n FROM lake.{t}_silver.n, LATERAL range(1000000000000)`, /range\(…\) produces 1000000000000 rows/],
    ['format_string with a gigantic width', `SELECT format_string('%2000000000s', v) AS f FROM lake.{t}_silver.n`, /format_string's width/],
  ])('%s is refused (78)', async (_, text, reason) => {
    const e = await judged(text);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).message).toMatch(reason);
  });
});

/**
 * What the server's analysis and optimization build from a small text, and what one value, group
 * or window frame costs, are bounded before analysis starts or before the plan runs. Each of these
 * (before the bounds) held the shared server's driver in garbage collection until it died, or a
 * core in one uninterruptible computation: 30 CTEs each reading the one before twice (2^30 nodes
 * once Spark's analysis check inlines them), CUBE of 26 columns (2^26 grouping sets), a simple CASE
 * nested 40 deep (its value repeated in each branch), approx_count_distinct at 0.0002 (3.3 million
 * buffer fields), round to ten million digits (47 s of one core per value), a ten-million-row
 * sliding frame (rows held outside Spark's memory manager), range over 50 million partitions (tasks
 * the driver schedules), parentheses 3,000 deep (Spark's parser
 * overflowed its stack: an internal error, now the tenant's 78).
 */
describe('what analysis builds and what a value, group or frame costs are bounded before anything runs', () => {
  const nested = (depth: number, inner: string, wrap: (x: string) => string) => Array.from({ length: depth }).reduce<string>((x) => wrap(x), inner);
  const ctes = Array.from({ length: 30 }, (_, i) => `a${i + 1} AS (SELECT * FROM a${i} UNION ALL SELECT * FROM a${i})`).join(', ');
  const cube = Array.from({ length: 26 }, (_, i) => `c${i}`);
  const expands = /the logic expands to (\d+|more than 9\.2e18) plan and expression nodes .*limits\.plan-nodes 100000/;
  it.each([
    ['CTEs doubling thirty times', `WITH a0 AS (SELECT k FROM lake.{t}_silver.n), ${ctes} SELECT count(*) AS n FROM a30`, expands],
    [
      'GROUP BY CUBE of 26 columns',
      `SELECT count(*) AS n FROM (SELECT ${cube.map((c) => `k % 2 AS ${c}`).join(', ')} FROM lake.{t}_silver.n) GROUP BY CUBE(${cube.join(', ')})`,
      expands,
    ],
    ['a simple CASE nested 40 deep', `SELECT ${nested(40, 'k', (x) => `CASE ${x} WHEN 1 THEN 1 WHEN 2 THEN 2 END`)} AS c FROM lake.{t}_silver.n`, expands],
    [
      'approx_count_distinct at a relative error of 0.0002',
      `SELECT approx_count_distinct(v, 0.0002) AS n FROM lake.{t}_silver.n`,
      /approx_count_distinct \(line 1, column \d+\).s relative error must be a literal of at least 0\.01 \(it is 2\.0E-4\)/,
    ],
    [
      'round of a double to ten million digits',
      `SELECT round(CAST(k AS DOUBLE) / 3, 10000000) AS r FROM lake.{t}_silver.n`,
      /round's scale must be a literal between -400 and 400/,
    ],
    [
      'a ten-million-row sliding frame',
      `SELECT max(k) OVER (ORDER BY k ROWS BETWEEN 10000000 PRECEDING AND CURRENT ROW) AS m FROM lake.{t}_silver.n`,
      /a ROWS frame of 10000001 rows/,
    ],
    ['range over fifty million partitions', `SELECT count(*) AS n FROM range(0, 10, 1, 50000000)`, /range\(…\) asks for 50000000 partitions, more than 1000/],
    ['parentheses 3,000 deep', `SELECT ${nested(3000, 'k', (x) => `(${x})`)} AS p FROM lake.{t}_silver.n`, /nested too deeply/],
  ])('%s is refused (78)', async (_, text, reason) => {
    const e = await judged(text);
    expect(e, JSON.stringify(e)).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).exitCode).toBe(78);
    expect((e as ConfigError).message).toMatch(reason);
  });

  it('within the bounds the same functions run and return what Spark computes', async () => {
    const r = await judged(`
      WITH a AS (SELECT k, v FROM lake.{t}_silver.n)
      SELECT (SELECT approx_count_distinct(v, 0.01) FROM a) AS approx,
             (SELECT count(*) FROM a x JOIN a y ON x.k = y.k) AS twice,
             (SELECT count(*) FROM (SELECT k % 2 AS p, k % 3 AS q FROM a) GROUP BY CUBE(p, q) HAVING p IS NULL AND q IS NULL) AS total,
             round(2.0D / 3, 4) AS r, bround(2.5D, 0) AS b, ceil(1.21D, 1) AS c,
             (SELECT sum(s) FROM (SELECT sum(k) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM a WHERE k < 4)) AS sliding,
             (SELECT max(s) FROM (SELECT sum(k) OVER (ORDER BY k RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s FROM a WHERE k < 4)) AS ranged`);
    expect(r).not.toBeInstanceOf(Error);
    const [row] = r as Record<string, unknown>[];
    // 2,000 distinct values within 1 % (three standard errors of 0.01 at most 3 %).
    expect(Math.abs(Number(row!.approx) - 2000)).toBeLessThan(60);
    // Sliding sums of 0..3 over the last three rows: 0, 1, 3, 6; range sums over k ± 1: 1, 3, 6, 5.
    expect({ ...row, approx: undefined }).toEqual({ approx: undefined, twice: 2000n, total: 2000n, r: 0.6667, b: 2, c: '1.3', sliding: 10n, ranged: 6n });
  });

  it('a join side of exploded literal sequences (estimated one row, really 9.6 million of 450 characters) is not broadcast: the query answers', async () => {
    // Spark estimates a generator's output as its input's size; broadcast, this side filled the
    // driver's heap and ended the server (before GeneratedSides). Shuffled, it is an ordinary join.
    const r = await judged(`
      SELECT count(*) AS n, max(length(concat(a.v, b.pad))) AS l FROM lake.{t}_silver.n a
      JOIN (SELECT x, concat(CAST(y AS STRING), repeat('x', 450)) AS pad
            FROM (SELECT explode(sequence(1, 20000)) AS x) CROSS JOIN (SELECT explode(sequence(1, 480)) AS y)) b ON a.k = b.x`);
    expect(r).not.toBeInstanceOf(Error);
    // Keys 1..1999 of the table meet 480 rows each; the longest concatenation is v of 1999 (its four
    // digits 20 times) + '480' + 450 x's.
    expect(r).toEqual([{ n: 1999n * 480n, l: 80 + 3 + 450 }]);
  });

  it('after them the shared server answers, and another tenant’s run succeeds', serverStillServes);
});

describe('the watchdog cancels an operation of a bound session while it runs', () => {
  it('a cross join exploding past the tenant’s row growth: 65, and the server goes on serving', async () => {
    const started = performance.now();
    const r = await runJob(join(dir, 'explode.conf'), join(dir, 'platform.conf'), ['--run-id', 'it-explode']);
    expect(r.code, JSON.stringify(r.status.error)).toBe(65);
    expect(r.status.error.code).toBe('ROW_GROWTH');
    expect(r.status.error.message).toMatch(/LAKEHOUSE_WATCHDOG_ROWS: an operator produced more than 100000 rows from/);
    // 8 billion rows would take the shared server far longer than the cancellation did.
    console.log(`watchdog: the exploding cross join ended after ${Math.round(performance.now() - started)} ms`);
    await serverStillServes();
  });

  it('a cross join of generated rows, which reads nothing: 65 (a generator is not a scan, its rows never count as read)', async () => {
    const r = await runJob(join(dir, 'generated.conf'), join(dir, 'platform.conf'), ['--run-id', 'it-generated']);
    expect(r.code, JSON.stringify(r.status.error)).toBe(65);
    expect(r.status.error.code).toBe('ROW_GROWTH');
    expect(r.status.error.message).toMatch(/LAKEHOUSE_WATCHDOG_ROWS: an operator produced more than 100000 rows from [0-3] rows read/);
  });

  // A heartbeat can carry a scan's output rows before any of its tasks' input records (Parquet and
  // Iceberg readers report those at the task's end): counted from input records alone, a scan
  // stage longer than a heartbeat was cancelled as growth "from 0 rows read" (the grouped reads,
  // every time). A scan's rows count as read.
  it('reads of 3M rows, 30 times the tenant’s row-floor, are not growth: each run succeeds', async () => {
    for (const [name] of reads) {
      const r = await runJob(join(dir, `${name}.conf`), join(dir, 'platform.conf'), ['--run-id', `it-${name}`]);
      expect(r.code, `${name}: ${JSON.stringify(r.status.error)}`).toBe(0);
      expect(r.status.outputs[0].metrics.written).toBe(name.endsWith('grouped') ? 7 : 3_000_000);
    }
  });

  it('a slow query past the tenant’s step limit: 75 (retryable), and the server goes on serving', async () => {
    const r = await runJob(join(dir, 'slow.conf'), join(dir, 'platform.conf'), ['--run-id', 'it-slow']);
    expect(r.code, JSON.stringify(r.status.error)).toBe(75);
    expect(r.status.error.code).toBe('STEP_TIMEOUT');
    expect(r.status.error.retryable).toBe(true);
    expect(r.status.error.message).toMatch(/LAKEHOUSE_WATCHDOG_TIME: the operation ran longer than 5 s/);
    await serverStillServes();
  });
});
