// Interrupting running operations on the real server: by operation id, by tag, and through the
// AbortSignal the runner uses on SIGTERM.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CancelledError, ExitCode } from '../../../src/core/errors.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { NEVER_ENDING, connect, sleep, sql } from './support.js';
import { needs } from '../../support/needs.js';

needs('spark');

let client: SparkConnectClient;
beforeAll(() => {
  client = connect();
});
afterAll(async () => {
  await client.interruptAll();
  await client.releaseSession();
  client.close();
});

/** Call `interrupt` until the server reports `operationId` interrupted (it must be running first). */
async function interruptWhenRunning(operationId: string, interrupt: () => Promise<string[]>): Promise<string[]> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const ids = await interrupt();
    if (ids.includes(operationId)) return ids;
    await sleep(200);
  }
  throw new Error(`operation ${operationId} never showed up as running`);
}

describe('Interrupt', () => {
  it('by operation id: the call rejects promptly', async () => {
    const operationId = randomUUID();
    const running = client.execute(sql(NEVER_ENDING), { operationId }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const ids = await interruptWhenRunning(operationId, () => client.interruptOperation(operationId));
    const interruptedAt = Date.now();
    expect(ids).toEqual([operationId]);
    const e = await running;
    expect(Date.now() - interruptedAt).toBeLessThan(10_000);
    expect(e).toMatchObject({ exitCode: ExitCode.transient, code: 'SPARK_OPERATION_CANCELLED', errorClass: 'OPERATION_CANCELED' });
  });

  it('by tag: every operation carrying the tag', async () => {
    const tag = `lakehouse-it-${randomUUID()}`;
    const a = randomUUID();
    const b = randomUUID();
    const runs = [a, b].map((operationId) =>
      client.execute(sql(NEVER_ENDING), { operationId, tags: [tag, 'other'] }).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    const seen = new Set<string>();
    await interruptWhenRunning(b, async () => {
      const ids = await client.interruptTag(tag);
      ids.forEach((id) => seen.add(id));
      return seen.has(a) ? [...seen] : [];
    });
    expect([...seen].sort()).toEqual([a, b].sort());
    for (const e of await Promise.all(runs)) expect(e).toMatchObject({ code: 'SPARK_OPERATION_CANCELLED' });
  });

  it('through the AbortSignal: the operation is interrupted on the server and the reason rethrown', async () => {
    const operationId = randomUUID();
    const controller = new AbortController();
    const running = client.execute(sql(NEVER_ENDING), { operationId, signal: controller.signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await sleep(1500);
    const abortedAt = Date.now();
    controller.abort(new CancelledError('SIGTERM'));
    const e = await running;
    expect(e).toBeInstanceOf(CancelledError);
    expect(Date.now() - abortedAt).toBeLessThan(10_000);
    // The server no longer runs it: interrupting again finds nothing.
    expect(await client.interruptOperation(operationId)).toEqual([]);
  });
});
