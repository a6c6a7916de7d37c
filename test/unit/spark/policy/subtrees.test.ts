import { type Table, tableFromArrays } from 'apache-arrow';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../../src/runner/load-job.js';
import { ConfigError } from '../../../../src/core/errors.js';
import { parseExpression } from '../../../../src/core/expression/index.js';
import type { JobPlan } from '../../../../src/jobs/template.js';
import { type SparkSession, executePlan } from '../../../../src/runner/executor.js';
import { SparkError } from '../../../../src/spark/errors.js';
import { configExpr } from '../../../../src/spark/plan/config-expression.js';
import { col, eq, fn, gt, lit, over, desc } from '../../../../src/spark/plan/expressions.js';
import { Query } from '../../../../src/spark/plan/query.js';
import { PolicyVerdicts, checkStepPolicy, configSubtrees, relationFingerprint } from '../../../../src/spark/policy/index.js';
import { tempFiles } from '../../../support/files.js';
import { listedPath, pathNotFound } from '../../../support/listing.js';
import { testQuery } from '../../../support/sql.js';

const dir = fileURLToPath(new URL('./fixtures/', import.meta.url));
const fixture = (name: string) => readFileSync(`${dir}${name}.explain.txt`, 'utf8');
const acme = { tenant: 'acme', namespaces: ['lake.acme_bronze', 'lake.acme_silver'], roots: ['file:///lake/acme'] };
const subject = { step: 'merge', configPaths: ['source.where'] };

const where = (text: string) => {
  const parsed = parseExpression(text);
  if (!parsed.ok) throw new Error(`bad test expression ${text}`);
  return configExpr({ text, ast: parsed.ast });
};
const bronze = Query.read('parquet', { paths: ['file:///lake/acme/bronze/orders_cdc'] });

