import { type Table, tableFromArrays } from 'apache-arrow';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { toJson } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError, ExitCode, InputMissingError, InternalError } from '../../../src/core/errors.js';
import { parseExpression } from '../../../src/core/expression/index.js';
import type { JobPlan, Step } from '../../../src/jobs/template.js';
import { queryStep } from '../../../src/jobs/steps.js';
import { type SparkSession, emptyReport, executePlan, stepPlan } from '../../../src/runner/executor.js';
import { tenantLogicOf } from '../../../src/runner/tenant-logic.js';
import { SparkError } from '../../../src/spark/errors.js';
import { configExpr } from '../../../src/spark/plan/config-expression.js';
import { alias, col, gt, lit } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import { type TenantLogic, TenantLogicSchema } from '../../../src/spark/proto/gen/lakehouse/jobs/plugins_pb.js';
import { type Plan, PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { tempFiles } from '../../support/files.js';
import { listedPath, pathNotFound } from '../../support/listing.js';
import { testCommand } from '../../support/sql.js';

/** The tenant logic a compiled plan carries (lakehouse.jobs.TenantLogic plugin relations). */
function tenantLogicIn(plan: unknown, out: TenantLogic[] = []): TenantLogic[] {
  if (typeof plan !== 'object' || plan === null) return out;
  const any = plan as { $typeName?: string; typeUrl?: string };
  if (any.$typeName === 'google.protobuf.Any' && any.typeUrl === 'type.googleapis.com/lakehouse.jobs.TenantLogic')
    out.push(anyUnpack(plan as never, TenantLogicSchema)!);
  for (const v of Object.values(plan)) tenantLogicIn(v, out);
  return out;
}

const where = (text: string) => {
  const parsed = parseExpression(text);
  if (!parsed.ok) throw new Error(`bad test expression ${text}`);
  return configExpr({ text, ast: parsed.ast });
};
const source = Query.table(['lake', 'acme_silver', 'o']);

const query = (untrusted?: string[]): Step =>
  queryStep({
    id: 'probe',
    title: 'probe',
    query: source.filter(untrusted ? where('id > 0') : gt(col('id'), lit(0))).select(alias(lit(1), 'one')),
    columns: ['one'],
    interpret: () => ({}),
    ...(untrusted ? { untrusted } : {}),
  });

/** A fake session that records what it was sent and answers with `answer` (a failure, or nothing). */
function session(answer?: (plan: Plan) => Error | undefined) {
  const sent: Plan[] = [];
  const s: SparkSession = {
    execute: async (plan) => {
      sent.push(plan);
      const e = answer?.(plan);
      if (e) throw e;
      return { operationId: 'op' };
    },
    analyze: {
      schema: async (plan) => {
        sent.push(plan);
        const e = answer?.(plan);
        if (e) throw e;
        return {};
      },
      inputFiles: async () => [],
    },
    config: { set: async () => undefined, unset: async () => undefined },
  };
  return { s, sent };
}
const run = (plan: JobPlan, s: SparkSession) =>
  executePlan(plan, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });

const refusal = (reason: string, paths: string[]) =>
  new SparkError({
    grpcCode: 13,
    errorClass: 'LAKEHOUSE_TENANT_POLICY',
    message: `[LAKEHOUSE_TENANT_POLICY] refused by the tenant policy: ${reason}`,
    messageParameters: { reason, configPaths: paths.join('\n') },
    classes: ['lakehouse.jobs.spark.TenantPolicyException'],
    causes: [],
  });

