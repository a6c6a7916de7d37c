import { EventEmitter } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadJob, type LoadedJob } from '../../../../src/runner/load-job.js';
import { ConfigError, DataError } from '../../../../src/core/errors.js';
import { createLogger } from '../../../../src/core/logger.js';
import { templates } from '../../../../src/jobs/registry.js';
import { errorSummary, LineageRun, parentFromEnv } from '../../../../src/runner/lineage/index.js';
import { jdbcDataset, kafkaDatasets, locationDataset } from '../../../../src/runner/lineage/naming.js';
import { sendAll, type Transport, transportsOf } from '../../../../src/runner/lineage/transports.js';
import { uuidv7 } from '../../../../src/runner/lineage/uuid.js';
import { runJob } from '../../../../src/runner/run.js';
import { platformSchema } from '../../../../src/core/config/platform.js';
import { tempFiles } from '../../../support/files.js';
import { openLineageProblems } from '../../../support/openlineage.js';
import { repoRoot } from '../../../support/stack.js';
import { startFakeSpark, type FakeSpark } from '../../spark/fake-spark.js';

/**
 * OpenLineage events without Spark: names, ids, the events of every template in the catalog built
 * from its example's plan, the transports against a local receiver, and a cancelled run's ABORT.
 * test/integration/lineage/ has the real runs.
 */

const env = { LAKEHOUSE_LAKE_HOME: '/srv/lake' };

function capture() {
  const lines: string[] = [];
  const logger = createLogger('info', {}, (l) => void lines.push(l));
  return { lines, logger, text: () => lines.join('') };
}

const memory = (events: Record<string, any>[]): Transport => ({ name: 'memory', send: async (line) => void events.push(JSON.parse(line)) }); // eslint-disable-line @typescript-eslint/no-explicit-any

describe('run ids', () => {
  it('are UUIDv7: version 7, RFC variant, the start time in the first 48 bits, unique', () => {
    const t = Date.parse('2026-07-05T10:00:00.123Z');
    const id = uuidv7(t);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(t);
    const many = new Set(Array.from({ length: 1000 }, () => uuidv7(t)));
    expect(many.size).toBe(1000);
    expect(uuidv7(t + 1) > uuidv7(t)).toBe(true);
  });
});

describe('dataset names (OpenLineage naming)', () => {
  it('names files and table locations by storage: file, s3 (s3a), hdfs, abfss', () => {
    expect(locationDataset('file:///var/lake/acme/bronze/orders')).toEqual({ namespace: 'file', name: '/var/lake/acme/bronze/orders' });
    expect(locationDataset('file:/var/lake/x/')).toEqual({ namespace: 'file', name: '/var/lake/x' });
    expect(locationDataset('s3a://lake/acme/silver/orders')).toEqual({ namespace: 's3://lake', name: 'acme/silver/orders' });
    expect(locationDataset('hdfs://nn:8020/lake/acme')).toEqual({ namespace: 'hdfs://nn:8020', name: 'lake/acme' });
    expect(locationDataset('abfss://c@acct.dfs.core.windows.net/acme/t')).toEqual({ namespace: 'abfss://c@acct.dfs.core.windows.net', name: 'acme/t' });
  });

  it('names JDBC tables by host, port, database and table; credentials and parameters never enter a name', () => {
    expect(jdbcDataset('jdbc:postgresql://app:secret@db.example:6543/crm?password=hunter22&ssl=true', 'sales.orders')).toEqual({
      namespace: 'postgres://db.example:6543',
      name: 'crm.sales.orders',
    });
    expect(jdbcDataset('jdbc:postgresql://db.example/crm', 'orders')).toEqual({ namespace: 'postgres://db.example:5432', name: 'crm.public.orders' });
    expect(jdbcDataset('jdbc:mysql://my.example:3307/shop?user=a&password=b', 'orders')).toEqual({ namespace: 'mysql://my.example:3307', name: 'shop.orders' });
    expect(jdbcDataset('jdbc:sqlserver://ms.example;databaseName=erp;password=pw123', 'orders')).toEqual({
      namespace: 'sqlserver://ms.example:1433',
      name: 'erp.dbo.orders',
    });
    expect(jdbcDataset('jdbc:sqlite:/var/db/shop.db', 'orders')).toEqual({ namespace: 'sqlite:///var/db/shop.db', name: 'orders' });
    expect(jdbcDataset('jdbc:sqlite::memory:', 'orders')).toBeUndefined();
    expect(jdbcDataset('not a url', 'orders')).toBeUndefined();
  });

  it('names Kafka topics by the first bootstrap server', () => {
    expect(kafkaDatasets('b1.example:9092,b2.example:9092', ['orders', 'refunds'])).toEqual([
      { namespace: 'kafka://b1.example:9092', name: 'orders' },
      { namespace: 'kafka://b1.example:9092', name: 'refunds' },
    ]);
  });
});

