import { create, toBinary } from '@bufbuild/protobuf';
import { tableFromIPC, type RecordBatch } from 'apache-arrow';
import { afterEach, describe, expect, it } from 'vitest';
import { SparkConnectClient, type BatchSink, type ExecuteSummary } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { ExecutePlanResponseSchema, PlanSchema, type ExecutePlanResponse, type Plan } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { alignInPlace, releaseMessageBuffer, sparkConnectServiceDefinition } from '../../../src/spark/transport.js';
import { arrowResponse, completeResponse, response, sleep, startFakeSpark, type FakeHandlers, type FakeSpark } from './fake-spark.js';

const plan: Plan = create(PlanSchema, { opType: { case: 'root', value: { relType: { case: 'sql', value: { query: 'SELECT 1' } } } } });

let fake: FakeSpark | undefined;
let client: SparkConnectClient | undefined;
afterEach(async () => {
  client?.close();
  client = undefined;
  await fake?.stop();
  fake = undefined;
});

async function setup(handlers: FakeHandlers): Promise<{ fake: FakeSpark; client: SparkConnectClient }> {
  fake = await startFakeSpark({ releaseExecute: () => ({}), interrupt: (r) => ({ interruptedIds: [r.interrupt.value] }), ...handlers });
  client = SparkConnectClient.connect(parseConnectionString(`${fake.remote}/`), { retry: { initialBackoffMs: 1, maxBackoffMs: 5, jitter: 0 } });
  return { fake, client };
}

/** `bytes` placed at `offset` inside a fresh buffer of `size` bytes (the rest 0xee), and that buffer. */
function placed(bytes: Uint8Array, offset: number, size = offset + bytes.length + 16): { message: Uint8Array; data: Uint8Array } {
  const message = new Uint8Array(new ArrayBuffer(size)).fill(0xee);
  message.set(bytes, offset);
  return { message, data: message.subarray(offset, offset + bytes.length) };
}

describe('alignInPlace', () => {
  const bytes = Uint8Array.from({ length: 37 }, (_, i) => i + 1);

  it.each([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15])('moves data at offset %i to an 8-byte-aligned address in the same buffer, bytes intact', (offset) => {
    const { message, data } = placed(bytes, offset);
    const aligned = alignInPlace(data, message);
    expect(aligned.byteOffset % 8).toBe(0);
    expect(aligned.buffer).toBe(message.buffer);
    expect(aligned.byteOffset).toBeGreaterThan(offset - 8);
    expect(aligned.byteOffset).toBeLessThanOrEqual(offset);
    expect([...aligned]).toEqual([...bytes]);
  });

  it('leaves data alone when the room before it is outside the message', () => {
    const { message, data } = placed(bytes, 3);
    // The message view starts at the data: moving down would write before the message.
    const view = message.subarray(3);
    expect(alignInPlace(data, view)).toBe(data);
    expect([...data]).toEqual([...bytes]);
  });

  it('leaves data alone when it is not a view into the message', () => {
    const { message } = placed(bytes, 3);
    const other = placed(bytes, 5).data;
    expect(alignInPlace(other, message)).toBe(other);
    expect(alignInPlace(message.subarray(5, 5 + message.length), message.subarray(0, 8))).toHaveProperty('byteOffset', 5);
  });
});

