import { EventEmitter } from 'node:events';
import { queryStep } from '../../../src/jobs/steps.js';
import { createServer, type Server, type Socket } from 'node:net';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create } from '@bufbuild/protobuf';
import { tableFromArrays } from 'apache-arrow';
import { CancelledError, cliFailure, ConfigError, DataError, ExitCode, UsageError } from '../../../src/core/errors.js';
import { SparkError } from '../../../src/spark/errors.js';
import { DataTypeSchema, type DataType } from '../../../src/spark/proto/gen/spark/connect/types_pb.js';
import { Query } from '../../../src/spark/plan/query.js';
import { emptyReport, executePlan, type SparkSession } from '../../../src/runner/executor.js';
import { runJob, type RunRequest } from '../../../src/runner/run.js';
import type { JobPlan } from '../../../src/jobs/template.js';
import { tempFiles } from '../../support/files.js';
import { repoRoot } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';

const config = join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf');
const platform = join(repoRoot, 'configs/examples/platform-local.conf');

describe('how the CLI ends for an escaped error', () => {
  it('is 70 for an unknown JavaScript error, with its stack', () => {
    let e: unknown;
    try {
      (undefined as unknown as { x: () => void }).x();
    } catch (caught) {
      e = caught;
    }
    const f = cliFailure(e);
    expect(f).toMatchObject({ exitCode: ExitCode.internal, usage: false });
    expect(f.message).toMatch(/^internal error: Cannot read properties of undefined/);
    expect(f.stack).toContain('TypeError');
    expect(f.stack).toContain('run.test.ts');
  });

  it('is 64 only for usage problems', () => {
    expect(cliFailure(new UsageError('--config <file> is required'))).toMatchObject({ exitCode: 64, usage: true });
    expect(cliFailure(Object.assign(new Error('Unknown argument: x'), { name: 'YError' }))).toMatchObject({ exitCode: 64, usage: true });
  });

  it('keeps the code of a LakehouseError', () => {
    expect(cliFailure(new ConfigError('bad'))).toMatchObject({ exitCode: 78, usage: false });
    expect(cliFailure(new CancelledError('SIGTERM'))).toMatchObject({ exitCode: 143 });
    expect(cliFailure('a string')).toMatchObject({ exitCode: 70 });
  });
});

describe('a TypeError inside a command', () => {
  it('ends the run with 70, an internal error in the status and its stack in the log', async () => {
    // A request the CLI never builds (a view whose plan printer is not a function) makes printing
    // the plan throw a TypeError: a stand-in for any bug. The run happens in a child process so its log
    // (stderr) can be read.
    const statusFile = join(tempFiles({}), 'status.json');
    const code = `
      const { runJob } = await import(${JSON.stringify(join(repoRoot, 'src/runner/run.ts'))});
      const exit = await runJob({ command: 'plan', config: ${JSON.stringify(config)}, envFile: ${JSON.stringify(platform)}, set: [], logLevel: 'info',
        env: { LAKEHOUSE_LAKE_HOME: '/srv/lake' }, statusFile: ${JSON.stringify(statusFile)}, view: { plan: 42 } });
      process.exitCode = exit;`;
    const child = spawn(process.execPath, ['--import', `file://${repoRoot}node_modules/tsx/dist/loader.mjs`, '--input-type=module', '-e', code], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exit = await new Promise<number | null>((r) => child.on('close', r));
    expect(exit, stderr).toBe(70);
    expect(JSON.parse(readFileSync(statusFile, 'utf8'))).toMatchObject({
      status: 'failed',
      exitCode: 70,
      error: { code: 'INTERNAL', category: 'internal', retryable: false },
    });
    const line = stderr.split('\n').find((l) => l.includes('"code":"INTERNAL"'));
    expect(line).toBeDefined();
    const logged = JSON.parse(line!);
    expect(logged.error.type).toBe('TypeError');
    expect(logged.error.stack).toMatch(/TypeError: .*\n\s+at /);
  });
});

describe('the cancel grace period', () => {
  let silent: Server;
  let port: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    silent = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    port = (silent.address() as { port: number }).port;
  });
  afterAll(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });

  it('writes the cancelled status and exits when winding down overruns it', async () => {
    const signals = new EventEmitter();
    const docs: string[] = [];
    const exits: number[] = [];
    const req: RunRequest = {
      command: 'run',
      config,
      envFile: platform,
      remote: `sc://127.0.0.1:${port}`,
      set: [],
      logLevel: 'silent',
      env: { LAKEHOUSE_LAKE_HOME: '/srv/lake' },
      targets: { stdout: (t) => docs.push(t) },
      signals,
      exitNow: (c) => exits.push(c),
      // Releasing the session on the silent endpoint waits up to 3 s: longer than this grace.
      cancelGraceMs: 300,
    };
    const running = runJob(req);
    await new Promise((r) => setTimeout(r, 500));
    const sentAt = Date.now();
    signals.emit('SIGTERM');
    while (exits.length === 0 && Date.now() - sentAt < 10_000) await new Promise((r) => setTimeout(r, 20));
    expect(exits).toEqual([143]);
    expect(Date.now() - sentAt).toBeLessThan(2_000);
    expect(docs).toHaveLength(1);
    expect(JSON.parse(docs[0]!)).toMatchObject({ status: 'cancelled', exitCode: 143, completedSteps: [] });
    // The run itself still ends, without a second status document.
    expect(await running).toBe(143);
    expect(docs).toHaveLength(1);
  });
});

