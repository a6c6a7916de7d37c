// The client's transport behaviour against a fake gRPC server: headers, retries, reattach, errors,
// cancellation. What a real server does is covered by test/integration/spark.
import { status } from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { CancelledError, ExitCode } from '../../../src/core/errors.js';
import { rows } from '../../../src/spark/arrow.js';
import { SparkConnectClient } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { OperationCancelledError, SparkError } from '../../../src/spark/errors.js';
import { PlanSchema, type Plan } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { VERSION } from '../../../src/version.js';
import {
  SERVER_SIDE_SESSION,
  arrowResponse,
  completeResponse,
  response,
  sleep,
  startFakeSpark,
  statusError,
  type FakeHandlers,
  type FakeSpark,
} from './fake-spark.js';

const plan: Plan = create(PlanSchema, { opType: { case: 'root', value: { relType: { case: 'sql', value: { query: 'SELECT 1' } } } } });
const fastRetry = { initialBackoffMs: 1, maxBackoffMs: 5, jitter: 0 };

let fake: FakeSpark | undefined;
let client: SparkConnectClient | undefined;
afterEach(async () => {
  client?.close();
  client = undefined;
  await fake?.stop();
  fake = undefined;
});

async function setup(handlers: FakeHandlers, params = '', retry: object = fastRetry): Promise<{ fake: FakeSpark; client: SparkConnectClient }> {
  fake = await startFakeSpark({ releaseExecute: () => ({}), interrupt: (r) => ({ interruptedIds: [r.interrupt.value] }), ...handlers });
  client = SparkConnectClient.connect(parseConnectionString(`${fake.remote}/;${params}`), { retry });
  return { fake, client };
}

const ids = (result: { table?: unknown }) => rows(result.table as never).map((r) => Number(r.id));

