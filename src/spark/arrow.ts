/**
 * Spark Connect results arrive as Arrow IPC streams, one per ArrowBatch message. This module
 * decodes them with apache-arrow, concatenates them, and turns rows into plain values:
 *
 * | Spark type              | value                                                            |
 * |-------------------------|------------------------------------------------------------------|
 * | tinyint…int, float, double | number                                                        |
 * | bigint                  | bigint (`int64: 'number' | 'string'` to change)                   |
 * | decimal(p,s)            | string, exact, e.g. "-12.50" (always `s` fraction digits)        |
 * | string                  | string                                                           |
 * | binary                  | Uint8Array                                                       |
 * | boolean                 | boolean                                                          |
 * | date                    | "YYYY-MM-DD"                                                     |
 * | timestamp               | ISO instant with microseconds, "2024-05-01T12:00:00.000001Z"     |
 * | timestamp_ntz           | ISO local date-time without zone, "2024-05-01T12:00:00.000001"   |
 * |                         | (`timestamps: 'micros'`: bigint microseconds since the epoch)    |
 * | array                   | array                                                            |
 * | struct                  | plain object                                                     |
 * | map                     | plain object keyed by String(key)                                |
 * | null                    | null                                                             |
 * Other types (intervals, time, variant) come as apache-arrow returns them.
 */
import { floorDiv, formatUnscaled, isoMicros } from './values.js';
import {
  type Data,
  type DataType,
  Message,
  MessageHeader,
  RecordBatch,
  type Schema,
  Struct,
  Table,
  TimeUnit,
  Type,
  type Vector,
  makeData,
  makeVector,
  tableFromIPC,
} from 'apache-arrow';
// Not re-exported by the package's index; the module apache-arrow's own stream reader loads batches with.
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';

/**
 * Decode the `data` of one ArrowBatch message (a complete Arrow IPC stream: schema, record
 * batches, end of stream). Spark sends the same schema again with every batch: it is decoded once
 * and then reused while its bytes stay the same, and the record batches are loaded from the
 * message body directly, as apache-arrow's stream reader does, without the reader's per-stream
 * machinery. Anything this path does not handle (dictionaries, compressed bodies, an unaligned
 * body, a malformed stream) goes through apache-arrow's reader, which decodes or rejects it.
 */
export function decodeArrowBatch(data: Uint8Array): { schema: Schema; batches: RecordBatch[] } {
  let fast: ReturnType<typeof decodeStream>;
  try {
    fast = decodeStream(data);
  } catch {
    fast = undefined; // the reader below reports what is wrong with the stream, in its own words
  }
  if (fast) return fast;
  const table = tableFromIPC(data);
  return { schema: table.schema, batches: table.batches };
}

/** The last schema message decoded, and its Schema: every batch of a result repeats it. */
let lastSchema: { bytes: Uint8Array; schema: Schema } | undefined;

function schemaOf(metadata: Uint8Array, message: Message): Schema {
  const last = lastSchema;
  if (last && Buffer.compare(last.bytes, metadata) === 0) return last.schema;
  const schema = message.header() as Schema;
  // A copy: `metadata` is a view into the gRPC message, which must not be kept alive by the cache.
  lastSchema = { bytes: Uint8Array.prototype.slice.call(metadata), schema };
  return schema;
}

/** The IPC stream's schema and record batches, or undefined when apache-arrow's reader should decode it. */
function decodeStream(data: Uint8Array): { schema: Schema; batches: RecordBatch[] } | undefined {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let schema: Schema | undefined;
  const batches: RecordBatch[] = [];
  let offset = 0;
  while (offset < data.byteLength) {
    if (offset + 4 > data.byteLength) return undefined;
    let length = view.getInt32(offset, true);
    offset += 4;
    // Since format 0.15 each message starts with the continuation marker 0xFFFFFFFF, then its length.
    if (length === -1) {
      if (offset + 4 > data.byteLength) return undefined;
      length = view.getInt32(offset, true);
      offset += 4;
    }
    if (length === 0) break; // end of stream
    if (length < 0 || offset + length > data.byteLength) return undefined;
    const metadata = data.subarray(offset, offset + length);
    offset += length;
    const message = Message.decode(metadata);
    const bodyLength = Number(message.bodyLength);
    if (!Number.isSafeInteger(bodyLength) || bodyLength < 0 || offset + bodyLength > data.byteLength) return undefined;
    const body = data.subarray(offset, offset + bodyLength);
    offset += bodyLength;
    if (message.headerType === MessageHeader.Schema) {
      if (schema) return undefined;
      schema = schemaOf(metadata, message);
      if (schema.dictionaries.size > 0) return undefined;
    } else if (message.headerType === MessageHeader.RecordBatch) {
      const header = message.header() as NonNullable<ReturnType<Message<MessageHeader.RecordBatch>['header']>>;
      // Typed arrays need aligned offsets (alignInPlace in transport.ts sees to it for Spark's results).
      if (!schema || header.compression != null || body.byteOffset % 8 !== 0) return undefined;
      const children = new VectorLoader(body, header.nodes, header.buffers, new Map(), schema.metadataVersion, header.variadicBufferCounts).visitMany(
        schema.fields,
      );
      const batch = makeData({ type: new Struct(schema.fields), length: header.length, children });
      batches.push(new RecordBatch(schema, batch, message.metadata));
    } else {
      return undefined;
    }
  }
  return schema ? { schema, batches } : undefined;
}