/** The local platform config, or an example's own (`<template>.platform.conf`), with lineage added. */
function platformFor(lineage: string, example?: string): string {
  const own = example ? join(repoRoot, dirname(example), `${basename(example).split('.')[0]}.platform.conf`) : undefined;
  const base = own && existsSync(own) ? own : join(repoRoot, 'configs/examples/platform-local.conf');
  return `${readFileSync(base, 'utf8')}\nlineage { ${lineage} }\n`;
}

/** An example loaded under the local platform config or, when that refuses it, its template's own. */
async function load(example: string, lineage = 'transports = [{ type = console }]', extraEnv: Record<string, string> = {}): Promise<LoadedJob> {
  const attempt = (platform: string) => {
    const dir = tempFiles({ 'platform.conf': platform });
    return loadJob({
      configFile: join(repoRoot, example),
      envFile: join(dir, 'platform.conf'),
      overrides: [],
      env: { ...env, ...extraEnv },
      runId: 'scheduled__2026-07-05T00:00:00+00:00',
      // The run's day, as the orchestrator passes it: gold-publish's replace-range needs it.
      logicalDate: '2026-07-05',
    });
  };
  try {
    return await attempt(platformFor(lineage));
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return attempt(platformFor(lineage, example));
  }
}

/** The templates that only read: they check their inputs. */
const CHECKS = new Set(['freshness-check', 'reconcile']);

