import type { ConfigIssue } from '../../core/errors.js';
import { type Expr, cast, coalesce, col, fn, lit } from '../../spark/plan/expressions.js';
import type { Query } from '../../spark/plan/query.js';
import {
  type AvroDecoder,
  type Json,
  NAMED,
  PRIMITIVES,
  decodedColumn,
  definedName,
  fullName,
  isObject,
  namespaceOf,
  readerField,
  withDecoders,
} from './kafka-avro.js';
import { type DebeziumSettings, type EnvelopeImage, decodeValue, envelopeValue, valueStruct } from './kafka-values.js';

/**
 * Debezium's change events in Avro (value-format debezium-avro): the connector's envelope
 * (`before`, `after`, `source`, `op`, `ts_ms`) written by a Kafka Connect Avro converter in the
 * Confluent wire format, decoded on the Spark server by spark-avro's from_avro with each writer
 * schema (a registry's versions of the topic's subject, or an inline schema).
 *
 * Each writer schema names, per column, the encoding Debezium chose (`connect.name`: a precise
 * decimal's bytes with its scale, a VariableScaleDecimal struct, MicroTimestamp, ZonedTimestamp,
 * Date, …), as the JSON converter's schema does. So a decoded event is handed to the JSON path's
 * decoding (kafka-values.ts) in the shape from_json gives a JSON event with schemas: one decoding
 * of Debezium's encodings for both converters, the same exactness (never rounded, a value that does
 * not fit is 65 or a counted NULL), the same TOAST placeholder and the same `op`, `_cdc_ts_ms`,
 * `_cdc_lsn`.
 *
 * Every version is read with its own schema (no resolution into the latest): a version's decimal
 * keeps its own scale, and a column a version lacks (added or dropped in PostgreSQL) is NULL there.
 * Logical types are taken off the schema spark-avro reads (the bytes of a decimal, the number of a
 * timestamp, as sent): the encoding names say how to read them, and a decimal of more than 38
 * digits (which Spark's own decimal type cannot hold) still decodes, its value then not fitting.
 */

/** How a column's value is turned into the text the JSON path reads. */
type Kind = 'string' | 'bytes' | 'scalar' | 'variable-scale' | 'complex';
/** A row field's encoding: how to read it as text, and the logical name and scale its schema gives it. */
export interface FieldEncoding {
  readonly kind: Kind;
  readonly name?: string;
  readonly scale?: string;
}
/** One image's (before, after) fields: Avro field name -> encoding. */
export type RowFields = ReadonlyMap<string, FieldEncoding>;

/** A writer schema read as Debezium's envelope. */
export interface Envelope {
  readonly before?: RowFields;
  readonly after?: RowFields;
  /** The row's fields (after's, else before's): what a declared column is looked up in. */
  readonly row: RowFields;
  readonly tsMs: boolean;
  readonly source: { readonly tsMs: boolean; readonly lsn: boolean };
}

const VARIABLE_SCALE = 'io.debezium.data.VariableScaleDecimal';

/** Every named type a schema defines, by full name, with the namespace its own fields are named in. */
function namedTypes(t: Json, ns: string | undefined, out = new Map<string, { def: { [k: string]: Json }; ns: string | undefined }>()) {
  if (Array.isArray(t)) for (const b of t) namedTypes(b, ns, out);
  if (!isObject(t)) return out;
  if (typeof t.type === 'string' && NAMED.has(t.type) && typeof t.name === 'string') {
    const full = definedName({ name: t.name, namespace: t.namespace }, ns);
    out.set(full, { def: t, ns: namespaceOf(full) });
    if (Array.isArray(t.fields)) for (const f of t.fields) if (isObject(f)) namedTypes(f.type ?? null, namespaceOf(full), out);
  } else if (t.type === 'array') namedTypes(t.items ?? null, ns, out);
  else if (t.type === 'map') namedTypes(t.values ?? null, ns, out);
  else if (isObject(t.type) || Array.isArray(t.type)) namedTypes(t.type, ns, out);
  return out;
}

type Named = ReturnType<typeof namedTypes>;

/** A type with a reference to a named type replaced by its definition, and a nullable union by its other branch. */
function resolve(t: Json, ns: string | undefined, named: Named): { node: Json; ns: string | undefined } {
  if (Array.isArray(t)) {
    const branches = t.filter((b) => b !== 'null' && !(isObject(b) && b.type === 'null'));
    return branches.length === 1 ? resolve(branches[0]!, ns, named) : { node: branches, ns };
  }
  if (typeof t === 'string' && !PRIMITIVES.has(t)) {
    const d = named.get(fullName(t, ns)) ?? named.get(t);
    if (d) return { node: d.def, ns: d.ns };
  }
  if (
    isObject(t) &&
    (isObject(t.type) ||
      Array.isArray(t.type) ||
      (typeof t.type === 'string' && !PRIMITIVES.has(t.type) && !NAMED.has(t.type) && t.type !== 'array' && t.type !== 'map'))
  )
    return resolve(t.type, ns, named);
  return { node: t, ns };
}

