import { tableFromArrays } from 'apache-arrow';
import { queryStep } from '../../../src/jobs/steps.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError, InternalError } from '../../../src/core/errors.js';
import type { JobPlan, Step } from '../../../src/jobs/template.js';
import { toJson } from '@bufbuild/protobuf';
import { type SparkSession, executePlan, stepPlan } from '../../../src/runner/executor.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { alias, fn, gt, col, lit } from '../../../src/spark/plan/expressions.js';
import { SparkError } from '../../../src/spark/errors.js';
import { Query } from '../../../src/spark/plan/query.js';
import { tempFiles } from '../../support/files.js';
import { listedPath, pathNotFound } from '../../support/listing.js';

const fixtures = fileURLToPath(new URL('../spark/policy/fixtures/', import.meta.url));
const fixture = (name: string) => readFileSync(`${fixtures}${name}.explain.txt`, 'utf8');
const policy = { tenant: 'acme', namespaces: ['lake.acme_silver'], roots: ['file:///lake/acme'] };

function session(explain: string) {
  const log: string[] = [];
  const s: SparkSession = {
    execute: async () => {
      log.push('execute');
      return { operationId: 'op' };
    },
    analyze: {
      schema: async () => ({}),
      explain: async () => {
        log.push('explain');
        return explain;
      },
      inputFiles: async () => {
        log.push('inputFiles');
        return [];
      },
    },
    config: { set: async () => void log.push('conf'), getOption: async () => ({}), unset: async () => undefined },
  };
  return { s, log };
}

const query = (untrusted?: string[]): Step =>
  queryStep({
    id: 'probe',
    title: 'probe',
    query: Query.table(['lake', 'acme_silver', 'o'])
      .filter(gt(col('id'), lit(0)))
      .select(alias(lit(1), 'one')),
    columns: ['one'],
    interpret: () => ({}),
    ...(untrusted ? { untrusted } : {}),
  });
const run = (plan: JobPlan, s: SparkSession, withPolicy = true) =>
  executePlan(plan, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal, ...(withPolicy ? { policy } : {}) });

describe('executor: the policy check before flagged steps', () => {
  it('checks a flagged step before running it', async () => {
    const { s, log } = session(fixture('hostile.own'));
    await run({ steps: [query(['source.where'])] }, s);
    expect(log).toEqual(['conf', 'inputFiles', 'explain', 'execute']);
  });

  it('never runs a refused step, and fails with 78 naming the config path', async () => {
    const { s, log } = session(fixture('hostile.exists'));
    const e = await run({ steps: [query(['source.where']), query()] }, s).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).issues[0]?.path).toBe('source.where');
    expect(log).toEqual(['conf', 'inputFiles', 'explain']);
  });

  it('does not check steps without config logic', async () => {
    const { s, log } = session(fixture('hostile.exists'));
    await run(
      {
        steps: [
          query(),
          {
            kind: 'command',
            id: 'c',
            title: 'c',
            command: Query.range(0n, 1n)
              .select(alias(fn('count', lit(1)), 'n'))
              .createView('v'),
          },
        ],
      },
      s,
    );
    expect(log).toEqual(['execute', 'execute']);
  });

  it('checks a flagged ensureTable only when it creates the table', async () => {
    const create: Step = {
      kind: 'ensureTable',
      id: 'create-table',
      title: 'create',
      table: { catalog: 'lake', namespace: 'acme_silver', table: 'o' },
      location: 'file:///lake/acme/silver/o',
      configPath: 'target.table',
      create: Query.table(['lake', 'acme_silver', 'o'])
        .filter(gt(col('id'), lit(0)))
        .limit(0)
        .writeTo(['lake', 'acme_silver', 'x'], 'create'),
      untrusted: ['source.where'],
    };
    const exists = session(fixture('hostile.exists'));
    // The table exists at its layout location: only its location is read, nothing is checked or created.
    exists.s.execute = async () => {
      exists.log.push('describe');
      return { operationId: 'op', table: tableFromArrays({ col_name: ['Location'], data_type: ['file:/lake/acme/silver/o'], comment: [''] }) };
    };
    await run({ steps: [create] }, exists.s);
    expect(exists.log).toEqual(['describe']);
    const missing = session(fixture('hostile.exists'));
    missing.s.analyze.schema = async (p) => {
      const path = listedPath(p);
      if (path !== undefined) throw pathNotFound(path);
      throw new SparkError({ grpcCode: 3, errorClass: 'TABLE_OR_VIEW_NOT_FOUND', message: 'not found', messageParameters: {}, classes: [], causes: [] });
    };
    const inputFiles = missing.s.analyze.inputFiles;
    missing.s.analyze.inputFiles = async (p) => {
      const path = listedPath(p);
      if (path !== undefined) throw pathNotFound(path);
      return inputFiles(p);
    };
    await expect(run({ steps: [create] }, missing.s)).rejects.toThrow(ConfigError);
    // Its location is found empty first (no Delta log, no files), then the policy judges it.
    expect(missing.log).toEqual(['conf', 'inputFiles', 'explain']);
  });

  it('checks a flagged compareSchemas before its source is analysed', async () => {
    const { s, log } = session(fixture('hostile.reflect'));
    let analysed = 0;
    s.analyze.schema = async () => void analysed++;
    const step: Step = {
      kind: 'compareSchemas',
      id: 'check-schema',
      title: 's',
      source: Query.table(['lake', 'acme_silver', 'o']),
      table: { catalog: 'lake', namespace: 'acme_silver', table: 'o' },
      interpret: () => ({}),
      untrusted: ['cdc.delete-when'],
    };
    await expect(run({ steps: [step] }, s)).rejects.toThrow(
      /cdc.delete-when: refused by the tenant read policy \(step check-schema\): function reflect is not allowed/,
    );
    expect(analysed).toBe(0);
    expect(log).toEqual(['conf', 'inputFiles', 'explain']);
  });

  it('refuses to run a flagged step without a policy (fail closed)', async () => {
    const { s, log } = session(fixture('hostile.own'));
    await expect(run({ steps: [query(['source.where'])] }, s, false)).rejects.toThrow(InternalError);
    expect(log).toEqual([]);
  });
});