describe('events from every template of the catalog (the plan path, no Spark)', () => {
  const examples = templates.flatMap((t) => t.versions.map((v) => ({ template: t.name, version: v.version, example: v.example })));

  it.each(examples)('$template v$version: START and COMPLETE valid, one run id, datasets from the plan', async ({ template, example }) => {
    const loaded = await load(example);
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const { logger } = capture();
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], {
      loaded,
      orchestratorRunId: 'scheduled__2026-07-05',
      logicalDate: '2026-07-05',
      env,
      logger,
    });
    await run.start();
    // A schema reader standing in for Spark: every dataset it is asked about has two columns.
    await run.finish({ state: 'succeeded' }, async () => [
      { name: 'id', type: 'bigint' },
      { name: 'name', type: 'string' },
    ]);
    expect(events.map((e) => e.eventType)).toEqual(['START', 'COMPLETE']);
    for (const e of events) expect(openLineageProblems(e)).toEqual([]);
    expect(events[1]!.run.runId).toBe(events[0]!.run.runId);
    expect(events[0]!.job).toMatchObject({ namespace: `lakehouse-jobs.${loaded.tenant.id}`, name: `${template}.${loaded.config.job.name}` });
    expect(events[0]!.run.facets.nominalTime.nominalStartTime).toBe('2026-07-05T00:00:00.000Z');
    // Every template but the checks writes something; the plan steps say what.
    if (CHECKS.has(template)) expect(events[0]!.outputs).toEqual([]);
    else expect(events[0]!.outputs.length).toBeGreaterThan(0);
    expect(events[1]!.outputs.map((o: any) => o.name)).toEqual(events[0]!.outputs.map((o: any) => o.name)); // eslint-disable-line @typescript-eslint/no-explicit-any
    for (const d of [...events[1]!.inputs, ...events[1]!.outputs]) expect(d.facets.schema?.fields ?? []).not.toHaveLength(1);
  });

  it('cdc-silver-merge: bronze files in, the silver table (by location, its name a symlink) and its tombstones out, silver columns from bronze columns', async () => {
    const loaded = await load('configs/examples/cdc-silver-merge.v1.conf');
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], { loaded, orchestratorRunId: 'r', env, logger: capture().logger });
    await run.start();
    await run.finish({ state: 'succeeded' }, async (ref) =>
      ref.kind === 'table' && ref.table.endsWith('__cdc_tombstones')
        ? [
            { name: 'id', type: 'bigint' },
            { name: 'ts', type: 'timestamp' },
            { name: '_deleted_at', type: 'timestamp' },
          ]
        : [
            { name: 'id', type: 'bigint' },
            { name: 'amount', type: 'decimal(12,2)' },
            { name: 'ts', type: 'timestamp' },
          ],
    );
    const [start, complete] = events;
    expect(start!.inputs).toEqual([{ namespace: 'file', name: '/srv/lake/acme/bronze/orders_cdc', facets: {} }]);
    const outs = start!.outputs.map((o: any) => [o.namespace, o.name, o.facets.symlinks.identifiers[0].namespace, o.facets.symlinks.identifiers[0].name]); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(outs.sort()).toEqual([
      ['file', '/srv/lake/acme/silver/orders', 'lake', 'acme_silver.orders'],
      ['file', '/srv/lake/acme/silver/orders__cdc_tombstones', 'lake', 'acme_silver.orders__cdc_tombstones'],
    ]);
    const silver = complete!.outputs.find((o: any) => o.name === '/srv/lake/acme/silver/orders'); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(silver.facets.schema.fields).toEqual([
      { name: 'id', type: 'bigint' },
      { name: 'amount', type: 'decimal(12,2)' },
      { name: 'ts', type: 'timestamp' },
    ]);
    expect(silver.facets.columnLineage.fields.amount.inputFields).toEqual([
      {
        namespace: 'file',
        name: '/srv/lake/acme/bronze/orders_cdc',
        field: 'amount',
        transformations: [{ type: 'DIRECT', subtype: 'IDENTITY', description: '', masking: false }],
      },
    ]);
    const tomb = complete!.outputs.find((o: any) => o.name.endsWith('__cdc_tombstones')); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(Object.keys(tomb.facets.columnLineage.fields).sort()).toEqual(['id', 'ts']);
    // The tenant's expression (source.where = "_snapshot_date = '2026-07-05'") leaves no literal in an event.
    expect(JSON.stringify(events)).not.toContain("'2026-07-05'");
    expect(JSON.stringify(events)).not.toContain('_snapshot_date =');
  });

  it('freshness-check: the checked tables in, nothing out; each check a data-quality assertion on its input, on the FAIL of a stale run too', async () => {
    const loaded = await load('configs/examples/freshness-check.v1.conf');
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], { loaded, orchestratorRunId: 'r', env, logger: capture().logger });
    await run.start();
    const check = (table: string, name: string, outcome: 'passed' | 'failed') => ({
      table,
      format: 'iceberg',
      committed: false,
      expectations: [{ name, type: 'freshness', action: 'fail', outcome, failedRows: 0, ...(name.includes('.') ? { column: name.split('.')[1] } : {}) }],
    });
    const outputs = [
      check('lake.acme_silver.orders', 'freshness', 'failed'),
      check('spark_catalog.acme_silver.orders_delta', 'freshness', 'passed'),
      check('lake.acme_bronze.orders_cdc_table', 'freshness._lake_ingested_at', 'passed'),
    ];
    await run.finish({ state: 'failed', error: new DataError('1 of 3 table(s) are stale', { code: 'STALE_TABLE' }), report: { outputs } });
    const [start, fail] = events;
    expect(start!.inputs.every((i: any) => i.inputFacets === undefined)).toBe(true); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(fail!.eventType).toBe('FAIL');
    expect(openLineageProblems(fail)).toEqual([]);
    const assertions = Object.fromEntries(fail!.inputs.map((i: any) => [i.name, i.inputFacets.dataQualityAssertions.assertions])); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(assertions).toEqual({
      '/srv/lake/acme/silver/orders': [{ assertion: 'freshness', success: false }],
      '/srv/lake/acme/silver/orders_delta': [{ assertion: 'freshness', success: true }],
      '/srv/lake/acme/bronze/orders_cdc_table': [{ assertion: 'freshness._lake_ingested_at', success: true, column: '_lake_ingested_at' }],
    });
    expect(fail!.inputs[0].inputFacets.dataQualityAssertions._schemaURL).toMatch(/DataQualityAssertionsDatasetFacet\.json/);
  });

  it("iceberg-zero-copy-append: the tables its server plugin's relation and command declare, the source in and the target out", async () => {
    const loaded = await load('configs/examples/iceberg-zero-copy-append.v1.conf');
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], { loaded, orchestratorRunId: 'r', env, logger: capture().logger });
    await run.start();
    const names = (ds: any[]) => ds.map((d) => `${d.namespace}/${d.name}`); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(names(events[0]!.inputs)).toEqual(['file//srv/lake/acme/silver/orders_2025']);
    expect(names(events[0]!.outputs)).toEqual(['file//srv/lake/acme/silver/orders_history']);
    expect(events[0]!.outputs[0].facets.symlinks.identifiers[0]).toMatchObject({ namespace: 'lake', name: 'acme_silver.orders_history' });
  });

  it('jdbc-snapshot-ingest with a platform connection: the JDBC table in, bronze out; no password, user or url parameter in an event', async () => {
    const loaded = await load('configs/examples/jdbc-snapshot-ingest.postgres.v1.conf', 'transports = [{ type = console }]', {
      CRM_DB_PASSWORD: 'pg-secret-9876',
    });
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], { loaded, orchestratorRunId: 'r', env, logger: capture().logger });
    await run.start();
    await run.finish({ state: 'failed', error: new DataError('source row id=4711 is bad') });
    expect(events[0]!.inputs.map((i: any) => `${i.namespace}/${i.name}`)).toEqual(['postgres://127.0.0.1:15432/lakehouse_test.public.customers']); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(events[0]!.outputs.map((i: any) => `${i.namespace}/${i.name}`)).toEqual(['file//srv/lake/acme/bronze/customers']); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(events[1]!.eventType).toBe('FAIL');
    expect(events[1]!.run.facets.errorMessage.message).toBe('DATA_INVALID (exit 65, data)');
    expect(openLineageProblems(events[1])).toEqual([]);
    const text = JSON.stringify(events);
    for (const leak of ['pg-secret-9876', 'lakehouse_test"', '4711']) expect(text).not.toContain(leak);
  });
});