describe('executor: config logic is sent as tenant logic, for the server to judge', () => {
  it("wraps a flagged step's config part, and sends an unflagged step as it is", async () => {
    const { s, sent } = session();
    await run({ steps: [query(['source.where']), query()] }, s);
    expect(sent).toHaveLength(2);
    const [flagged, plain] = sent.map((p) => tenantLogicIn(p));
    expect(flagged).toHaveLength(1);
    expect(flagged![0]!.configPaths).toEqual(['source.where']);
    // The wrapped part is the filter holding the expression, with its input: the template's select stays outside.
    expect(flagged![0]!.relation?.relType.case).toBe('filter');
    expect(plain).toEqual([]);
  });

  it('counts the JDBC reads the wrapped part declares itself (the server allows no more)', () => {
    const jdbc = Query.read('jdbc', { options: { url: 'jdbc:sqlite:x.db', dbtable: 'orders' } }).filter(where('id > 0'));
    const step = queryStep({ id: 'q', title: 'q', query: jdbc, columns: [], interpret: () => ({}), untrusted: ['source.where'] });
    expect(tenantLogicIn(stepPlan(tenantLogicOf(step), { reveal: false }))[0]?.jdbcSources).toBe(1);
  });

  it("a refusal of the server is the config's error (78) at the config paths, and nothing after it runs", async () => {
    const { s, sent } = session((p) =>
      tenantLogicIn(p).length ? refusal('function reflect (line 1, column 8) is not allowed in tenant logic', ['source.where']) : undefined,
    );
    const report = emptyReport();
    const e = await executePlan(
      { steps: [query(['source.where']), query()] },
      { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal, report },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).exitCode).toBe(ExitCode.config);
    expect((e as ConfigError).issues).toEqual([
      { path: 'source.where', message: 'refused by the tenant policy: function reflect (line 1, column 8) is not allowed in tenant logic' },
    ]);
    expect(sent).toHaveLength(1);
    expect(report.failedStep).toBe('probe');
  });

  it("the tenant's own mistake: the column, its position and the suggestions at the path; a missing table is 66", async () => {
    const analysis = (params: Record<string, string>) =>
      new SparkError({
        grpcCode: 13,
        errorClass: 'LAKEHOUSE_TENANT_ANALYSIS',
        message: '[LAKEHOUSE_TENANT_ANALYSIS] …',
        messageParameters: { configPaths: 'transform.sql', ...params },
        classes: [],
        causes: [],
      });
    const column = await run(
      { steps: [query(['transform.sql'])] },
      session(() =>
        analysis({ errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION', objectName: '`amout`', line: '3', column: '8', suggestions: '[`amount`, `id`]' }),
      ).s,
    ).catch((x: unknown) => x);
    expect(column).toBeInstanceOf(ConfigError);
    expect((column as ConfigError).issues[0]).toEqual({
      path: 'transform.sql',
      message: 'names a column that does not exist: `amout` at line 3, column 8 (did you mean `amount`, `id`?) [UNRESOLVED_COLUMN.WITH_SUGGESTION]',
    });
    const table = await run(
      { steps: [query(['transform.sql'])] },
      session(() => analysis({ errorClass: 'TABLE_OR_VIEW_NOT_FOUND', objectName: '`lake`.`acme_silver`.`nope`', line: '1', column: '15' })).s,
    ).catch((x: unknown) => x);
    expect(table).toBeInstanceOf(InputMissingError);
    expect((table as InputMissingError).message).toMatch(/^transform.sql: names a table that does not exist: `lake`.`acme_silver`.`nope` at line 1, column 15/);
  });

  it('a step that rewrote the tenant’s text maps the server’s positions back to it (and to the config path of that text)', async () => {
    const step: Step = {
      ...query(['transform.steps']),
      // As gold would: the sent text's line 3 is line 1 of the second step, its columns shifted by 4.
      mapPosition: ({ line, column }) => ({ configPath: 'transform.steps[1].sql', line: line - 2, column: column - 4 }),
    };
    const refusedAt = await run(
      { steps: [step] },
      session(() => refusal('function reflect (line 3, column 12) is not allowed in tenant logic', ['transform.steps'])).s,
    ).catch((x: unknown) => x);
    expect((refusedAt as ConfigError).issues).toEqual([
      { path: 'transform.steps[1].sql', message: 'refused by the tenant policy: function reflect (line 1, column 8) is not allowed in tenant logic' },
    ]);
    const analysis = new SparkError({
      grpcCode: 13,
      errorClass: 'LAKEHOUSE_TENANT_ANALYSIS',
      message: '[LAKEHOUSE_TENANT_ANALYSIS] …',
      messageParameters: {
        configPaths: 'transform.steps',
        errorClass: 'UNRESOLVED_COLUMN.WITHOUT_SUGGESTION',
        objectName: '`x`',
        line: '4',
        column: '9',
        startIndex: '70',
      },
      classes: [],
      causes: [],
    });
    const column = await run({ steps: [step] }, session(() => analysis).s).catch((x: unknown) => x);
    expect((column as ConfigError).issues).toEqual([
      { path: 'transform.steps[1].sql', message: 'names a column that does not exist: `x` at line 2, column 5 [UNRESOLVED_COLUMN.WITHOUT_SUGGESTION]' },
    ]);
  });

  it('wraps the input of a flagged create, and refuses config logic in SQL commands (a template bug) before sending anything', async () => {
    const create: Step = {
      kind: 'ensureTable',
      id: 'create-table',
      title: 'create',
      table: { catalog: 'lake', namespace: 'acme_silver', table: 'x' },
      location: 'file:///lake/acme/silver/x',
      configPath: 'target.table',
      create: source.filter(where('id > 0')).limit(0).writeTo(['lake', 'acme_silver', 'x'], 'create'),
      untrusted: ['source.where'],
    };
    const sent = tenantLogicOf(create);
    expect(sent.kind === 'ensureTable' && tenantLogicIn(stepPlan(sent, { reveal: false }))).toHaveLength(1);
    const { s, sent: plans } = session((p) => {
      const path = listedPath(p);
      if (path !== undefined) return pathNotFound(path);
      return tenantLogicIn(p).length
        ? undefined
        : new SparkError({ grpcCode: 3, errorClass: 'TABLE_OR_VIEW_NOT_FOUND', message: 'not found', messageParameters: {}, classes: [], causes: [] });
    });
    await run({ steps: [create] }, s);
    expect(plans.filter((p) => tenantLogicIn(p).length)).toHaveLength(1);
    const sql: Step = { kind: 'command', id: 'c', title: 'c', command: testCommand('SELECT 1'), untrusted: ['source.where'] };
    const quiet = session();
    await expect(run({ steps: [sql] }, quiet.s)).rejects.toThrow(InternalError);
    expect(quiet.sent).toEqual([]);
  });
});

describe('executor: a cdc-silver-merge run sends its config logic once', () => {
  const config = `
job    { template = "cdc-silver-merge", schema-version = 2, name = "x" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "amount > 0" }
cdc    { primary-key = ["id"], sequence-by = ["ts"], delete-when = "op = 'd'" }
target { table = "orders" }`;
  /** One-row answers of the query steps, so that every step runs (resurrected rows included). */
  const answers: Record<string, Record<string, bigint[]>> = {
    'check-batch': { events: [10n], keys: [4n], flagged: [0n] },
    // stale > 0: the second look runs whatever the commit window shows.
    measure: { inserted: [1n], updated: [1n], deleted: [1n], late: [0n], tombstones: [1n], stale: [1n], expired: [0n] },
    'find-resurrected': { rows: [1n] },
  };

  it('check-batch resolves the events (filter and delete flag) as tenant logic once; later steps read its kept rows', async () => {
    const loaded = await loadJob({ configFile: join(tempFiles({ 'job.conf': config }), 'job.conf'), overrides: [], env: {}, runId: 'r' });
    let current = '';
    let probes = 0;
    const logic: string[] = [];
    const session: SparkSession = {
      analyze: {
        // Bronze has no column of the template's own names; the two tables are missing (so both
        // creates run); then schemas compare equal.
        schema: async (p) => {
          if (tenantLogicIn(p).length) logic.push(current);
          const path = listedPath(p);
          if (path !== undefined) throw pathNotFound(path);
          if (current === 'check-source-columns')
            return { kind: { case: 'struct', value: { fields: ['id', 'ts', 'op', 'amount'].map((name) => ({ name, nullable: true })) } } };
          if (probes++ < 2)
            throw new SparkError({ grpcCode: 3, errorClass: 'TABLE_OR_VIEW_NOT_FOUND', message: 'not found', messageParameters: {}, classes: [], causes: [] });
          return { kind: { case: 'struct', value: { fields: [] } } };
        },
        inputFiles: async () => [],
      },
      config: { set: async () => undefined },
      execute: async (sent) => {
        if (tenantLogicIn(sent).length) logic.push(current);
        // check-batch first keeps the resolved batch (a checkpoint), then queries it.
        if (sent.opType.case === 'command' && sent.opType.value.commandType.case === 'checkpointCommand')
          return { operationId: 'op', checkpointRelationId: 'kept' };
        const a = answers[current];
        return a ? { operationId: 'op', table: tableFromArrays(a) as Table } : { operationId: 'op' };
      },
    };
    const report = await executePlan(loaded.plan, {
      session,
      logger: pino({ level: 'silent' }),
      tags: [],
      signal: new AbortController().signal,
      beforeStep: async (s) => void (current = s.id),
    });
    expect(report.completedSteps).toEqual(expect.arrayContaining(['check-batch', 'measure', 'record-tombstones', 'merge', 'delete-resurrected']));
    expect(logic).toEqual(['check-batch']);
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
source { table = "orders", url = "jdbc:sqlite:/data/shop.db" ${extra} }
target { table = "orders", snapshot-date = "2026-07-05" ${version === 2 ? ', format = iceberg' : ''} }`;
    // count-snapshot too: what diff reads in its place (`predict`) counts the source's rows.
    expect(await flagged(jdbc(1, ', where = "id > 0"'))).toEqual(['probe-source:source.where', 'write-snapshot:source.where', 'count-snapshot:source.where']);
    expect(await flagged(jdbc(2, ', where = "id > 0"'))).toEqual([
      'probe-source:source.where',
      'create-table:source.where',
      'write-snapshot:source.where',
      'count-snapshot:source.where',
    ]);
    expect(await flagged(jdbc(1, ''))).toEqual([]);
  });
});