describe('every call', () => {
  it('carries the bearer token on a plaintext channel, the session, user and client type', async () => {
    const { fake, client } = await setup(
      {
        analyzePlan: () => ({ serverSideSessionId: SERVER_SIDE_SESSION, result: { case: 'sparkVersion', value: { version: '4.1.4' } } }),
        config: () => ({ serverSideSessionId: SERVER_SIDE_SESSION, pairs: [] }),
        executePlan: function* (r) {
          yield completeResponse(r.operationId, 'r1');
        },
      },
      'token=t0k3n-for-test;user_id=etl;user_agent=airflow',
    );
    expect(await client.analyze.sparkVersion()).toBe('4.1.4');
    await client.config.set({ 'spark.sql.ansi.enabled': 'true' });
    await client.execute(plan);
    const sent = fake.calls.filter((c) => c.method !== 'releaseExecute');
    expect(sent.map((c) => c.method)).toEqual(['analyzePlan', 'config', 'executePlan']);
    for (const call of fake.calls) {
      expect(call.metadata.get('authorization')).toEqual(['Bearer t0k3n-for-test']);
      expect(call.request.sessionId).toBe(client.sessionId);
      expect(call.request.userContext.userId).toBe('etl');
      expect(call.request.clientType).toBe(`airflow lakehouse-jobs/${VERSION}`);
    }
    expect(client.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    // The first call could not know the server-side session id; later ones echo it.
    expect(sent[0]?.request.clientObservedServerSideSessionId).toBeUndefined();
    expect(sent[2]?.request.clientObservedServerSideSessionId).toBe(SERVER_SIDE_SESSION);
  });

  it('sends extra connection-string parameters as headers and no authorization without a token', async () => {
    const { fake, client } = await setup({ interrupt: () => ({ interruptedIds: [] }) }, 'x-tenant=acme');
    await client.interruptAll();
    expect(fake.calls[0]?.metadata.get('x-tenant')).toEqual(['acme']);
    expect(fake.calls[0]?.metadata.get('authorization')).toEqual([]);
  });
});

describe('retries', () => {
  it('retries UNAVAILABLE with backoff until the call succeeds', async () => {
    let n = 0;
    const { fake, client } = await setup({
      analyzePlan: () => {
        if (++n <= 2) throw statusError(status.UNAVAILABLE, 'warming up');
        return { result: { case: 'sparkVersion', value: { version: '4.1.4' } } };
      },
    });
    expect(await client.analyze.sparkVersion()).toBe('4.1.4');
    expect(fake.callsOf('analyzePlan')).toHaveLength(3);
    expect(client.stats.retries).toBe(2);
  });

  it('gives up after the policy and maps to exit 69', async () => {
    const { fake, client } = await setup({ analyzePlan: () => Promise.reject(statusError(status.UNAVAILABLE, 'down')) }, '', { ...fastRetry, maxRetries: 3 });
    const e = await client.analyze.sparkVersion().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SparkError);
    expect(e).toMatchObject({ exitCode: ExitCode.unavailable, code: 'SPARK_UNAVAILABLE', retryable: true });
    expect((e as Error).message).toMatch(/after 4 attempts/);
    expect(fake.callsOf('analyzePlan')).toHaveLength(4);
  });

  it('maps an unreachable server to exit 69', async () => {
    const probe = await startFakeSpark({});
    const port = probe.port;
    await probe.stop();
    client = SparkConnectClient.connect(parseConnectionString(`sc://127.0.0.1:${port}`), { retry: { ...fastRetry, maxRetries: 2 } });
    await expect(client.analyze.sparkVersion()).rejects.toMatchObject({ exitCode: ExitCode.unavailable });
  });

  it('does not retry errors the server meant', async () => {
    const { fake, client } = await setup({
      analyzePlan: () =>
        Promise.reject(statusError(status.INTERNAL, '[PARSE_SYNTAX_ERROR] Syntax error', { errorClass: 'PARSE_SYNTAX_ERROR', sqlState: '42601' })),
    });
    await expect(client.analyze.schema(plan)).rejects.toMatchObject({ exitCode: ExitCode.config, errorClass: 'PARSE_SYNTAX_ERROR', sqlState: '42601' });
    expect(fake.callsOf('analyzePlan')).toHaveLength(1);
  });

  it('applies the per-call deadline', async () => {
    fake = await startFakeSpark({ analyzePlan: () => sleep(2000).then(() => ({})) });
    client = SparkConnectClient.connect(parseConnectionString(fake.remote), { deadlineMs: 100, retry: fastRetry });
    await expect(client.analyze.sparkVersion()).rejects.toMatchObject({ exitCode: ExitCode.transient, code: 'SPARK_TIMEOUT' });
  });
});

