import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localPlatformDefaults } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { bindTenant } from '../../../src/runner/tenant-logic.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tenantPolicyError } from '../../../src/spark/policy/index.js';
import { Query } from '../../../src/spark/plan/query.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { connect } from '../spark/support.js';
import { tempFiles } from '../../support/files.js';
import { freshTenant, readIcebergWithPyIceberg, repoRoot, spawnCli } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark-install', 'py-tools');

/**
 * `kill -9` of the Spark Connect server in the middle of a cdc-silver-merge run, on a server of its
 * own (the group's Spark port + 1): the run ends within its retry budget as unreachable (69,
 * retryable), and its status says which steps had committed before the server died. That server is
 * set up as a shared server should be (spark.lakehouse.policy.requireBinding=true): a plan of a
 * session nobody bound to a tenant is refused, the runner's runs (bound) are not.
 */
const script = join(repoRoot, 'scripts/spark-connect');
const PORT = String(Number(process.env.SPARK_CONNECT_PORT ?? '15002') + 1);
const address = `sc://127.0.0.1:${PORT}`;
const BUDGET_S = 15;
let client: SparkConnectClient;

function stack(args: string[]): string {
  // spark-submit reads SPARK_REMOTE as --remote and refuses to start a server.
  const { SPARK_REMOTE: _ignored, ...env } = process.env;
  return execFileSync('bash', [script, ...args], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 });
}

function serverPid(): number {
  const cache = process.env.LAKEHOUSE_CACHE ?? join(repoRoot, '.cache');
  return Number(readFileSync(join(cache, 'spark', `run-${PORT}`, 'server.pid'), 'utf8').trim());
}

beforeAll(() => {
  stack(['stop', '--port', PORT]);
  expect(stack(['start', '--port', PORT, '--conf', 'spark.lakehouse.policy.requireBinding=true']).trim().split('\n').pop()).toBe(address);
  client = connect({}, address);
});

describe('a server that requires a binding', () => {
  it('refuses a plan of a session nobody bound to a tenant (78)', async () => {
    const e = await client.execute(compileRelationPlan(Query.range(0n, 1n).rel, { reveal: true })).catch((x: unknown) => tenantPolicyError(x) ?? x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).message).toMatch(/this server judges every plan against a tenant, and this session is not bound to one/);
  });
});

afterAll(() => {
  client?.close();
  stack(['stop', '--port', PORT]);
});

describe('kill -9 of the server mid-run', () => {
  it('exits 69 within the retry budget; the status lists the steps that committed', async () => {
    const tenant = freshTenant();
    // The bronze files are written in a session bound to the tenant (this server refuses others).
    await bindTenant(client, localPlatformDefaults, tenantContext(tenant.id, tenant.root));
    // Enough events that the MERGE takes seconds on two cores; every 1000th key is a delete, so
    // the tombstone step (which runs before the MERGE) commits something.
    await client.execute(
      compileCommandPlan(
        testQuery(
          `SELECT id, TIMESTAMP'2026-07-05 08:00:00' AS ts, sha2(CAST(id AS STRING), 256) AS v, IF(id % 1000 = 0, 'd', 'c') AS op FROM range(1500000)`,
        ).writeFiles(`${tenant.root}/bronze/events`, 'parquet', { mode: 'overwrite' }),
        { reveal: true },
      ),
    );
    const dir = tempFiles({
      'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "events", catalog = "lake" }
`,
    });
    const statusFile = join(dir, 'status.json');
    const { child, done } = spawnCli(['--config', join(dir, 'job.conf'), '--remote', address, '--retry-budget', String(BUDGET_S), '--status-file', statusFile]);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const deadline = Date.now() + 300_000;
    while (!stderr.includes('"step":"merge"') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(stderr).toContain('"step":"merge"');
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = Date.now();
    process.kill(-serverPid(), 'SIGKILL'); // the server leads its own process group
    const result = await done;
    const elapsedMs = Date.now() - killedAt;
    const status = JSON.parse(readFileSync(statusFile, 'utf8'));
    console.log(`kill -9 during merge: exit ${result.code} after ${elapsedMs} ms; error ${status.error?.code}: ${status.error?.message?.slice(0, 160)}`);
    for (const line of stderr.split('\n').filter((l) => /retry|release|interrupt|finished|"step":"merge"|error/i.test(l))) console.log(line.slice(0, 400));
    console.log(`completedSteps ${JSON.stringify(status.completedSteps)}, failedStep ${status.failedStep}`);

    expect(result.code, stderr.slice(-3000)).toBe(69);
    expect(elapsedMs).toBeLessThan(BUDGET_S * 1000 + 10_000);
    expect(status).toMatchObject({ status: 'failed', exitCode: 69, error: { retryable: true }, failedStep: 'merge' });
    expect(status.completedSteps).toEqual(expect.arrayContaining(['check-batch', 'create-table', 'create-tombstones', 'measure', 'record-tombstones']));
    expect(status.completedSteps).not.toContain('merge');
    // What the status says committed did commit: the tombstones are in the lake (read by PyIceberg).
    const tombstones = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'events__cdc_tombstones');
    expect(tombstones).toHaveLength(1500);
  });
});
