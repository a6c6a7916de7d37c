import { createServer, type Server, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeSpark, type FakeSpark } from '../spark/fake-spark.js';
import { tempFiles } from '../../support/files.js';
import { repoRoot, spawnCli, type CliResult } from '../../support/stack.js';

/**
 * Time bounds of a run, measured on the real CLI as a child process: a signal ends the run within
 * 20 s in any state (connecting, waiting between retries, analyzing), a dead server ends it within
 * the retry budget, and `ping` answers within its deadline. The servers here are transport edge
 * cases a real Spark server cannot be made to produce: nothing listening, a TCP endpoint that
 * accepts and never answers, and a Spark Connect endpoint whose AnalyzePlan never returns.
 */
const env = { LAKEHOUSE_LAKE_HOME: '/srv/lake' };
const config = join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf');
const platform = join(repoRoot, 'configs/examples/platform-local.conf');

let silent: Server;
let silentPort: number;
const sockets: Socket[] = [];
let deadPort: number;
let hanging: FakeSpark;

/** A port nobody listens on: bound, read, released. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

beforeAll(async () => {
  silent = createServer((socket) => sockets.push(socket)); // accepts, reads nothing, answers nothing
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
  deadPort = await freePort();
  hanging = await startFakeSpark({ analyzePlan: () => new Promise(() => undefined), interrupt: () => ({ interruptedIds: [] }), releaseSession: () => ({}) });
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  silent?.close();
  await hanging?.stop();
});

interface Measured {
  result: CliResult;
  /** From the signal (or the start, without one) to the exit. */
  elapsedMs: number;
  status: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * Run the CLI; once `ready` matches its stderr, `until` holds (the state the signal must find, as the
 * fake server saw it: a slow machine may take seconds to get there) and `settleMs` passed, send `signal`.
 */