describe('reattachable execution', () => {
  it('asks for a reattachable operation with a client-chosen id and tags, then releases it', async () => {
    const { fake, client } = await setup({
      executePlan: function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1, 2], 0);
        yield completeResponse(r.operationId, 'r2');
      },
    });
    const result = await client.execute(plan, { tags: ['run-1'] });
    expect(ids(result)).toEqual([1, 2]);
    const req = fake.callsOf('executePlan')[0]?.request;
    expect(req.operationId).toBe(result.operationId);
    expect(req.tags).toEqual(['run-1']);
    expect(req.requestOptions[0].requestOption).toMatchObject({ case: 'reattachOptions', value: { reattachable: true } });
    await sleep(50);
    const release = fake.callsOf('releaseExecute').at(-1)?.request;
    expect(release).toMatchObject({ operationId: result.operationId, release: { case: 'releaseAll' } });
  });

  it('reattaches after a stream that ends without ResultComplete', async () => {
    const { fake, client } = await setup({
      executePlan: function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1, 2], 0);
      },
      reattachExecute: function* (r) {
        expect(r.lastResponseId).toBe('r1');
        yield arrowResponse(r.operationId, 'r2', [3], 2);
        yield completeResponse(r.operationId, 'r3');
      },
    });
    const result = await client.execute(plan);
    expect(ids(result)).toEqual([1, 2, 3]);
    expect(result.reattaches).toBe(1);
    expect(client.stats.reattaches).toBe(1);
    expect(fake.callsOf('reattachExecute')[0]?.request.operationId).toBe(result.operationId);
  });

  it('reattaches after a broken stream and gets every row exactly once', async () => {
    const { fake, client } = await setup({
      executePlan: async function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1], 0);
        yield arrowResponse(r.operationId, 'r2', [2], 1);
        await sleep(20);
        throw statusError(status.UNAVAILABLE, 'connection reset');
      },
      reattachExecute: async function* (r) {
        const calls = fake?.callsOf('reattachExecute').length ?? 0;
        if (calls === 1) {
          expect(r.lastResponseId).toBe('r2');
          yield arrowResponse(r.operationId, 'r3', [3], 2);
          throw statusError(status.INTERNAL, '[INVALID_CURSOR.DISCONNECTED] another reattach took over', { errorClass: 'INVALID_CURSOR.DISCONNECTED' });
        }
        expect(r.lastResponseId).toBe('r3');
        yield arrowResponse(r.operationId, 'r4', [4], 3);
        yield completeResponse(r.operationId, 'r5');
      },
    });
    const result = await client.execute(plan);
    expect(ids(result)).toEqual([1, 2, 3, 4]);
    expect(result.rowCount).toBe(4);
    expect(result.reattaches).toBe(2);
  });

  it('re-sends a first ExecutePlan that failed before any response, with the same id, and reattaches if it had arrived', async () => {
    let executes = 0;
    const { fake, client } = await setup({
      executePlan: function* () {
        executes++;
        if (executes === 1) throw statusError(status.UNAVAILABLE, 'no route');
        throw statusError(status.INTERNAL, '[INVALID_HANDLE.OPERATION_ALREADY_EXISTS] exists', { errorClass: 'INVALID_HANDLE.OPERATION_ALREADY_EXISTS' });
      },
      reattachExecute: function* (r) {
        expect(r.lastResponseId).toBeUndefined();
        yield arrowResponse(r.operationId, 'r1', [7], 0);
        yield completeResponse(r.operationId, 'r2');
      },
    });
    const result = await client.execute(plan);
    expect(ids(result)).toEqual([7]);
    const opIds = [...fake.callsOf('executePlan'), ...fake.callsOf('reattachExecute')].map((c) => c.request.operationId);
    expect(new Set(opIds)).toEqual(new Set([result.operationId]));
    expect(fake.callsOf('executePlan')).toHaveLength(2);
  });

  it('keeps reattaching while the server ends idle streams, without counting retries', async () => {
    let reattaches = 0;
    const { client } = await setup({
      executePlan: async function* () {
        await sleep(10);
      },
      reattachExecute: async function* (r) {
        if (++reattaches < 3) return;
        yield arrowResponse(r.operationId, 'r1', [42], 0);
        yield completeResponse(r.operationId, 'r2');
      },
    });
    const started = Date.now();
    const result = await client.execute(plan);
    expect(ids(result)).toEqual([42]);
    expect(result.reattaches).toBe(3);
    expect(client.stats.retries).toBe(0);
    // Streams that end empty at once are paced (1 s each), so a confused server cannot make us spin.
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500);
  });

  it('never re-sends ExecutePlan once a response arrived', async () => {
    const { fake, client } = await setup({
      executePlan: function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1], 0);
        throw statusError(status.UNAVAILABLE, 'reset');
      },
      reattachExecute: function* (r) {
        yield completeResponse(r.operationId, 'r2');
      },
    });
    await client.execute(plan);
    expect(fake.callsOf('executePlan')).toHaveLength(1);
    expect(fake.callsOf('reattachExecute')).toHaveLength(1);
  });

  it('detects lost or repeated rows by start offset', async () => {
    const { client } = await setup({
      executePlan: function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1, 2], 0);
        yield arrowResponse(r.operationId, 'r2', [2], 1);
      },
    });
    await expect(client.execute(plan)).rejects.toThrow(/starts at row 1, expected 2/);
  });

  it('streams batches without collecting them', async () => {
    const { client } = await setup({
      executePlan: function* (r) {
        for (let i = 0; i < 5; i++) yield arrowResponse(r.operationId, `r${i}`, [i], i);
        yield completeResponse(r.operationId, 'done');
      },
    });
    const stream = client.executeStream(plan);
    let n = 0;
    for await (const batch of stream) n += batch.numRows;
    expect(n).toBe(5);
    expect(stream.summary).toMatchObject({ rowCount: 5, complete: true, operationId: stream.operationId });
  });
});

