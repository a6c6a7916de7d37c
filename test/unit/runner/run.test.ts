import { EventEmitter } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CancelledError, cliFailure, ConfigError, ExitCode, UsageError } from '../../../src/core/errors.js';
import { Query, sqlCommand } from '../../../src/spark/plan/query.js';
import { emptyReport, executePlan, type SparkSession } from '../../../src/runner/executor.js';
import { runJob, type RunRequest } from '../../../src/runner/run.js';
import type { JobPlan } from '../../../src/jobs/template.js';
import { tempFiles } from '../../support/files.js';
import { repoRoot } from '../../support/stack.js';

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

  it('is 64 only for usage problems (ours and yargs\')', () => {
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
    // A request the CLI never builds (a stdout that is not a function) makes printing the plan
    // throw a TypeError: a stand-in for any bug. The run happens in a child process so its log
    // (stderr) can be read.
    const statusFile = join(tempFiles({}), 'status.json');
    const code = `
      const { runJob } = await import(${JSON.stringify(join(repoRoot, 'src/runner/run.ts'))});
      const exit = await runJob({ command: 'plan', config: ${JSON.stringify(config)}, envFile: ${JSON.stringify(platform)}, set: [], logLevel: 'info',
        env: { LAKEHOUSE_LAKE_HOME: '/srv/lake' }, statusFile: ${JSON.stringify(statusFile)}, targets: { stdout: 42 } });
      process.exitCode = exit;`;
    const child = spawn(process.execPath, ['--import', `file://${repoRoot}node_modules/tsx/dist/loader.mjs`, '--input-type=module', '-e', code], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exit = await new Promise<number | null>((r) => child.on('close', r));
    expect(exit, stderr).toBe(70);
    expect(JSON.parse(readFileSync(statusFile, 'utf8'))).toMatchObject({ status: 'failed', exitCode: 70, error: { code: 'INTERNAL', category: 'internal', retryable: false } });
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
      { kind: 'query', id: 'measure', title: 'measure', query: Query.sql('SELECT 1'), interpret: () => ({ output: { table: 'lake.t', format: 'iceberg', metrics: { inserted: 2 } } }) },
      { kind: 'command', id: 'record-tombstones', title: 'tombstones', command: sqlCommand('MERGE INTO a') },
      { kind: 'command', id: 'merge', title: 'merge', command: sqlCommand('MERGE INTO b') },
      { kind: 'command', id: 'expire', title: 'expire', command: sqlCommand('DELETE FROM a') },
    ],
  } as JobPlan;

  it('keeps the completed steps, their outputs and the failed step when a later step fails', async () => {
    let calls = 0;
    const session: SparkSession = {
      execute: async () => {
        if (++calls === 3) throw new Error('server gone');
        return { operationId: `op-${calls}` };
      },
      analyze: { schema: async () => ({}) },
    };
    const report = emptyReport();
    await expect(
      executePlan(plan, { session, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal, report }),
    ).rejects.toThrow('server gone');
    expect(report.completedSteps).toEqual(['measure', 'record-tombstones']);
    expect(report.failedStep).toBe('merge');
    expect(report.outputs).toEqual([{ table: 'lake.t', format: 'iceberg', metrics: { inserted: 2 } }]);
    expect(report.operationIds).toHaveLength(3);
  });

  it('lists every step of a run that succeeded', async () => {
    const session: SparkSession = { execute: async () => ({ operationId: 'x' }), analyze: { schema: async () => ({}) } };
    const report = await executePlan(plan, { session, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });
    expect(report.completedSteps).toEqual(['measure', 'record-tombstones', 'merge', 'expire']);
    expect(report.failedStep).toBeUndefined();
  });
});
