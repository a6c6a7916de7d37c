import { tableFromArrays } from 'apache-arrow';
import { materializeStep } from '../../../src/jobs/steps.js';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { toJson } from '@bufbuild/protobuf';
import { DataError } from '../../../src/core/errors.js';
import { executePlan, stepPlan, type SparkSession } from '../../../src/runner/executor.js';
import { col, lit } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import { type Plan, PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import type { JobPlan, Step } from '../../../src/jobs/template.js';

/**
 * A materialize step computes its query once on the server (a local checkpoint), later steps read
 * the kept rows by the id the server answered, and the rows are dropped when the run ends: after
 * success, after a failing step, and after a step that throws.
 */

const resolve: Step = materializeStep({
  id: 'check-batch',
  title: 'resolve',
  name: 'batch',
  query: Query.table(['lake', 'acme_bronze', 'events']).filter(col('id')),
  check: Query.materialized('batch').aggregate([], [col('n')]),
  columns: ['n'],
  interpret: (rows) => (Number(rows[0]?.n ?? 0) > 1 ? { fail: new DataError('too many', { code: 'X' }) } : { metrics: { rowsRead: Number(rows[0]?.n ?? 0) } }),
});
const merge: Step = {
  kind: 'command',
  id: 'merge',
  title: 'merge',
  command: Query.materialized('batch')
    .as('s')
    .mergeInto(['lake', 'acme_silver', 'orders'], lit(true), { whenMatched: [{ action: 'delete' }] }),
};

function session(opts: { n: number; mergeFails?: boolean }) {
  const sent: Record<string, unknown>[] = [];
  const s: SparkSession = {
    analyze: { schema: async () => ({}), inputFiles: async () => [] },
    config: { set: async () => undefined, unset: async () => undefined },
    execute: async (p: Plan) => {
      const json = toJson(PlanSchema, p) as Record<string, Record<string, Record<string, unknown>>>;
      sent.push(json);
      const cmd = json.command;
      if (cmd?.checkpointCommand) return { operationId: 'op', checkpointRelationId: 'server-id-1' };
      if (cmd?.mergeIntoTableCommand && opts.mergeFails) throw new Error('merge failed');
      if (json.root) return { operationId: 'op', table: tableFromArrays({ n: [opts.n] }) };
      return { operationId: 'op' };
    },
  };
  return { s, sent };
}

const run = (plan: JobPlan, s: SparkSession) =>
  executePlan(plan, { session: s, logger: pino({ level: 'silent' }), tags: ['t'], signal: new AbortController().signal });
const text = (x: unknown) => JSON.stringify(x);

describe('executor: materialize steps', () => {
  it('keeps the rows once, reads them by the server id in later steps, and drops them at the end', async () => {
    const { s, sent } = session({ n: 1 });
    const report = await run({ steps: [resolve, merge] }, s);
    expect(report.completedSteps).toEqual(['check-batch', 'merge']);
    expect(report.metrics.rowsRead).toBe(1);
    const kinds = sent.map((j) => Object.keys((j.command ?? j.root) as object)[0]);
    expect(kinds).toEqual(['checkpointCommand', 'aggregate', 'mergeIntoTableCommand', 'removeCachedRemoteRelationCommand']);
    expect(text(sent[0])).toContain('"local":true');
    expect(text(sent[0])).toContain('"eager":true');
    expect(text(sent[0])).toContain('acme_bronze');
    // The check and the merge read the kept rows, not bronze.
    for (const j of sent.slice(1, 3)) {
      expect(text(j)).toContain('"cachedRemoteRelation":{"relationId":"server-id-1"}');
      expect(text(j)).not.toContain('acme_bronze');
    }
    expect(text(sent[3])).toContain('"relationId":"server-id-1"');
  });

  it('drops the kept rows when the check fails the run, and when a later step throws', async () => {
    const failing = session({ n: 2 });
    await expect(run({ steps: [resolve, merge] }, failing.s)).rejects.toThrow('too many');
    expect(failing.sent.map((j) => Object.keys((j.command ?? j.root) as object)[0])).toEqual([
      'checkpointCommand',
      'aggregate',
      'removeCachedRemoteRelationCommand',
    ]);
    const throwing = session({ n: 1, mergeFails: true });
    await expect(run({ steps: [resolve, merge] }, throwing.s)).rejects.toThrow('merge failed');
    expect(text(throwing.sent.at(-1))).toContain('removeCachedRemoteRelationCommand');
  });

  it('prints the checkpoint of the query as the step plan; later plans name the rows by the step name', () => {
    expect(text(toJson(PlanSchema, stepPlan(resolve, { reveal: false })))).toContain('"checkpointCommand"');
    expect(text(toJson(PlanSchema, stepPlan(merge, { reveal: false })))).toContain('"cachedRemoteRelation":{"relationId":"batch"}');
  });
});
