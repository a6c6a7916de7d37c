import { create, toBinary } from '@bufbuild/protobuf';
import { tableFromIPC, type RecordBatch } from 'apache-arrow';
import { afterEach, describe, expect, it } from 'vitest';
import { SparkConnectClient, type BatchSink, type ExecuteSummary } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { ExecutePlanResponseSchema, PlanSchema, type ExecutePlanResponse, type Plan } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { alignInPlace, sparkConnectServiceDefinition } from '../../../src/spark/transport.js';
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
