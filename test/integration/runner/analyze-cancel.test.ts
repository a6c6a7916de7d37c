import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CancelledError } from '../../../src/core/errors.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { Query } from '../../../src/spark/plan/query.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { connect } from '../spark/support.js';
import { freshTenant } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * The run's signal ends an AnalyzePlan in progress on the real server at once (the run's SIGTERM
 * path when it arrives while a step is being analyzed). A JSON source without a schema makes the
 * server infer one by reading every file: an AnalyzePlan of several seconds, bounded by the data.
 */
const tenant = freshTenant();
const json = `${tenant.root}/json`;
let writer: SparkConnectClient;

beforeAll(async () => {
  writer = connect();
  const rows = testQuery(`SELECT id, sha2(CAST(id AS STRING), 256) AS v, named_struct('a', id, 'b', CAST(id AS STRING)) AS s FROM range(3000000)`);
  await writer.execute(compileCommandPlan(rows.writeFiles(json, 'json', { mode: 'overwrite' }), { reveal: true }));
});

afterAll(async () => {
  await writer?.releaseSession().catch(() => undefined);
  writer?.close();
});

describe('cancelling during an AnalyzePlan', () => {
  it('rejects with the cancellation within a second, and the server answers the next session', async () => {
    const plan = compileRelationPlan(Query.read('json', { paths: [json] }).rel, { reveal: true });
    // The analysis uncancelled first: how long it takes depends on the machine (2.2 s here, less on
    // a faster one), so the abort below comes at a quarter of that, while it surely still runs.
    const t0 = Date.now();
    await writer.analyze.schema(plan);
    const full = Date.now() - t0;
    console.log(`the AnalyzePlan uncancelled: ${full} ms`);
    expect(full).toBeGreaterThan(400);
    const run = new AbortController();
    const client = connect({ signal: run.signal });
    try {
      const started = Date.now();
      const analyzing = client.analyze.schema(plan);
      await new Promise((r) => setTimeout(r, Math.round(full / 4)));
      const abortedAt = Date.now();
      run.abort(new CancelledError('SIGTERM'));
      await expect(analyzing).rejects.toBeInstanceOf(CancelledError);
      const elapsed = Date.now() - abortedAt;
      console.log(`AnalyzePlan cancelled after ${abortedAt - started} ms: rejected ${elapsed} ms after the abort`);
      expect(elapsed).toBeLessThan(1_000);
      await client.releaseSession();
    } finally {
      client.close();
    }
    // The server answers the next request at once: the cancelled analysis does not hold it.
    const t1 = Date.now();
    await writer.analyze.sparkVersion();
    expect(Date.now() - t1).toBeLessThan(5_000);
  });
});
