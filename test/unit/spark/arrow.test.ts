import {
  DateDay,
  Decimal,
  Field,
  Int32,
  Int64,
  List,
  Map_,
  Struct,
  Table,
  TimestampMicrosecond,
  Utf8,
  makeData,
  makeVector,
  tableToIPC,
  vectorFromArray,
} from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { concatBatches, decodeArrowBatch, formatUnscaled, isoMicros, rows } from '../../../src/spark/arrow.js';

/** A decimal(precision, scale) column from unscaled values (two's complement, 4 little-endian words). */
function decimalVector(precision: number, scale: number, unscaled: (bigint | null)[]) {
  const words = new Uint32Array(unscaled.length * 4);
  const validity = new Uint8Array(Math.ceil(unscaled.length / 8));
  unscaled.forEach((v, i) => {
    if (v === null) return;
    validity[i >> 3]! |= 1 << (i & 7);
    let x = v < 0n ? (1n << 128n) + v : v;
    for (let w = 0; w < 4; w++) {
      words[i * 4 + w] = Number(x & 0xffffffffn);
      x >>= 32n;
    }
  });
  const nulls = unscaled.filter((v) => v === null).length;
  return makeVector(makeData({ type: new Decimal(scale, precision, 128), length: unscaled.length, nullCount: nulls, nullBitmap: validity, data: words }));
}

function ipc(table: Table): Uint8Array {
  return tableToIPC(table, 'stream');
}

describe('decimal and timestamp formatting', () => {
  it('formats unscaled decimals exactly', () => {
    expect(formatUnscaled(1250n, 2)).toBe('12.50');
    expect(formatUnscaled(-5n, 3)).toBe('-0.005');
    expect(formatUnscaled(0n, 2)).toBe('0.00');
    expect(formatUnscaled(42n, 0)).toBe('42');
    expect(formatUnscaled(12345678901234567890123456789012345678n, 10)).toBe('1234567890123456789012345678.9012345678');
  });

  it('keeps microseconds in ISO timestamps, before the epoch too', () => {
    expect(isoMicros(1_704_164_645_123_456n, true)).toBe('2024-01-02T03:04:05.123456Z');
    expect(isoMicros(1_704_164_645_123_456n, false)).toBe('2024-01-02T03:04:05.123456');
    expect(isoMicros(-1n, true)).toBe('1969-12-31T23:59:59.999999Z');
    expect(isoMicros(0n, true)).toBe('1970-01-01T00:00:00.000000Z');
  });
});

describe('Arrow batches', () => {
  const table = new Table({
    id: vectorFromArray([1, 2, null], new Int32()),
    big: vectorFromArray([9_007_199_254_740_993n, -1n, null], new Int64()),
    name: vectorFromArray(['ä ✓', '', null], new Utf8()),
    amount: decimalVector(38, 10, [123_4567890123n, -1n, null]),
    price: decimalVector(12, 2, [1250n, -99999n, 0n]),
    day: vectorFromArray([new Date(Date.UTC(2024, 1, 29)), new Date(Date.UTC(1969, 11, 31)), null], new DateDay()),
  } as never);

  it('decodes an IPC stream and converts rows to plain values', () => {
    const { schema, batches } = decodeArrowBatch(ipc(table));
    expect(schema.fields.map((f) => f.name)).toEqual(['id', 'big', 'name', 'amount', 'price', 'day']);
    expect(rows(concatBatches(schema, batches))).toEqual([
      { id: 1, big: 9_007_199_254_740_993n, name: 'ä ✓', amount: '123.4567890123', price: '12.50', day: '2024-02-29' },
      { id: 2, big: -1n, name: '', amount: '-0.0000000001', price: '-999.99', day: '1969-12-31' },
      { id: null, big: null, name: null, amount: null, price: '0.00', day: null },
    ]);
  });

  it('converts int64 and timestamps on request', () => {
    const t = new Table({
      big: vectorFromArray([5n], new Int64()),
      at: makeVector(makeData({ type: new TimestampMicrosecond('UTC'), length: 1, nullCount: 0, data: new BigInt64Array([1_704_164_645_123_456n]) })),
    });
    const { schema, batches } = decodeArrowBatch(ipc(t));
    const table2 = concatBatches(schema, batches);
    expect(rows(table2)).toEqual([{ big: 5n, at: '2024-01-02T03:04:05.123456Z' }]);
    expect(rows(table2, { int64: 'number', timestamps: 'micros' })).toEqual([{ big: 5, at: 1_704_164_645_123_456n }]);
    expect(rows(table2, { int64: 'string' })[0]?.big).toBe('5');
  });

  it('writes timestamps without zone as local date-times', () => {
    const t = new Table({
      at: makeVector(makeData({ type: new TimestampMicrosecond(null), length: 1, nullCount: 0, data: new BigInt64Array([1_704_164_645_000_001n]) })),
    });
    expect(rows(t)).toEqual([{ at: '2024-01-02T03:04:05.000001' }]);
  });

  it('converts nested arrays, structs and maps', () => {
    const structType = new Struct([new Field('x', new Int32(), true), new Field('y', new Utf8(), true)]);
    const entries = new Struct<{ key: Utf8; value: Int32 }>([new Field('key', new Utf8(), false), new Field('value', new Int32(), true)]);
    const mapType = new Map_<Utf8, Int32>(new Field('entries', entries, false));
    const t = new Table({
      arr: vectorFromArray([[1, 2], [], null], new List(new Field('element', new Int32(), true))),
      st: vectorFromArray([{ x: 1, y: 'a' }, { x: null, y: null }, null], structType),
      m: vectorFromArray(
        [
          new Map([
            ['k', 1],
            ['l', null],
          ]),
          new Map(),
          null,
        ],
        mapType,
      ),
    } as never);
    const { schema, batches } = decodeArrowBatch(ipc(t));
    expect(rows(concatBatches(schema, batches))).toEqual([
      { arr: [1, 2], st: { x: 1, y: 'a' }, m: { k: 1, l: null } },
      { arr: [], st: { x: null, y: null }, m: {} },
      { arr: null, st: null, m: null },
    ]);
  });

  it('concatenates batches and reads sliced data correctly', () => {
    const a = new Table({ id: vectorFromArray([1, 2, 3], new Int32()), price: decimalVector(12, 2, [100n, 200n, 300n]) });
    const b = new Table({ id: vectorFromArray([4], new Int32()), price: decimalVector(12, 2, [400n]) });
    const first = decodeArrowBatch(ipc(a));
    const second = decodeArrowBatch(ipc(b));
    const all = concatBatches(first.schema, [...first.batches, ...second.batches]);
    expect(all.numRows).toBe(4);
    expect(rows(all).map((r) => r.price)).toEqual(['1.00', '2.00', '3.00', '4.00']);
    expect(rows(all.slice(1, 3))).toEqual([
      { id: 2, price: '2.00' },
      { id: 3, price: '3.00' },
    ]);
  });

  it('keeps the schema of an empty result', () => {
    const empty = new Table({ id: vectorFromArray([], new Int32()) });
    const { schema, batches } = decodeArrowBatch(ipc(empty));
    const t = concatBatches(schema, batches);
    expect(t.numRows).toBe(0);
    expect(t.schema.fields.map((f) => f.name)).toEqual(['id']);
    expect(rows(t)).toEqual([]);
  });
});
