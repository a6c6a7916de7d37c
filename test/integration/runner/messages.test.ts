import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, remote, runCli } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/** Messages a person acts on, from the real server: the config path, not Spark's plan text. */
let client: SparkConnectClient;

beforeAll(() => {
  client = connect();
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

function cdcJob(where: string) {
  const tenant = freshTenant();
  const dir = tempFiles({
    'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events", where = "${where}" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`,
    'platform.conf': `catalogs { lake { format = iceberg, default = true } }`,
  });
  return { bronze: `${tenant.root}/bronze/events`, job: join(dir, 'job.conf'), platform: join(dir, 'platform.conf'), dir };
}

describe('messages from a real run', () => {
  it("a where naming a column the bronze batch lacks: 78 at source.where, without Spark's plan text", async () => {
    const job = cdcJob("stauts = 'open'");
    const select = `SELECT 1L AS id, TIMESTAMP'2026-07-05 08:00:00' AS ts, 'open' AS status`;
    await client.execute(
      compileCommandPlan(testQuery(select).writeFiles(`${job.bronze}/_snapshot_date=2026-07-05`, 'parquet', { mode: 'append' }), { reveal: true }),
    );
    const statusFile = join(job.dir, 'status.json');
    const r = await runCli(['--config', job.job, '--env', job.platform, '--remote', remote(), '--status-file', statusFile]);
    expect(r.code, r.stderr).toBe(78);
    const status = JSON.parse(readFileSync(statusFile, 'utf8'));
    expect(status.error).toMatchObject({ category: 'config', path: 'source.where' });
    // The server's tenant policy analyses the tenant's logic and names its mistake: the column it wrote, and the class.
    expect(status.error.message).toContain('UNRESOLVED_COLUMN');
    expect(status.error.message).toMatch(/names a column that does not exist: `stauts`/);
    expect(status.error.message).not.toMatch(/Relation|\+- |SQLSTATE/);
  });

  it("plan --explain adds Spark's own explain of each step it can analyse", async () => {
    const job = cdcJob("status = 'open'");
    const select = `SELECT 1L AS id, TIMESTAMP'2026-07-05 08:00:00' AS ts, 'open' AS status`;
    await client.execute(
      compileCommandPlan(testQuery(select).writeFiles(`${job.bronze}/_snapshot_date=2026-07-05`, 'parquet', { mode: 'append' }), { reveal: true }),
    );
    const r = await runCli(['plan', '--explain', '--config', job.job, '--env', job.platform, '--remote', remote()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('[1/');
    expect(r.stdout).toContain('  Spark explain:');
    expect(r.stdout).toMatch(/== Physical Plan ==/);
  });

  it('plan --explain judges a step carrying tenant SQL by the server’s tenant policy: refused (78), nothing explained', async () => {
    const tenant = freshTenant();
    await client.execute(compileCommandPlan(testCommand(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_silver`), { reveal: true }));
    await client.execute(
      compileCommandPlan(
        testQuery('SELECT 1L AS id').writeTo(['lake', `${tenant.id}_silver`, 'orders'], 'create', { properties: { location: `${tenant.root}/silver/orders` } }),
        { reveal: true },
      ),
    );
    const gold = (select: string) =>
      tempFiles({
        'job.conf': `
job    { template = "gold-publish", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "${select} FROM silver.orders" }
target { table = "orders_gold", catalog = "lake", grain = ["id"], mode = merge }
`,
        'platform.conf': `catalogs { lake { format = iceberg, default = true } }`,
      });
    const explain = (dir: string) =>
      runCli(['plan', '--explain', '--config', join(dir, 'job.conf'), '--env', join(dir, 'platform.conf'), '--remote', remote()]);
    // A function the screen lets through and the policy's allow-list does not hold.
    const refused = await explain(gold('SELECT id, uuid() AS u'));
    expect(refused.code, refused.stderr).toBe(78);
    expect(refused.stdout).not.toContain('Spark explain');
    expect(refused.stderr).toMatch(/transform\.sql: refused by the tenant policy: function uuid .*is not allowed in tenant logic/);
    // The same transform without it is judged and explained.
    const allowed = await explain(gold('SELECT id'));
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stdout).toContain('  Spark explain:');
  });
});