/** One table from many batches of the same schema. */
export function concatBatches(schema: Schema, batches: RecordBatch[]): Table {
  return new Table(schema, batches);
}

export interface RowOptions {
  timestamps?: 'iso' | 'micros';
  int64?: 'bigint' | 'number' | 'string';
}

/** All rows of a table (or batch) as plain objects keyed by column name. */
export function rows(table: Table | RecordBatch, options: RowOptions = {}): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const batches = 'batches' in table ? table.batches : [table];
  for (const batch of batches) {
    const names = batch.schema.fields.map((f) => f.name);
    const columns = batch.data.children;
    for (let i = 0; i < batch.numRows; i++) {
      const row: Record<string, unknown> = {};
      names.forEach((name, c) => {
        row[name] = value(columns[c] as Data, i, options);
      });
      out.push(row);
    }
  }
  return out;
}

const vectors = new WeakMap<Data, Vector>();
function generic(data: Data, index: number): unknown {
  let v = vectors.get(data);
  if (!v) vectors.set(data, (v = makeVector(data)));
  return v.get(index);
}

/** The plain value at `index` of one Arrow array. */
export function value(data: Data, index: number, options: RowOptions = {}): unknown {
  if (!data.getValid(index)) return null;
  const type: DataType = data.type;
  switch (type.typeId) {
    case Type.Null:
      return null;
    case Type.Int: {
      const raw = (data.values as ArrayLike<number | bigint>)[index];
      if (typeof raw !== 'bigint') return raw;
      if (options.int64 === 'number') return Number(raw);
      if (options.int64 === 'string') return raw.toString();
      return raw;
    }
    case Type.Decimal:
      return decimalString(data, index);
    case Type.Date: {
      const raw = (data.values as ArrayLike<number | bigint>)[index] ?? 0;
      const ms = typeof raw === 'bigint' ? Number(raw) : raw * 86_400_000;
      return new Date(ms).toISOString().slice(0, 10);
    }
    case Type.Timestamp: {
      const t = type as DataType & { unit: TimeUnit; timezone?: string | null };
      const micros = toMicros(BigInt((data.values as ArrayLike<bigint | number>)[index] ?? 0), t.unit);
      if (options.timestamps === 'micros') return micros;
      return isoMicros(micros, t.timezone != null && t.timezone !== '');
    }
    case Type.Struct: {
      const obj: Record<string, unknown> = {};
      type.children.forEach((field, c) => {
        obj[field.name] = value(data.children[c] as Data, index, options);
      });
      return obj;
    }
    case Type.List:
    case Type.LargeList: {
      const offsets = data.valueOffsets as ArrayLike<number | bigint>;
      const child = data.children[0] as Data;
      const out: unknown[] = [];
      for (let k = Number(offsets[index]); k < Number(offsets[index + 1]); k++) out.push(value(child, k, options));
      return out;
    }
    case Type.FixedSizeList: {
      const size = (type as DataType & { listSize: number }).listSize;
      const child = data.children[0] as Data;
      return Array.from({ length: size }, (_, k) => value(child, index * size + k, options));
    }
    case Type.Map: {
      const offsets = data.valueOffsets as ArrayLike<number>;
      const entries = data.children[0] as Data;
      const [keys, vals] = entries.children as [Data, Data];
      const obj: Record<string, unknown> = {};
      for (let k = Number(offsets[index]); k < Number(offsets[index + 1]); k++) {
        obj[String(value(keys, k, options))] = value(vals, k, options);
      }
      return obj;
    }
    default:
      return generic(data, index);
  }
}

function toMicros(v: bigint, unit: TimeUnit): bigint {
  switch (unit) {
    case TimeUnit.SECOND:
      return v * 1_000_000n;
    case TimeUnit.MILLISECOND:
      return v * 1_000n;
    case TimeUnit.NANOSECOND:
      return floorDiv(v, 1_000n);
    default:
      return v;
  }
}

function decimalString(data: Data, index: number): string {
  const type = data.type as DataType & { scale: number; bitWidth: number };
  const words = data.values as Uint32Array;
  const n = type.bitWidth / 32;
  let v = 0n;
  for (let w = n - 1; w >= 0; w--) v = (v << 32n) | BigInt(words[index * n + w] ?? 0);
  if (v >> BigInt(type.bitWidth - 1)) v -= 1n << BigInt(type.bitWidth);
  return formatUnscaled(v, type.scale);
}

export { formatUnscaled, isoMicros } from './values.js';