describe('server errors', () => {
  it('replaces a truncated message with the one from FetchErrorDetails', async () => {
    const full = `[USER_RAISED_EXCEPTION] ${'x'.repeat(3000)}`;
    const { fake, client } = await setup({
      executePlan: function* () {
        throw statusError(status.INTERNAL, `${full.slice(0, 500)}...`, { errorClass: 'USER_RAISED_EXCEPTION', errorId: 'err-1' });
      },
      fetchErrorDetails: (r) => {
        expect(r.errorId).toBe('err-1');
        return {
          rootErrorIdx: 0,
          errors: [
            {
              errorTypeHierarchy: ['org.apache.spark.SparkRuntimeException'],
              message: full,
              sparkThrowable: { errorClass: 'USER_RAISED_EXCEPTION', sqlState: 'P0001' },
            },
          ],
        };
      },
    });
    const e = (await client.execute(plan).catch((x: unknown) => x)) as SparkError;
    expect(e).toBeInstanceOf(SparkError);
    expect(e.serverMessage).toBe(full);
    expect(e.sqlState).toBe('P0001');
    expect(fake.callsOf('fetchErrorDetails')).toHaveLength(1);
  });

  it('notices a server that lost the session', async () => {
    let n = 0;
    const { client } = await setup({
      analyzePlan: () => ({ serverSideSessionId: `server-side-${++n}`, result: { case: 'sparkVersion', value: { version: '4.1.4' } } }),
    });
    await client.analyze.sparkVersion();
    await expect(client.analyze.sparkVersion()).rejects.toMatchObject({ exitCode: ExitCode.transient, code: 'SPARK_SESSION_LOST' });
  });
});

describe('cancellation', () => {
  it('interrupts the operation and rejects with the caller’s reason', async () => {
    const { fake, client } = await setup({
      executePlan: async function* (r, call) {
        yield arrowResponse(r.operationId, 'r1', [1], 0);
        while (!call.cancelled()) await sleep(10);
      },
    });
    const controller = new AbortController();
    const started = Date.now();
    const p = client.execute(plan, { signal: controller.signal, operationId: '00000000-0000-4000-8000-000000000001' });
    setTimeout(() => controller.abort(new CancelledError('SIGTERM')), 100);
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(Date.now() - started).toBeLessThan(3000);
    const interrupt = fake.callsOf('interrupt')[0]?.request;
    expect(interrupt).toMatchObject({ interrupt: { case: 'operationId', value: '00000000-0000-4000-8000-000000000001' } });
  });

  it('wraps a reason that is not a LakehouseError', async () => {
    const { client } = await setup({
      executePlan: async function* (_r, call) {
        while (!call.cancelled()) await sleep(10);
      },
    });
    const controller = new AbortController();
    const p = client.execute(plan, { signal: controller.signal });
    setTimeout(() => controller.abort('shutdown'), 50);
    await expect(p).rejects.toBeInstanceOf(OperationCancelledError);
  });

  it('refuses operation ids that are not UUIDs and tags with commas', async () => {
    const { client } = await setup({});
    expect(() => client.executeStream(plan, { operationId: 'op-1' })).toThrow(/UUID/);
    expect(() => client.executeStream(plan, { tags: ['a,b'] })).toThrow(/commas/);
  });
});

