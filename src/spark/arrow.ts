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
import { type Data, type DataType, type RecordBatch, type Schema, Table, TimeUnit, Type, type Vector, makeVector, tableFromIPC } from 'apache-arrow';

/** Decode the `data` of one ArrowBatch message (a complete Arrow IPC stream). */
export function decodeArrowBatch(data: Uint8Array): { schema: Schema; batches: RecordBatch[] } {
  const table = tableFromIPC(data);
  return { schema: table.schema, batches: table.batches };
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
        setOwn(row, name, value(columns[c] as Data, i, options));
      });
      out.push(row);
    }
  }
  return out;
}

/**
 * A field named by the data (a column, a struct field): an own property even for `__proto__`,
 * which a plain assignment would take for the object's prototype (its value lost, or a row
 * answering for names it does not have).
 */
function setOwn(o: Record<string, unknown>, name: string, v: unknown): void {
  if (name === '__proto__') Object.defineProperty(o, name, { value: v, enumerable: true, writable: true, configurable: true });
  else o[name] = v;
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
        setOwn(obj, field.name, value(data.children[c] as Data, index, options));
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