/** The logical name a type's Avro logical type stands for, where Connect gave it no `connect.name`. */
const LOGICAL_NAMES: Record<string, string> = {
  decimal: 'org.apache.kafka.connect.data.Decimal',
  'timestamp-millis': 'org.apache.kafka.connect.data.Timestamp',
  'timestamp-micros': 'io.debezium.time.MicroTimestamp',
  'timestamp-nanos': 'io.debezium.time.NanoTimestamp',
  date: 'org.apache.kafka.connect.data.Date',
};

function encoding(t: Json, ns: string | undefined, named: Named): FieldEncoding {
  const { node } = resolve(t, ns, named);
  if (Array.isArray(node)) {
    // spark-avro reads a union of int and long (float and double) as the wider number; others as a struct.
    const scalar = node.every((b) => ['int', 'long', 'float', 'double'].includes(typeof b === 'string' ? b : isObject(b) ? String(b.type) : ''));
    return { kind: scalar && node.length === 2 ? 'scalar' : 'complex' };
  }
  const type = typeof node === 'string' ? node : isObject(node) ? node.type : undefined;
  const props = isObject(node) ? node : {};
  const logical = typeof props.logicalType === 'string' ? props.logicalType : undefined;
  const connectName = typeof props['connect.name'] === 'string' ? props['connect.name'] : undefined;
  const name = connectName ?? (logical ? LOGICAL_NAMES[logical] : undefined);
  const params = isObject(props['connect.parameters']) ? props['connect.parameters'] : {};
  const scale = typeof params.scale === 'string' ? params.scale : logical === 'decimal' ? String(typeof props.scale === 'number' ? props.scale : 0) : undefined;
  const naming = { ...(name === undefined ? {} : { name }), ...(scale === undefined ? {} : { scale }) };
  switch (type) {
    case 'string':
    case 'enum':
      return { kind: 'string', ...naming };
    case 'bytes':
    case 'fixed':
      return { kind: 'bytes', ...naming };
    case 'boolean':
    case 'int':
    case 'long':
    case 'float':
    case 'double':
    case 'null':
      return { kind: 'scalar', ...naming };
    case 'record': {
      const fields = Array.isArray(props.fields) ? props.fields.filter(isObject) : [];
      const isVariableScale =
        connectName === VARIABLE_SCALE ||
        (fields.length === 2 && fields.some((f) => f.name === 'scale' && f.type === 'int') && fields.some((f) => f.name === 'value' && f.type === 'bytes'));
      return isVariableScale ? { kind: 'variable-scale', name: VARIABLE_SCALE } : { kind: 'complex', ...naming };
    }
    default:
      return { kind: 'complex', ...naming };
  }
}

/** A record type's fields and their encodings; undefined when the type is not a record. */
function recordFields(t: Json, ns: string | undefined, named: Named): RowFields | undefined {
  const { node, ns: own } = resolve(t, ns, named);
  if (!isObject(node) || node.type !== 'record' || !Array.isArray(node.fields)) return undefined;
  const out = new Map<string, FieldEncoding>();
  for (const f of node.fields) if (isObject(f) && typeof f.name === 'string') out.set(f.name, encoding(f.type ?? null, own, named));
  return out;
}

/** Parse a writer schema as Debezium's change-event envelope. */
export function debeziumEnvelope(text: string): { envelope?: Envelope; problem?: string } {
  let schema: Json;
  try {
    schema = JSON.parse(text) as Json;
  } catch (e) {
    return { problem: `is not JSON (${(e as Error).message})` };
  }
  const what = "is not a Debezium change event envelope (a record with fields op and a record 'after' or 'before')";
  if (!isObject(schema) || schema.type !== 'record' || !Array.isArray(schema.fields) || typeof schema.name !== 'string') return { problem: what };
  const named = namedTypes(schema, undefined);
  const ns = namespaceOf(definedName({ name: schema.name, namespace: schema.namespace }, undefined));
  const field = (n: string) => (schema as { fields: Json[] }).fields.find((f): f is { [k: string]: Json } => isObject(f) && f.name === n);
  const op = field('op');
  const before = field('before') && recordFields(field('before')!.type ?? null, ns, named);
  const after = field('after') && recordFields(field('after')!.type ?? null, ns, named);
  if (!op || resolve(op.type ?? null, ns, named).node !== 'string' || !(before ?? after)) return { problem: what };
  const source = field('source') && recordFields(field('source')!.type ?? null, ns, named);
  return {
    envelope: {
      ...(before ? { before } : {}),
      ...(after ? { after } : {}),
      row: after ?? before!,
      tsMs: field('ts_ms') !== undefined,
      source: { tsMs: source?.has('ts_ms') ?? false, lsn: source?.has('lsn') ?? false },
    },
  };
}