describe('the event check itself', () => {
  it('finds what the spec forbids: a missing run id, a non-uuid, an unknown event type, a facet without _producer', () => {
    const bad = {
      eventType: 'DONE',
      eventTime: 'yesterday',
      producer: 'x',
      schemaURL: 'https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent',
      run: { runId: 'scheduled__2026', facets: { parent: { _schemaURL: 'https://x', run: {}, job: { namespace: 'a' } } } },
      job: { namespace: 'n' },
      outputs: [{ name: 'x', facets: { schema: { _producer: 'https://x', _schemaURL: 'https://x', fields: [{ type: 'int' }] } } }],
    };
    expect(openLineageProblems(bad)).toEqual(
      expect.arrayContaining([
        '$.eventType: must be one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER',
        '$.eventTime: must be an RFC 3339 date-time',
        '$.producer: must be a uri',
        '$.run.runId: must be a uuid',
        '$.run.facets.parent._producer: is required',
        '$.run.facets.parent.run.runId: is required',
        '$.run.facets.parent.job.name: is required',
        '$.job.name: is required',
        '$.outputs[0].namespace: is required',
        '$.outputs[0].facets.schema.fields[0].name: is required',
      ]),
    );
  });
});

describe('the parent run', () => {
  const uuid = '01890a5d-ac96-774b-bcce-b302099a8057';
  it("comes from the Airflow provider's lineage_parent_id (namespace/name/runId), or three variables", () => {
    expect(parentFromEnv({ OPENLINEAGE_PARENT_ID: `airflow-prod/lakehouse_medallion.silver/${uuid}` }, 'OPENLINEAGE_PARENT')).toEqual({
      namespace: 'airflow-prod',
      name: 'lakehouse_medallion.silver',
      runId: uuid,
    });
    expect(
      parentFromEnv(
        { OPENLINEAGE_PARENT_JOB_NAMESPACE: 'airflow', OPENLINEAGE_PARENT_JOB_NAME: 'dag.task', OPENLINEAGE_PARENT_RUN_ID: uuid },
        'OPENLINEAGE_PARENT',
      ),
    ).toEqual({ namespace: 'airflow', name: 'dag.task', runId: uuid });
    expect(parentFromEnv({}, 'OPENLINEAGE_PARENT')).toBeUndefined();
  });

  it('is left out, with a warning, when the run id is not a UUID (an Airflow run id is not one)', () => {
    const { logger, text } = capture();
    expect(parentFromEnv({ OPENLINEAGE_PARENT_ID: 'airflow/dag.task/scheduled__2026-07-05T00:00:00+00:00' }, 'OPENLINEAGE_PARENT', logger)).toBeUndefined();
    expect(text()).toContain('does not name a parent run');
  });

  it('and its root go into the parent facet of every event', async () => {
    const loaded = await load('configs/examples/cdc-silver-merge.v1.conf');
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const root = '01890a5d-ac96-774b-bcce-b302099a8058';
    const run = new LineageRun(loaded.platform.lineage!, [memory(events)], {
      loaded,
      orchestratorRunId: 'r',
      env: { OPENLINEAGE_PARENT_ID: `airflow/dag.task/${uuid}`, OPENLINEAGE_ROOT_PARENT_ID: `airflow/dag/${root}` },
      logger: capture().logger,
    });
    await run.start();
    expect(events[0]!.run.facets.parent).toMatchObject({
      run: { runId: uuid },
      job: { namespace: 'airflow', name: 'dag.task' },
      root: { run: { runId: root }, job: { name: 'dag' } },
    });
    expect(openLineageProblems(events[0])).toEqual([]);
  });
});