describe('templates flag the steps that carry config logic', () => {
  const lake = 'file:///lake/acme';
  async function flagged(config: string) {
    const dir = tempFiles({ 'job.conf': config });
    const loaded = await loadJob({ configFile: join(dir, 'job.conf'), overrides: [], env: {}, runId: 'r' });
    return loaded.plan.steps.filter((s) => s.untrusted).map((s) => `${s.id}:${s.untrusted!.join('+')}`);
  }
  const cdc = (version: number, extra: string) => `
job    { template = "cdc-silver-merge", schema-version = ${version}, name = "x" }
tenant { id = "acme", storage-root = "${lake}" }
cdc    { primary-key = ["id"], sequence-by = ${version === 1 ? '"ts"' : '["ts"]'} }
target { table = "orders" }
${extra}`;

  it('cdc-silver-merge: every step whose plan holds source.where or cdc.delete-when', async () => {
    // check-batch resolves the events (filtered, with their delete flag) once and keeps them; every
    // later step reads the kept rows: it holds no config logic, and is not flagged.
    expect(await flagged(cdc(1, 'source { table = "o", where = "id > 0" }'))).toEqual(['check-batch:source.where']);
    expect(await flagged(cdc(2, 'source { table = "o", where = "id > 0" }\ncdc.delete-when = "op = \'d\'"'))).toEqual([
      'check-batch:source.where+cdc.delete-when',
    ]);
    expect(await flagged(cdc(2, 'source { table = "o" }\ncdc.delete-when = "op = \'d\'"'))).toEqual(['check-batch:cdc.delete-when']);
    expect(await flagged(cdc(1, 'source { table = "o" }'))).toEqual([]);
    // No unflagged step's plan holds the config's logic (its literals mark it).
    const dir = tempFiles({ 'job.conf': cdc(2, 'source { table = "o", where = "id > 424242" }\ncdc.delete-when = "op = \'zz9\'"') });
    const loaded = await loadJob({ configFile: join(dir, 'job.conf'), overrides: [], env: {}, runId: 'r' });
    const plans = loaded.plan.steps.map((s) => [s, JSON.stringify(toJson(PlanSchema, stepPlan(s, { reveal: false })))] as const);
    expect(plans.filter(([, p]) => p.includes('424242') || p.includes('zz9')).map(([s]) => s.id)).toEqual(['check-batch']);
    for (const [s, p] of plans) if (!s.untrusted) expect(p).not.toMatch(/424242|zz9/);
  });

  it('jdbc-snapshot-ingest: the steps reading the source with source.where', async () => {
    const jdbc = (version: number, extra: string) => `
job    { template = "jdbc-snapshot-ingest", schema-version = ${version}, name = "x" }
tenant { id = "acme", storage-root = "${lake}" }
source { table = "orders", url = "jdbc:sqlite:shop.db" ${extra} }
target { table = "orders", snapshot-date = "2026-07-05" ${version === 2 ? ', format = iceberg' : ''} }`;
    expect(await flagged(jdbc(1, ', where = "id > 0"'))).toEqual(['probe-source:source.where', 'write-snapshot:source.where']);
    expect(await flagged(jdbc(2, ', where = "id > 0"'))).toEqual(['probe-source:source.where', 'create-table:source.where', 'write-snapshot:source.where']);
    expect(await flagged(jdbc(1, ''))).toEqual([]);
  });
});
