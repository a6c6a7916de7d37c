import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, remote, spawnCli } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * SIGTERM/SIGINT during a long Spark operation: the run interrupts its operations on the server (by
 * its tag), releases the session, writes a `cancelled` status and exits 143/130, well within 20 s.
 */
const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;

// source.where is evaluated by Spark for each row: hashing a long string for each of 2M rows keeps
// the job busy for minutes (config expressions may not use subqueries). `id * 1` is a number, so the
// string's size is bounded by the expression itself (src/core/expression/size.ts).
const slowJob = `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events", where = "sha2(repeat(CAST(id * 1 AS STRING), 20000), 512) <> ''" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`;

beforeAll(async () => {
  dir = tempFiles({ 'job.conf': slowJob });
  client = connect();
  const write = testQuery(`SELECT id, TIMESTAMP'2026-07-05 00:00:00' AS ts, 'x' AS v FROM range(2000000)`).writeFiles(
    `${tenant.root}/bronze/events`,
    'parquet',
    { mode: 'overwrite' },
  );
  await client.execute(compileCommandPlan(write, { reveal: true }));
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

async function cancelMidRun(signal: 'SIGTERM' | 'SIGINT') {
  const statusFile = join(dir, `status-${signal}.json`);
  const { child, done } = spawnCli(['--config', join(dir, 'job.conf'), '--remote', remote(), '--status-file', statusFile, '--run-id', `it_cancel_${signal}`]);
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  // Wait until the first Spark step is running.
  const deadline = Date.now() + 60_000;
  while (!stderr.includes('"step":"check-batch"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 2_000));
  const sentAt = Date.now();
  child.kill(signal);
  const result = await done;
  return { result, elapsedMs: Date.now() - sentAt, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}

describe('signals', () => {
  it('SIGTERM interrupts the running Spark operation and exits 143 with a cancelled status', async () => {
    const { result, elapsedMs, status } = await cancelMidRun('SIGTERM');
    expect(result.code).toBe(143);
    expect(elapsedMs).toBeLessThan(20_000);
    expect(status).toMatchObject({ status: 'cancelled', exitCode: 143, error: { code: 'CANCELLED', retryable: true }, runId: 'it_cancel_SIGTERM' });
    // The server confirms it interrupted exactly the operation the run had in flight (the last one).
    expect(status.spark.operationIds.length).toBeGreaterThanOrEqual(1);
    expect(status.spark.interruptedOperationIds).toEqual([status.spark.operationIds.at(-1)]);
  });

  it('SIGINT exits 130', async () => {
    const { result, status } = await cancelMidRun('SIGINT');
    expect(result.code).toBe(130);
    expect(status).toMatchObject({ status: 'cancelled', exitCode: 130 });
    expect(status.spark.interruptedOperationIds).toEqual([status.spark.operationIds.at(-1)]);
  });

  it('the interrupted operation no longer holds the server: a new query answers at once', async () => {
    const started = Date.now();
    const r = await client.execute(
      (await import('../../../src/spark/plan/compile.js')).compileRelationPlan(testQuery('SELECT 1 AS one').rel, { reveal: true }),
    );
    expect(r.rowCount).toBe(1);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