describe('errors in events', () => {
  it('carry the code, exit code and config path, never the message (it may quote data)', () => {
    expect(errorSummary(new DataError('NULL key in row {"id": "secret-value"}', { code: 'NULL_KEY' }))).toBe('NULL_KEY (exit 65, data)');
  });
});

describe('transports', () => {
  let server: Server;
  let url: string;
  const received: { path: string; auth?: string; body: string }[] = [];
  let mode: 'ok' | '500' | 'slow' = 'ok';

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ path: req.url ?? '', ...(req.headers.authorization ? { auth: req.headers.authorization } : {}), body });
        if (mode === 'slow') return; // never answers
        res.statusCode = mode === '500' ? 500 : 200;
        res.end(mode === '500' ? 'internal error with a token=abc' : '');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const config = (transports: unknown[], timeout = 1000) => platformSchema.parse({ lineage: { transports, 'timeout-ms': timeout } }).lineage!;
  const event = { eventType: 'START', run: { runId: uuidv7() } };

  it('http: POSTs the event as JSON to <url>/<endpoint> with the bearer token from its secret reference', async () => {
    mode = 'ok';
    received.length = 0;
    const { logger, text } = capture();
    const ts = transportsOf(config([{ type: 'http', url, token: { env: 'LINEAGE_TOKEN' } }]), { LINEAGE_TOKEN: 'tok-123456' }, logger);
    await sendAll(ts, event, 1000, logger);
    expect(received).toEqual([{ path: '/api/v1/lineage', auth: 'Bearer tok-123456', body: JSON.stringify(event) }]);
    expect(text()).not.toContain('tok-123456');
  });

  it('http: a 500 is a warning, and the job goes on', async () => {
    mode = '500';
    const { logger, text } = capture();
    await expect(sendAll(transportsOf(config([{ type: 'http', url, endpoint: 'lineage' }]), {}, logger), event, 1000, logger)).resolves.toBeUndefined();
    expect(text()).toContain('HTTP 500');
    expect(text()).toContain('"level":"warn"');
    expect(text()).not.toContain('token=abc');
  });

  it('http: a receiver that never answers costs at most the timeout', async () => {
    mode = 'slow';
    const { logger, text } = capture();
    const started = Date.now();
    await sendAll(transportsOf(config([{ type: 'http', url }]), {}, logger), event, 300, logger);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(1500);
    expect(text()).toContain('within 300 ms');
  });

  it('http: nothing listening is a warning', async () => {
    const { logger, text } = capture();
    await sendAll(transportsOf(config([{ type: 'http', url: 'http://127.0.0.1:9' }]), {}, logger), event, 2000, logger);
    expect(text()).toContain('"level":"warn"');
  });

  it('http: a token whose variable is missing fails that send only, as a warning', async () => {
    mode = 'ok';
    const { logger, text } = capture();
    await sendAll(transportsOf(config([{ type: 'http', url, token: { env: 'NOPE' } }]), {}, logger), event, 1000, logger);
    expect(text()).toContain('environment variable NOPE is not set');
  });

  it('file: appends one JSON line per event; console: logs it', async () => {
    const path = join(tempFiles({}), 'events.jsonl');
    const { logger, lines } = capture();
    const ts = transportsOf(config([{ type: 'file', path }, { type: 'console' }]), {}, logger);
    await sendAll(ts, event, 1000, logger);
    await sendAll(ts, { ...event, eventType: 'COMPLETE' }, 1000, logger);
    expect(
      readFileSync(path, 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).eventType),
    ).toEqual(['START', 'COMPLETE']);
    expect(
      lines
        .map((l) => JSON.parse(l))
        .filter((l) => l.openlineage)
        .map((l) => l.openlineage.eventType),
    ).toEqual(['START', 'COMPLETE']);
  });

  it('file: an unwritable file is a warning', async () => {
    const { logger, text } = capture();
    await sendAll(transportsOf(config([{ type: 'file', path: '/nonexistent-dir/x/events.jsonl' }]), {}, logger), event, 1000, logger);
    expect(text()).toContain('ENOENT');
  });

  it('the platform config refuses an http url with credentials and a relative file path (78 at its path)', () => {
    const r = platformSchema.safeParse({
      lineage: {
        transports: [
          { type: 'http', url: 'https://user:pw@lineage.example' },
          { type: 'file', path: 'events.jsonl' },
        ],
      },
    });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path.join('.'))).toEqual(['lineage.transports.0.url', 'lineage.transports.1.path']);
  });
});