describe('the execution report', () => {
  const plan: JobPlan = {
    steps: [
      queryStep({
        id: 'measure',
        title: 'measure',
        query: testQuery('SELECT 1'),
        columns: [],
        interpret: () => ({ output: { table: 'lake.t', format: 'iceberg', metrics: { inserted: 2 } } }),
      }),
      { kind: 'command', id: 'record-tombstones', title: 'tombstones', command: testCommand('MERGE INTO a') },
      { kind: 'command', id: 'merge', title: 'merge', command: testCommand('MERGE INTO b') },
      { kind: 'command', id: 'expire', title: 'expire', command: testCommand('DELETE FROM a') },
    ],
  } as JobPlan;

  it('keeps the completed steps, their outputs and the failed step when a later step fails', async () => {
    let calls = 0;
    const session: SparkSession = {
      execute: async () => {
        if (++calls === 3) throw new Error('server gone');
        return { operationId: `op-${calls}` };
      },
      analyze: { schema: async () => ({}), inputFiles: async () => [] },
      config: { set: async () => undefined, unset: async () => undefined },
    };
    const report = emptyReport();
    await expect(executePlan(plan, { session, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal, report })).rejects.toThrow(
      'server gone',
    );
    expect(report.completedSteps).toEqual(['measure', 'record-tombstones']);
    expect(report.failedStep).toBe('merge');
    expect(report.outputs).toEqual([{ table: 'lake.t', format: 'iceberg', metrics: { inserted: 2 } }]);
    expect(report.operationIds).toHaveLength(3);
  });

  it('lists every step of a run that succeeded', async () => {
    const session: SparkSession = {
      execute: async () => ({ operationId: 'x' }),
      analyze: { schema: async () => ({}), inputFiles: async () => [] },
      config: { set: async () => undefined, unset: async () => undefined },
    };
    const report = await executePlan(plan, { session, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });
    expect(report.completedSteps).toEqual(['measure', 'record-tombstones', 'merge', 'expire']);
    expect(report.failedStep).toBeUndefined();
  });
});