/** A policy session recording which relations the server was asked to analyse. */
function recordingSession(explain: string) {
  const analysed: string[] = [];
  let conf = 0;
  return {
    analysed,
    conf: () => conf,
    session: {
      analyze: {
        explain: async (plan: unknown) => {
          analysed.push(JSON.stringify(plan, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
          return explain;
        },
        inputFiles: async () => [],
      },
      config: { set: async () => void conf++, getOption: async () => ({}), unset: async () => undefined },
    },
  };
}

describe('configSubtrees: what of a relation carries config logic', () => {
  it('is the topmost node holding a config expression, with everything below it', () => {
    const filtered = bronze.filter(where('amount > 10'));
    const resolved = filtered.withColumns([['rn', over(fn('row_number'), [col('id')], [desc(col('ts'))])]]).filter(eq(col('rn'), lit(1)));
    const plan = resolved.join(Query.table(['lake', 'acme_silver', 'orders']).as('t'), ['id']).aggregate([], [fn('count', lit(1))]);
    expect(configSubtrees(plan.rel)).toEqual([filtered.rel]);
    // A config expression wrapped in the template's own expressions is still found.
    const flagged = filtered.withColumns([['__delete', fn('coalesce', where("op = 'd'"), lit(false))]]);
    expect(configSubtrees(flagged.select('id').rel)).toEqual([flagged.rel]);
  });

  it('finds every such part of a join, and SQL text as config logic', () => {
    const a = bronze.filter(where('id > 0'));
    const b = testQuery('SELECT id FROM lake.acme_silver.orders');
    expect(configSubtrees(a.join(b, ['id']).rel)).toEqual([a.rel, b.rel]);
  });

  it('is the whole relation when no node is marked (logic put where it is not seen is analysed whole)', () => {
    // The same expression built by hand, not from config: nothing marks it.
    const rel = bronze.filter(gt(col('amount'), lit(10))).select('id').rel;
    expect(configSubtrees(rel)).toEqual([rel]);
  });
});

describe('checkStepPolicy: each relation carrying config logic once per run', () => {
  const events = bronze.filter(where('amount > 10'));
  const step1 = events.aggregate([], [fn('count', lit(1))]).rel;
  const step2 = events.join(Query.table(['lake', 'acme_silver', 'orders']), ['id']).rel;

  it('analyses only the config part, and a part already allowed in this run not again', async () => {
    const { session, analysed, conf } = recordingSession(fixture('cdc-v1.check-batch'));
    const verdicts = new PolicyVerdicts();
    const first = await checkStepPolicy(session, [step1], acme, subject, { verdicts });
    const second = await checkStepPolicy(session, [step2], acme, subject, { verdicts });
    expect(first).toMatchObject({ relations: 1, cached: 0 });
    expect(second).toMatchObject({ relations: 0, cached: 1 });
    expect(analysed).toHaveLength(1);
    expect(conf()).toBe(1);
    expect(verdicts.has(relationFingerprint(events.rel))).toBe(true);
    // Another run (its own verdicts) analyses again.
    await checkStepPolicy(session, [step2], acme, subject, { verdicts: new PolicyVerdicts() });
    expect(analysed).toHaveLength(2);
  });

  it('keeps no verdict for a refused relation: every step carrying it is refused', async () => {
    const { session, analysed } = recordingSession(fixture('hostile.reflect'));
    const verdicts = new PolicyVerdicts();
    for (const rel of [step1, step2])
      await expect(checkStepPolicy(session, [rel], acme, subject, { verdicts })).rejects.toThrow(/function reflect is not allowed/);
    expect(analysed).toHaveLength(2);
  });

  it('analyses a relation that reads a view every time (its definition can change between steps)', async () => {
    const ownView = fixture('hostile.view').replaceAll('beta_silver', 'acme_silver');
    const { session, analysed } = recordingSession(ownView);
    const verdicts = new PolicyVerdicts();
    await checkStepPolicy(session, [step1], acme, subject, { verdicts });
    await checkStepPolicy(session, [step1], acme, subject, { verdicts });
    expect(analysed).toHaveLength(2);
  });

  it('still judges the whole relation statically: a table outside the namespaces is refused before anything is sent', async () => {
    const { session, analysed } = recordingSession(fixture('cdc-v1.check-batch'));
    const outside = events.join(Query.table(['lake', 'beta_silver', 'orders']), ['id']).rel;
    await expect(checkStepPolicy(session, [outside], acme, subject, { verdicts: new PolicyVerdicts() })).rejects.toThrow(ConfigError);
    expect(analysed).toHaveLength(0);
  });
});

describe('executor: a cdc-silver-merge run analyses each config part once', () => {
  const config = `
job    { template = "cdc-silver-merge", schema-version = 2, name = "x" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "amount > 0" }
cdc    { primary-key = ["id"], sequence-by = ["ts"], delete-when = "op = 'd'" }
target { table = "orders" }`;
  /** One-row answers of the query steps, so that every step runs (resurrected rows included). */
  const answers: Record<string, Record<string, bigint[]>> = {
    'check-batch': { events: [10n], null_groups: [0n], null_example: [0n], ties: [0n], tie_example: [0n], unlisted: [0n], unlisted_example: [0n] },
    // stale > 0: the second look runs whatever the commit window shows.
    measure: { inserted: [1n], updated: [1n], deleted: [1n], late: [0n], tombstones: [1n], stale: [1n] },
    'find-resurrected': { rows: [1n] },
    'count-expired': { rows: [0n] },
  };

  async function run(explain: string) {
    const loaded = await loadJob({ configFile: join(tempFiles({ 'job.conf': config }), 'job.conf'), overrides: [], env: {}, runId: 'r' });
    const plan: JobPlan = loaded.plan;
    const { session: policySession, analysed } = recordingSession(explain);
    let current = '';
    let probes = 0;
    const session: SparkSession = {
      ...policySession,
      analyze: {
        ...policySession.analyze,
        // Bronze has the columns the config names and none of the template's own names; the two tables are missing (so both
        // creates run, and are checked); then schemas compare equal.
        schema: async (p) => {
          // Listings (the bronze probes, the new tables' empty locations) find nothing there.
          const path = listedPath(p);
          if (path !== undefined) throw pathNotFound(path);
          if (current === 'check-source-columns')
            return { kind: { case: 'struct', value: { fields: ['id', 'ts', 'op', 'amount'].map((name) => ({ name, nullable: true })) } } };
          if (probes++ < 2)
            throw new SparkError({ grpcCode: 3, errorClass: 'TABLE_OR_VIEW_NOT_FOUND', message: 'not found', messageParameters: {}, classes: [], causes: [] });
          return { kind: { case: 'struct', value: { fields: [] } } };
        },
      },
      execute: async (sent) => {
        // check-batch first keeps the resolved batch (a checkpoint), then queries it.
        if (sent.opType.case === 'command' && sent.opType.value.commandType.case === 'checkpointCommand')
          return { operationId: 'op', checkpointRelationId: 'kept' };
        const a = answers[current];
        return a ? { operationId: 'op', table: tableFromArrays(a) as Table } : { operationId: 'op' };
      },
    };
    const report = await executePlan(plan, {
      session,
      logger: pino({ level: 'silent' }),
      tags: [],
      signal: new AbortController().signal,
      policy: acme,
      beforeStep: async (s) => void (current = s.id),
    });
    return { plan, report, analysed };
  }

  it('checks the one flagged step with one analysis: check-batch resolves the events (filter and delete flag) once, later steps read its rows', async () => {
    const { plan, report, analysed } = await run(fixture('cdc-v2.check-batch'));
    const flagged = plan.steps.filter((s) => s.untrusted?.length).map((s) => s.id);
    expect(flagged).toEqual(['check-batch']);
    expect(plan.steps.find((s) => s.id === 'check-batch')?.untrusted).toEqual(['source.where', 'cdc.delete-when']);
    expect(report.completedSteps).toEqual(expect.arrayContaining(['check-batch', 'measure', 'record-tombstones', 'merge', 'delete-resurrected']));
    expect(analysed).toHaveLength(1);
  });

  it('refuses hostile config logic at the first step that carries it, before anything runs', async () => {
    const e = await run(fixture('hostile.reflect')).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).issues[0]?.message).toMatch(/step check-batch\): function reflect is not allowed/);
  });
});