/**
 * What keeps the declared columns from being read out of these envelopes (one topic's writer
 * schemas, at `source.value-schema.<column>`): a column no version's row has. A column some versions
 * lack is NULL in their events (a column added, or dropped, in the source database).
 */
export function envelopeIssues(rows: readonly RowFields[], schema: Record<string, string>, what: string): ConfigIssue[] {
  const latest = rows[rows.length - 1];
  return Object.keys(schema)
    .filter((c) => rows.every((r) => readerField(r, c) === undefined))
    .map((c) => ({
      path: `source.value-schema.${c}`,
      message: `${what} has no field ${c} in its row (its fields: ${[...(latest?.keys() ?? [])].join(', ')})`,
    }));
}

/** A schema without its logical types: what spark-avro reads (a decimal's bytes, a timestamp's number, as sent). */
export function withoutLogicalTypes(text: string): string {
  const strip = (t: Json): Json => {
    if (Array.isArray(t)) return t.map(strip);
    if (!isObject(t)) return t;
    return Object.fromEntries(Object.entries(t).flatMap(([k, v]) => (k === 'logicalType' ? [] : [[k, strip(v)]])));
  };
  return JSON.stringify(strip(JSON.parse(text) as Json));
}

/**
 * Bytes as the JSON converter writes them: base64 in one line (Spark's base64 breaks lines after 76
 * characters unless spark.sql.chunkBase64String.enabled is off).
 */
const base64 = (v: Expr) => fn('replace', fn('base64', v), lit('\r\n'), lit(''));

/** A decoded field's text (the field at `path`), as the JSON converter would have written it: bytes in base64, numbers as their text. */
function text(path: string[], e: FieldEncoding): Expr {
  const v = col(...path);
  switch (e.kind) {
    case 'string':
      return v;
    case 'bytes':
      return base64(v);
    case 'scalar':
      return cast(v, 'string');
    case 'variable-scale':
      return fn('to_json', fn('named_struct', lit('scale'), col(...path, 'scale'), lit('value'), base64(col(...path, 'value'))));
    case 'complex':
      return fn('to_json', v);
  }
}

export interface DebeziumAvroOptions {
  readonly schema: Record<string, string>;
  readonly decoders: readonly AvroDecoder[];
  readonly debezium: DebeziumSettings;
  readonly badValues: 'fail' | 'set-null';
}

/**
 * Parse `_kafka_value` (Debezium's Avro envelope) into the declared columns, `op`, `_cdc_ts_ms`,
 * `_cdc_lsn`, `_cdc_unavailable` and `_kafka_undecoded`, as debezium-json does. A record no decoder
 * reads (an unknown schema id, no Confluent header, a body that does not decode) is undecodable.
 */
export function decodeDebeziumAvro(records: Query, o: DebeziumAvroOptions): Query {
  const envelopes = o.decoders.map((d) => debeziumEnvelope(d.writer).envelope);
  const readable = o.decoders.flatMap((d, k) => (envelopes[k] ? [{ ...d, writer: withoutLogicalTypes(d.writer) }] : []));
  const kept = envelopes.filter((e): e is Envelope => e !== undefined);
  const { rows, read, drop } = withDecoders(records, readable);
  const columns = Object.keys(o.schema);
  const values = kept.map((e, k) => {
    const at = (...path: string[]) => col(decodedColumn(k), ...path);
    const image = (side: 'before' | 'after'): EnvelopeImage => {
      const fields = e[side];
      if (!fields) return { text: lit(null), fields: [] };
      const present = columns.flatMap((c) => {
        const f = readerField(fields, c);
        return f === undefined ? [] : [{ column: c, field: f, encoding: fields.get(f)! }];
      });
      const texts = columns.flatMap((c) => {
        const p = present.find((x) => x.column === c);
        return [lit(c), p ? text([decodedColumn(k), side, p.field], p.encoding) : lit(null)];
      });
      return {
        text: fn('if', fn('isnull', at(side)), lit(null), fn('named_struct', ...texts)),
        fields: present.map((p) => ({ column: p.column, name: p.encoding.name, scale: p.encoding.scale })),
      };
    };
    const value = envelopeValue(o.schema, {
      before: image('before'),
      after: image('after'),
      op: at('op'),
      tsMs: e.tsMs ? at('ts_ms') : lit(null),
      sourceTsMs: e.source.tsMs ? at('source', 'ts_ms') : lit(null),
      lsn: e.source.lsn ? at('source', 'lsn') : lit(null),
    });
    return fn('if', read(k), value, lit(null));
  });
  const parsed = values.length === 0 ? cast(lit(null), valueStruct('debezium-json', o.schema)) : values.length === 1 ? values[0]! : coalesce(...values);
  return decodeValue(rows, { format: 'debezium-json', schema: o.schema, debezium: o.debezium, badValues: o.badValues, parsed }).drop(...drop);
}