describe('a cancelled run', () => {
  let hanging: FakeSpark;
  beforeAll(async () => {
    hanging = await startFakeSpark({ analyzePlan: () => new Promise(() => undefined), interrupt: () => ({ interruptedIds: [] }), releaseSession: () => ({}) });
  });
  afterAll(async () => {
    await hanging?.stop();
  });

  it('ends with ABORT (143 on SIGTERM), the run id of its START', async () => {
    const dir = tempFiles({});
    const events = join(dir, 'events.jsonl');
    writeFileSync(join(dir, 'platform.conf'), platformFor(`transports = [{ type = file, path = "${events}" }]`));
    const signals = new EventEmitter();
    const done = runJob({
      command: 'run',
      config: join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf'),
      envFile: join(dir, 'platform.conf'),
      remote: hanging.remote,
      set: [],
      logLevel: 'error',
      env,
      signals,
      exitNow: () => undefined,
      targets: { stdout: () => undefined },
      statusFile: join(dir, 'status.json'),
    });
    for (let i = 0; i < 100 && !(existsSync(events) && readFileSync(events, 'utf8').includes('START')); i++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 300));
    signals.emit('SIGTERM');
    expect(await done).toBe(143);
    const sent = readFileSync(events, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(sent.map((e) => e.eventType)).toEqual(['START', 'ABORT']);
    expect(sent[1].run.runId).toBe(sent[0].run.runId);
    expect(sent[1].run.facets.errorMessage.message).toBe('CANCELLED (exit 143, cancelled)');
    for (const e of sent) expect(openLineageProblems(e)).toEqual([]);
  }, 30_000);
});