async function run(
  args: string[],
  opts: { ready?: RegExp; until?: () => boolean; settleMs?: number; signal?: NodeJS.Signals; env?: Record<string, string> } = {},
): Promise<Measured> {
  const dir = tempFiles({});
  const statusFile = join(dir, 'status.json');
  const started = Date.now();
  const { child, done } = spawnCli([...args, '--status-file', statusFile], { ...env, ...opts.env });
  let sentAt = started;
  if (opts.signal) {
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const deadline = Date.now() + 30_000;
    while (!(opts.ready ?? /./).test(stderr) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(stderr).toMatch(opts.ready ?? /./);
    while (opts.until && !opts.until() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, opts.settleMs ?? 500));
    sentAt = Date.now();
    child.kill(opts.signal);
  }
  const result = await done;
  const elapsedMs = Date.now() - sentAt;
  return { result, elapsedMs, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}

const runArgs = (remote: string) => ['--config', config, '--env', platform, '--remote', remote];

describe('a signal ends the run within 20 s in any state', () => {
  it('(a) waiting between retries against a port where nothing listens: SIGTERM → 143', async () => {
    const m = await run(runArgs(`sc://127.0.0.1:${deadPort}`), { ready: /"event":"spark.retry"/, settleMs: 1_000, signal: 'SIGTERM' });
    console.log(`SIGTERM while retrying against an unreachable port: exit ${m.result.code} after ${m.elapsedMs} ms`);
    expect(m.result.code, m.result.stderr).toBe(143);
    expect(m.elapsedMs).toBeLessThan(20_000);
    expect(m.status).toMatchObject({ status: 'cancelled', exitCode: 143, error: { code: 'CANCELLED' } });
  });

  it('(b) connecting to a TCP endpoint that accepts and never answers: SIGTERM → 143', async () => {
    const m = await run(runArgs(`sc://127.0.0.1:${silentPort}`), { ready: /config valid/, settleMs: 1_000, signal: 'SIGTERM' });
    console.log(`SIGTERM while connecting to a silent endpoint: exit ${m.result.code} after ${m.elapsedMs} ms`);
    expect(m.result.code, m.result.stderr).toBe(143);
    expect(m.elapsedMs).toBeLessThan(20_000);
    expect(m.status).toMatchObject({ status: 'cancelled', exitCode: 143 });
  });

  it('(c) during an AnalyzePlan that never returns: SIGINT → 130', async () => {
    const m = await run(runArgs(hanging.remote), {
      ready: /config valid/,
      until: () => hanging.callsOf('analyzePlan').length >= 1,
      settleMs: 500,
      signal: 'SIGINT',
    });
    console.log(`SIGINT during a hanging AnalyzePlan: exit ${m.result.code} after ${m.elapsedMs} ms`);
    expect(m.result.code, m.result.stderr).toBe(130);
    expect(m.elapsedMs).toBeLessThan(20_000);
    expect(m.status).toMatchObject({ status: 'cancelled', exitCode: 130 });
    expect(hanging.callsOf('analyzePlan').length).toBeGreaterThanOrEqual(1);
  });
});

describe('the retry budget', () => {
  it('ends a run against an unreachable server with 69 within --retry-budget', async () => {
    const m = await run([...runArgs(`sc://127.0.0.1:${deadPort}`), '--retry-budget', '2']);
    console.log(`unreachable port, --retry-budget 2: exit ${m.result.code} after ${m.elapsedMs} ms`);
    expect(m.result.code, m.result.stderr).toBe(69);
    expect(m.elapsedMs).toBeLessThan(2_000 + 5_000); // the budget plus the CLI's start
    expect(m.status).toMatchObject({ status: 'failed', exitCode: 69, error: { code: 'SPARK_UNAVAILABLE', retryable: true } });
    expect(m.status.error.message).toMatch(/unreachable after \d+ attempts/);
  });

  it('reads LAKEHOUSE_RETRY_BUDGET; a silent endpoint fails each attempt as unreachable, within the budget (69)', async () => {
    const m = await run(runArgs(`sc://127.0.0.1:${silentPort}`), { env: { LAKEHOUSE_RETRY_BUDGET: '3' } });
    console.log(`silent endpoint, LAKEHOUSE_RETRY_BUDGET=3: exit ${m.result.code} after ${m.elapsedMs} ms`);
    expect(m.result.code, m.result.stderr).toBe(69);
    // The first attempt waits up to 10 s for the handshake, the retries share the 3 s left (a retry
    // waits at least 1 s), releasing the session waits up to 3 s more; plus the CLI's start.
    expect(m.elapsedMs).toBeLessThan(10_000 + 3_000 + 1_000 + 3_000 + 3_000);
    expect(m.status.error).toMatchObject({ code: 'SPARK_UNAVAILABLE', retryable: true });
    expect(m.status.error.message).toContain('did not answer');
  });

  it('refuses a budget that is not a number of seconds (64)', async () => {
    const dir = tempFiles({});
    const { done } = spawnCli([...runArgs(`sc://127.0.0.1:${deadPort}`), '--retry-budget', 'soon', '--status-file', join(dir, 's.json')], env);
    const r = await done;
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('--retry-budget must be a non-negative number of seconds, got "soon"');
  });
});

describe('ping', () => {
  const ping = async (args: string[], extraEnv: Record<string, string> = {}) => {
    const started = Date.now();
    const r = await spawnCli(['ping', ...args], { ...env, ...extraEnv }).done;
    return { ...r, elapsedMs: Date.now() - started };
  };

  it('gives up on a silent endpoint after its 10 s default deadline with 69', async () => {
    const r = await ping(['--remote', `sc://127.0.0.1:${silentPort}`]);
    console.log(`ping, silent endpoint, default deadline: exit ${r.code} after ${r.elapsedMs} ms`);
    expect(r.code, r.stderr).toBe(69);
    expect(r.elapsedMs).toBeGreaterThanOrEqual(10_000);
    expect(r.elapsedMs).toBeLessThan(10_000 + 5_000);
    expect(r.stderr).toContain('did not answer within 10 s');
  });

  it('takes --timeout, also for an AnalyzePlan that never returns', async () => {
    const r = await ping(['--remote', hanging.remote, '--timeout', '2']);
    console.log(`ping --timeout 2, hanging AnalyzePlan: exit ${r.code} after ${r.elapsedMs} ms`);
    expect(r.code, r.stderr).toBe(69);
    expect(r.elapsedMs).toBeLessThan(2_000 + 5_000);
  });

  it('answers 69 at once-ish when nothing listens', async () => {
    const r = await ping(['--remote', `sc://127.0.0.1:${deadPort}`, '--timeout', '3']);
    expect(r.code, r.stderr).toBe(69);
    expect(r.elapsedMs).toBeLessThan(3_000 + 5_000);
  });

  it('refuses a timeout that is not a number', async () => {
    const r = await ping(['--remote', `sc://127.0.0.1:${deadPort}`, '--timeout', '-1']);
    expect(r.code).toBe(64);
  });
});