describe('ExecutePlanResponse decoding', () => {
  const deserialize = sparkConnectServiceDefinition.executePlan!.responseDeserialize as (b: Buffer) => ExecutePlanResponse;
  const ids = Array.from({ length: 1000 }, (_, i) => i * 3);

  function wire(r: ExecutePlanResponse, offset: number): Buffer {
    const bin = toBinary(ExecutePlanResponseSchema, r);
    const buf = Buffer.alloc(offset + bin.length);
    buf.set(bin, offset);
    return buf.subarray(offset);
  }

  it.each([0, 1, 2, 3, 4, 5, 6, 7])('hands apache-arrow an aligned IPC stream it reads without a copy (message at offset %i)', (offset) => {
    const b = wire(arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', ids, 0), offset);
    const r = deserialize(b);
    expect(r.responseType.case).toBe('arrowBatch');
    const data = (r.responseType.value as { data: Uint8Array }).data;
    expect(data.byteOffset % 8).toBe(0);
    expect(data.buffer).toBe(b.buffer);
    const table = tableFromIPC(data);
    expect(Array.from(table.getChild('id')!.toArray() as BigInt64Array, Number)).toEqual(ids);
    // The column's values are a view into the gRPC message's own buffer: no copy was made.
    expect(table.batches[0]!.data.children[0]!.values.buffer).toBe(b.buffer);
  });

  it('leaves a batch with observed metrics where it is (their literals may be views into the same buffer)', () => {
    const base = arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', ids, 0);
    const r0 = response({
      operationId: base.operationId,
      responseId: base.responseId,
      responseType: base.responseType,
      observedMetrics: [{ name: 'm', keys: ['k'], values: [{ literalType: { case: 'binary', value: Uint8Array.of(1, 2, 3) } }] }],
    });
    for (let offset = 0; offset < 8; offset++) {
      const b = wire(r0, offset);
      const r = deserialize(b);
      const expected = toBinary(ExecutePlanResponseSchema, r0);
      // Decoding changed nothing in the buffer.
      expect(Buffer.compare(b, Buffer.from(expected))).toBe(0);
      expect([...(r.observedMetrics[0]!.values[0]!.literalType.value as Uint8Array)]).toEqual([1, 2, 3]);
      expect(
        Array.from(
          tableFromIPC((r.responseType.value as { data: Uint8Array }).data)
            .getChild('id')!
            .toArray() as BigInt64Array,
          Number,
        ),
      ).toEqual(ids);
    }
  });
});

describe('releaseMessageBuffer', () => {
  const deserialize = sparkConnectServiceDefinition.executePlan!.responseDeserialize as (b: Buffer) => ExecutePlanResponse;
  const ids = Array.from({ length: 10_000 }, (_, i) => i);
  const dataOf = (r: ExecutePlanResponse) => (r.responseType.value as { data: Uint8Array }).data;

  it('detaches the buffer of a whole ArrowBatch message (after its gRPC frame header), once', () => {
    const bin = toBinary(ExecutePlanResponseSchema, arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', ids, 0));
    const framed = Buffer.alloc(5 + bin.length);
    framed.set(bin, 5);
    const buffer = framed.buffer;
    const data = dataOf(deserialize(framed.subarray(5)));
    expect(data.buffer).toBe(buffer);
    expect(releaseMessageBuffer(data)).toBe(true);
    expect(buffer.byteLength).toBe(0);
    expect(releaseMessageBuffer(data)).toBe(false);
  });

  it('leaves alone a message that shares its buffer (pooled, small or with more bytes around it), one with observed metrics, and foreign bytes', () => {
    const bin = toBinary(ExecutePlanResponseSchema, arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', ids, 0));
    const shared = Buffer.alloc(bin.length + 64);
    shared.set(bin, 32);
    const sharedData = dataOf(deserialize(shared.subarray(32, 32 + bin.length)));
    expect(releaseMessageBuffer(sharedData)).toBe(false);
    expect(shared.buffer.byteLength).toBe(bin.length + 64);

    const small = Buffer.from(toBinary(ExecutePlanResponseSchema, arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', [1, 2], 0)));
    const own = Buffer.from(new Uint8Array(small).buffer);
    expect(releaseMessageBuffer(dataOf(deserialize(own)))).toBe(false);
    expect(own.buffer.byteLength).toBe(small.length);
    const pooled = Buffer.allocUnsafe(small.length);
    small.copy(pooled);
    const pooledSize = pooled.buffer.byteLength;
    expect(releaseMessageBuffer(dataOf(deserialize(pooled)))).toBe(false);
    expect(pooled.buffer.byteLength).toBe(pooledSize);

    const base = arrowResponse('00000000-0000-4000-8000-000000000000', 'r1', ids, 0);
    const withMetrics = Buffer.from(
      toBinary(
        ExecutePlanResponseSchema,
        response({
          operationId: base.operationId,
          responseId: base.responseId,
          responseType: base.responseType,
          observedMetrics: [{ name: 'm', keys: ['k'], values: [{ literalType: { case: 'binary', value: Uint8Array.of(1, 2, 3) } }] }],
        }),
      ),
    );
    const r = deserialize(withMetrics);
    expect(releaseMessageBuffer(dataOf(r))).toBe(false);
    expect([...(r.observedMetrics[0]!.values[0]!.literalType.value as Uint8Array)]).toEqual([1, 2, 3]);

    const before = Buffer.alloc(bin.length + 6);
    before.set(bin, 6);
    expect(releaseMessageBuffer(dataOf(deserialize(before.subarray(6))))).toBe(false);
    expect(before.buffer.byteLength).toBe(bin.length + 6);

    const foreign = new Uint8Array(64);
    expect(releaseMessageBuffer(foreign)).toBe(false);
    expect(foreign.buffer.byteLength).toBe(64);
  });
});

describe('executeToSink', () => {
  const batches = (n: number) =>
    function* (r: { operationId: string }) {
      for (let i = 0; i < n; i++) yield arrowResponse(r.operationId, `r${i}`, [2 * i, 2 * i + 1], 2 * i);
      yield completeResponse(r.operationId, 'done');
    };

  it('writes every batch in order, one at a time, then closes with the complete summary', async () => {
    const { client } = await setup({ executePlan: batches(6) });
    const seen: number[] = [];
    let writing = 0;
    let maxConcurrent = 0;
    let closed: ExecuteSummary | undefined;
    const sink: BatchSink = {
      async write(batch: RecordBatch) {
        maxConcurrent = Math.max(maxConcurrent, ++writing);
        await sleep(5);
        seen.push(...Array.from(batch.getChild('id')!.toArray() as BigInt64Array, Number));
        writing--;
      },
      close(summary) {
        closed = summary;
      },
    };
    const summary = await client.executeToSink(plan, sink);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(maxConcurrent).toBe(1);
    expect(summary).toMatchObject({ rowCount: 12, complete: true });
    expect(closed).toBe(summary);
  });

  it('a sink that fails rejects with its error, is not closed, and ends the operation on the server', async () => {
    const { fake, client } = await setup({ executePlan: batches(50) });
    let closed = false;
    const boom = new Error('disk full');
    const sink: BatchSink = {
      write(batch) {
        if (Number(batch.getChild('id')!.get(0)) >= 4) throw boom;
      },
      close() {
        closed = true;
      },
    };
    await expect(client.executeToSink(plan, sink)).rejects.toBe(boom);
    expect(closed).toBe(false);
    const deadline = Date.now() + 2000;
    while (fake.callsOf('releaseExecute').length === 0 && Date.now() < deadline) await sleep(10);
    expect(fake.callsOf('releaseExecute')).not.toHaveLength(0);
  });

  // 10,000 bigints: each message is over 64 KiB, the size from which message buffers are released.
  const bigBatches = (n: number) =>
    function* (r: { operationId: string }) {
      for (let i = 0; i < n; i++)
        yield arrowResponse(
          r.operationId,
          `r${i}`,
          Array.from({ length: 10_000 }, (_, k) => i * 10_000 + k),
          i * 10_000,
        );
      yield completeResponse(r.operationId, 'done');
    };

  it('releases each message once its batch is written: intact during write, detached after, the summary intact', async () => {
    const { client } = await setup({ executePlan: bigBatches(5) });
    const written: RecordBatch[] = [];
    const sums: number[] = [];
    const summary = await client.executeToSink(plan, {
      async write(batch) {
        await sleep(2);
        const ids = batch.getChild('id')!.toArray() as BigInt64Array;
        expect(ids.buffer.byteLength).toBeGreaterThan(80_000);
        sums.push(ids.reduce((a, v) => a + Number(v), 0));
        written.push(batch);
      },
    });
    expect(sums).toEqual(Array.from({ length: 5 }, (_, i) => 10_000 * 10_000 * i + (9_999 * 10_000) / 2));
    // What the sink kept is gone: the message buffers were handed back (detached, zero bytes).
    for (const batch of written) expect(batch.data.children[0]!.values.buffer.byteLength).toBe(0);
    expect(summary).toMatchObject({ rowCount: 50_000, complete: true });
    expect(summary.arrowSchema?.fields.map((f) => [f.name, String(f.type)])).toEqual([['id', 'Int64']]);
  });

  it('execute and executeStream leave their batches intact (their consumers keep them)', async () => {
    const { client } = await setup({ executePlan: bigBatches(3) });
    const result = await client.execute(plan);
    expect(Array.from(result.table!.getChild('id')!.toArray() as BigInt64Array, Number)).toEqual(Array.from({ length: 30_000 }, (_, k) => k));
    const kept: RecordBatch[] = [];
    for await (const batch of client.executeStream(plan)) kept.push(batch);
    expect(kept.map((b) => Number(b.getChild('id')!.get(9_999)))).toEqual([9_999, 19_999, 29_999]);
  });

  it('a result without Arrow data (a command) closes the sink with nothing written', async () => {
    const { client } = await setup({ executePlan: (r) => [completeResponse(r.operationId, 'done')] });
    let writes = 0;
    let closed = false;
    const summary = await client.executeToSink(plan, { write: () => void writes++, close: () => void (closed = true) });
    expect({ writes, closed, rowCount: summary.rowCount, complete: summary.complete }).toEqual({ writes: 0, closed: true, rowCount: 0, complete: true });
  });
});

describe('ResultStream.rows', () => {
  it('yields every row as plain values, across batches', async () => {
    const { client } = await setup({
      executePlan: function* (r) {
        yield arrowResponse(r.operationId, 'r1', [1, 2], 0);
        yield arrowResponse(r.operationId, 'r2', [3], 2);
        yield completeResponse(r.operationId, 'done');
      },
    });
    const stream = client.executeStream(plan);
    const got: unknown[] = [];
    for await (const row of stream.rows({ int64: 'number' })) got.push(row);
    expect(got).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
    expect(stream.summary).toMatchObject({ rowCount: 3, complete: true });
  });
});
