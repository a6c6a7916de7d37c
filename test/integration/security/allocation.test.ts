import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
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

const gold = (t: { id: string; root: string }, name: string, transform: string) => `
job    { template = "gold-publish", schema-version = 1, name = "${name}" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
transform { sql = "${transform}" }
target { table = "${name}", grain = ["k"], mode = full-refresh }`;

beforeAll(async () => {
  // Each tenant's silver table of 2,000 rows: small input, for a cross join to explode from.
  for (const t of [greedy, slow, other]) {
    await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${t.id}_silver`);
    await sql(
      `CREATE TABLE lake.${t.id}_silver.n USING iceberg LOCATION '${t.root}/silver/n' AS SELECT id AS k, repeat(CAST(id AS STRING), 20) AS v FROM range(2000)`,
    );
  }
  dir = tempFiles({
    // The greedy tenant may grow an operator's rows 10 times what it read, at least 100,000 rows;
    // the slow one may run an operation for 5 seconds (and grow its rows at will); the other has the platform's defaults.
    'platform.conf': `catalogs { lake { format = iceberg, default = true } }
tenants {
  ${greedy.id} { storage-roots = ["${greedy.root}"], limits { row-growth = 10, row-floor = 100000 } }
  ${slow.id} { storage-roots = ["${slow.root}"], limits { step-seconds = 5, row-growth = 1000000000 } }
  ${other.id} { storage-roots = ["${other.root}"] }
}`,
    'explode.conf': gold(greedy, 'exploded', 'SELECT 1 AS k, count(*) AS n FROM silver.n a CROSS JOIN silver.n b CROSS JOIN silver.n c'),
    'slow.conf': gold(
      slow,
      'slow',
      'SELECT 1 AS k, max(sha2(concat(a.v, b.v, c.v), 512)) AS n FROM silver.n a CROSS JOIN silver.n b CROSS JOIN (SELECT * FROM silver.n LIMIT 20) c',
    ),
    'small.conf': gold(other, 'small', 'SELECT k, v FROM silver.n WHERE k < 10'),
  });
});

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
    const session = await runSession(platformSchema.parse({ catalogs: { lake: { format: 'iceberg' } } }), tenantContext(other.id, other.root));
    try {
      const e = await session
        .execute(compileRelationPlan(wrapTenantLogic(testQuery(text.replaceAll('{t}', other.id)).rel, ['transform.sql']), { reveal: true }))
        .then(
          () => undefined,
          (x: unknown) => tenantPolicyError(x) ?? x,
        );
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).message).toMatch(reason);
    } finally {
      await releaseSession(session);
    }
  });
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

  it('a slow query past the tenant’s step limit: 75 (retryable), and the server goes on serving', async () => {
    const r = await runJob(join(dir, 'slow.conf'), join(dir, 'platform.conf'), ['--run-id', 'it-slow']);
    expect(r.code, JSON.stringify(r.status.error)).toBe(75);
    expect(r.status.error.code).toBe('STEP_TIMEOUT');
    expect(r.status.error.retryable).toBe(true);
    expect(r.status.error.message).toMatch(/LAKEHOUSE_WATCHDOG_TIME: the operation ran longer than 5 s/);
    await serverStillServes();
  });
});