describe('finding the bad source file', () => {
  const bronze = 'file:///lake/acme/bronze/events';
  const readPlan: JobPlan = {
    steps: [
      queryStep({
        id: 'check-batch',
        title: 'check',
        query: Query.read('parquet', { paths: [bronze], options: { mergeSchema: 'true' } }).select('id'),
        columns: ['id'],
        interpret: () => ({}),
      }),
    ],
  } as JobPlan;
  const struct = (fields: Record<string, DataType['kind']['case']>): DataType =>
    create(DataTypeSchema, {
      kind: {
        case: 'struct',
        value: { fields: Object.entries(fields).map(([name, c]) => ({ name, nullable: true, dataType: { kind: { case: c, value: {} } } as never })) },
      },
    });
  const mergeFailure = new SparkError({
    grpcCode: 13,
    message: 'Failed merging schemas',
    errorClass: 'CANNOT_MERGE_SCHEMAS',
    messageParameters: { left: '"STRUCT<id: BIGINT, amount: INT>"', right: '"STRUCT<id: BIGINT, amount: STRING>"' },
    classes: [],
    causes: [],
  });
  const nanosFailure = new SparkError({
    grpcCode: 13,
    message: 'Illegal Parquet type',
    errorClass: 'PARQUET_TYPE_ILLEGAL',
    messageParameters: { parquetType: 'INT64 (TIMESTAMP(NANOS,false))' },
    classes: [],
    causes: [],
  });

  /** A session where the step fails with `failure` and each file has the given schema (or fails). */
  function lake(failure: Error, files: Record<string, DataType | Error>, nanosAsLong: Record<string, DataType> = {}) {
    const sent: string[] = [];
    const conf: Record<string, string> = {};
    const session: SparkSession = {
      execute: async (plan) => {
        const text = JSON.stringify(plan, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
        if (text.includes('binaryFile')) {
          sent.push('list');
          return { operationId: 'l', table: tableFromArrays({ path: Object.keys(files) }) };
        }
        throw failure;
      },
      analyze: {
        schema: async (plan) => {
          const file = Object.keys(files).find((f) => JSON.stringify(plan).includes(f))!;
          sent.push(`schema ${file}`);
          const answer = conf['spark.sql.legacy.parquet.nanosAsLong'] === 'true' ? (nanosAsLong[file] ?? files[file]) : files[file];
          if (answer instanceof Error) throw answer;
          return answer;
        },

        inputFiles: async () => [],
      },
      config: {
        set: async (pairs) => Object.assign(conf, pairs),
        unset: async (keys) => {
          for (const k of keys) delete conf[k];
        },
      },
    };
    return { session, sent, conf };
  }
  const exec = (session: SparkSession) =>
    executePlan(readPlan, { session, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal }).then(
      () => undefined,
      (e: unknown) => e,
    );

  it('names the file and column of a type clash between files (65)', async () => {
    const { session } = lake(mergeFailure, {
      [`${bronze}/d=1/a.parquet`]: struct({ id: 'long', amount: 'integer' }),
      [`${bronze}/d=2/b.parquet`]: struct({ id: 'long', amount: 'string' }),
      [`${bronze}/d=3/c.parquet`]: struct({ id: 'long', amount: 'integer' }),
    });
    const e = (await exec(session)) as DataError;
    expect(e).toBeInstanceOf(DataError);
    expect(e.exitCode).toBe(65);
    expect(e.code).toBe('SOURCE_TYPE_MISMATCH');
    expect(e.message).toMatch(
      /^source file file:\/\/\/lake\/acme\/bronze\/events\/d=2\/b\.parquet: column amount is string in this file, int in 2 other files of the source\. Fix: /,
    );
    expect(e.report().hint).toContain('cast');
  });

  it('names the file and column of nanosecond timestamps, and restores the session setting', async () => {
    const { session, conf } = lake(
      nanosFailure,
      { [`${bronze}/d=1/a.parquet`]: struct({ id: 'long', ts: 'timestamp' }), [`${bronze}/d=2/n.parquet`]: nanosFailure },
      { [`${bronze}/d=2/n.parquet`]: struct({ id: 'long', ts: 'long' }) },
    );
    const e = (await exec(session)) as DataError;
    expect(e.code).toBe('SOURCE_TYPE_UNSUPPORTED');
    expect(e.message).toMatch(
      /^source file file:\/\/\/lake\/acme\/bronze\/events\/d=2\/n\.parquet: column ts holds a Parquet type Spark cannot read \(nanosecond timestamps\)/,
    );
    expect(conf).toEqual({});
  });

  it('leaves other errors, and failures it cannot locate, as they were', async () => {
    const other = new Error('server gone');
    expect(await exec(lake(other, {}).session)).toBe(other);
    // All files agree (the clash is elsewhere, or a file vanished): nothing better to say.
    const agreeing = lake(mergeFailure, { [`${bronze}/a.parquet`]: struct({ id: 'long' }), [`${bronze}/b.parquet`]: struct({ id: 'long' }) });
    expect(await exec(agreeing.session)).toBe(mergeFailure);
    expect(agreeing.sent).toEqual(['list', `schema ${bronze}/a.parquet`, `schema ${bronze}/b.parquet`]);
  });

  it('gives up on sources with too many files to read one by one', async () => {
    const files = Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`${bronze}/f${i}.parquet`, struct({ id: 'long' })]));
    const big = lake(mergeFailure, files);
    expect(await exec(big.session)).toBe(mergeFailure);
    expect(big.sent).toEqual(['list']);
  });
});