it('other calls map their answers', async () => {
  const { fake, client } = await setup({
    config: (r) => {
      const op = r.operation.opType;
      if (op.case === 'getAll') return { pairs: [{ key: 'a', value: '1' }] };
      if (op.case === 'getOption') return { pairs: [{ key: 'k' }] };
      if (op.case === 'set') return { warnings: ['static'] };
      return { pairs: op.value.keys?.map((key: string) => ({ key, value: 'v' })) ?? [] };
    },
    interrupt: (r) => ({ interruptedIds: r.interruptType === 2 ? ['a', 'b'] : [] }),
    releaseSession: () => ({}),
  });
  expect(await client.config.set({ k: 'v' })).toEqual(['static']);
  expect(await client.config.get(['k'])).toEqual({ k: 'v' });
  expect(await client.config.getOption(['k'])).toEqual({ k: undefined });
  expect(await client.config.getAll('spark.')).toEqual({ 'spark.a': '1' });
  await client.config.unset(['k']);
  expect(await client.interruptTag('run-1')).toEqual(['a', 'b']);
  await client.releaseSession();
  expect(fake.callsOf('releaseSession')[0]?.metadata).toBeDefined();
  expect(response({}).serverSideSessionId).toBe(SERVER_SIDE_SESSION);
});

describe('time bounds', () => {
  const sparkVersion = { result: { case: 'sparkVersion', value: { version: '4.1.4' } } };
  const unavailable = () => {
    throw statusError(status.UNAVAILABLE, 'server restarting');
  };

  it('shares one retry budget between the calls of a client', async () => {
    const { fake } = await setup({ analyzePlan: unavailable }, '', { initialBackoffMs: 100, multiplier: 1, maxBackoffMs: 100, jitter: 0 });
    client?.close();
    client = SparkConnectClient.connect(parseConnectionString(fake.remote), {
      retry: { initialBackoffMs: 100, multiplier: 1, maxBackoffMs: 100, jitter: 0 },
      retryBudgetMs: 450,
    });
    const started = Date.now();
    await expect(client.analyze.sparkVersion()).rejects.toMatchObject({ exitCode: ExitCode.unavailable, code: 'SPARK_UNAVAILABLE' });
    const firstCalls = fake.callsOf('analyzePlan').length;
    // 100 ms sleeps within 450 ms: four retries at most.
    expect(firstCalls).toBeGreaterThanOrEqual(2);
    expect(firstCalls).toBeLessThanOrEqual(5);
    // The second call finds the budget spent: one attempt, no retry.
    await expect(client.analyze.sparkVersion()).rejects.toMatchObject({ code: 'SPARK_UNAVAILABLE' });
    expect(fake.callsOf('analyzePlan').length).toBe(firstCalls + 1);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("the run's signal ends an AnalyzePlan that never answers, with the signal's reason", async () => {
    const { fake } = await setup({ analyzePlan: () => new Promise(() => undefined) });
    client?.close();
    const run = new AbortController();
    client = SparkConnectClient.connect(parseConnectionString(fake.remote), { signal: run.signal });
    const p = client.analyze.sparkVersion();
    await sleep(200);
    const abortedAt = Date.now();
    run.abort(new CancelledError('SIGTERM'));
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(Date.now() - abortedAt).toBeLessThan(500);
  });

  it("cleanup calls still run after the run's signal aborted", async () => {
    const { fake } = await setup({ analyzePlan: () => sparkVersion, releaseSession: () => ({}) });
    client?.close();
    const run = new AbortController();
    client = SparkConnectClient.connect(parseConnectionString(fake.remote), { signal: run.signal });
    await client.analyze.sparkVersion();
    run.abort(new CancelledError('SIGTERM'));
    await expect(client.analyze.sparkVersion()).rejects.toBeInstanceOf(CancelledError);
    await client.releaseSession();
    expect(await client.interruptTag('t')).toEqual(['t']);
    expect(fake.callsOf('releaseSession')).toHaveLength(1);
  });

  it('closing the client ends a call that is waiting to retry', async () => {
    await setup({ analyzePlan: unavailable }, '', { initialBackoffMs: 60_000, maxBackoffMs: 60_000, jitter: 0 });
    const p = client!.analyze.sparkVersion();
    await sleep(300);
    const closedAt = Date.now();
    client!.close();
    await expect(p).rejects.toThrow(/closed/);
    expect(Date.now() - closedAt).toBeLessThan(500);
  });
});
