import type { ConfigIssue } from '../../core/errors.js';
import { type Expr, and, cast, coalesce, col, eq, fn, isNotNull, lit, not, or } from '../../spark/plan/expressions.js';
import type { Query } from '../../spark/plan/query.js';
import { UNDECODED } from './kafka-values.js';

/**
 * Avro values in the Confluent wire format (magic byte 0, the schema id as 4 big-endian bytes, the
 * Avro binary body), decoded on the Spark server by spark-avro's `from_avro` into the declared
 * bronze columns (docs/templates/kafka-bronze-ingest.md, "Avro").
 *
 * Each writer schema the job knows (from the registry per schema id, or the config's inline one)
 * is one decoder: a record whose header names it is read with that writer schema and resolved into
 * the reader schema (the subject's latest version), Avro's own schema resolution: a field the
 * writer lacks takes the reader's default, a field the reader lacks is skipped. A record no decoder
 * matches (an unknown schema id, another magic byte, fewer than 5 bytes) or whose body does not
 * decode (truncated) keeps NULL columns and `_kafka_undecoded = ["_kafka_value"]`.
 *
 * The declared columns are checked against the reader schema before anything runs: a column the
 * reader lacks, or whose Avro type does not land exactly in its declared type, is a config error,
 * so every decoded value fits its column (no value is rounded or cut).
 */

/** One writer schema, what it is resolved into, and which records it reads. */
export interface AvroDecoder {
  /** The writer schema (JSON text). */
  readonly writer: string;
  /** The reader schema (JSON text) when it is not the writer's. */
  readonly reader?: string;
  /** The schema id of the records it reads; undefined: any id (an inline schema without an id). */
  readonly id?: number;
  /** The topic whose records it reads; undefined: every topic. */
  readonly topic?: string;
}

/** A record schema's fields as Spark types: name -> Spark SQL type, or why it has none we accept. */
export type AvroFields = ReadonlyMap<string, { readonly type?: string; readonly problem?: string }>;

/** An Avro schema's JSON. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Parse a writer or reader schema: a record, whose fields are mapped to Spark types as spark-avro maps them. */
export function avroRecordFields(text: string): { fields?: AvroFields; name?: string; problem?: string } {
  let schema: Json;
  try {
    schema = JSON.parse(text) as Json;
  } catch (e) {
    return { problem: `is not JSON (${(e as Error).message})` };
  }
  if (!isObject(schema) || schema.type !== 'record' || !Array.isArray(schema.fields))
    return { problem: 'is not an Avro record schema ({"type": "record", "name": …, "fields": […]})' };
  if (typeof schema.name !== 'string' || schema.name === '') return { problem: 'is a record without a name' };
  const fields = new Map<string, { type?: string; problem?: string }>();
  for (const f of schema.fields) {
    if (!isObject(f) || typeof f.name !== 'string') return { problem: 'has a field without a name' };
    fields.set(f.name, sparkType(f.type ?? null));
  }
  return { fields, name: schema.name };
}

export const isObject = (v: Json | undefined): v is { [k: string]: Json } => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Avro's primitive type names, and the types that have a name of their own. */
export const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);
export const NAMED = new Set(['record', 'error', 'enum', 'fixed']);
/** An Avro name in a namespace (a name with a dot is full already), and a full name's namespace. */
export const fullName = (name: string, ns: string | undefined) => (name.includes('.') || !ns ? name : `${ns}.${name}`);
export const namespaceOf = (full: string) => (full.includes('.') ? full.slice(0, full.lastIndexOf('.')) : undefined);
/** The full name a named type's definition gives it inside namespace `ns` (its own `namespace` wins; "" is the null namespace). */
export const definedName = (t: { readonly name: string; readonly namespace?: Json | undefined }, ns: string | undefined) =>
  fullName(t.name, typeof t.namespace === 'string' ? t.namespace || undefined : ns);

/**
 * A schema with its references inlined (the Confluent API's `references`: other subjects' schemas
 * a schema names by their full names; Apicurio's converter registers Debezium's `Source` record so):
 * each referenced type's definition replaces the first use of its name, later uses keep the name.
 * spark-avro reads one self-contained schema. `references`: full name -> that schema (inlined already).
 */
export function inlineReferences(text: string, references: ReadonlyMap<string, string>): string {
  if (!references.size) return text;
  const refs = new Map([...references].map(([n, t]) => [n, JSON.parse(t) as Json]));
  const defined = new Set<string>();
  const walk = (t: Json, ns: string | undefined): Json => {
    if (Array.isArray(t)) return t.map((b) => walk(b, ns));
    if (typeof t === 'string') {
      if (PRIMITIVES.has(t)) return t;
      for (const n of [fullName(t, ns), t])
        if (refs.has(n) && !defined.has(n)) {
          const def = refs.get(n)!;
          // Its own namespace, not the one it is inlined into (a definition without one is in the null namespace).
          return walk(isObject(def) && def.namespace === undefined && !String(def.name).includes('.') ? { ...def, namespace: '' } : def, undefined);
        }
      return t;
    }
    if (!isObject(t)) return t;
    if (typeof t.type === 'string' && NAMED.has(t.type) && typeof t.name === 'string') {
      const full = definedName({ name: t.name, namespace: t.namespace }, ns);
      defined.add(full);
      if (!Array.isArray(t.fields)) return t;
      return { ...t, fields: t.fields.map((f) => (isObject(f) ? { ...f, type: walk(f.type ?? null, namespaceOf(full)) } : f)) };
    }
    if (t.type === 'array') return { ...t, items: walk(t.items ?? null, ns) };
    if (t.type === 'map') return { ...t, values: walk(t.values ?? null, ns) };
    if (typeof t.type !== 'string' || !PRIMITIVES.has(t.type)) return { ...t, type: walk(t.type ?? null, ns) };
    return t;
  };
  return JSON.stringify(walk(JSON.parse(text) as Json, undefined));
}

/** The Spark type spark-avro gives an Avro type (SchemaConverters), for the types a bronze column can take. */
function sparkType(t: Json): { type?: string; problem?: string } {
  if (Array.isArray(t)) {
    const branches = t.filter((b) => b !== 'null' && !(isObject(b) && b.type === 'null'));
    if (branches.length === 1) return sparkType(branches[0]!);
    const types = branches.map((b) => sparkType(b).type);
    // spark-avro merges these two unions into their wider type; any other union is a struct.
    if (types.length === 2 && types.includes('int') && types.includes('bigint')) return { type: 'bigint' };
    if (types.length === 2 && types.includes('float') && types.includes('double')) return { type: 'double' };
    return { problem: `is a union of ${branches.length} types (read as a struct; not a bronze column type)` };
  }
  if (typeof t === 'string') return primitive(t, undefined);
  if (isObject(t) && typeof t.type === 'string') {
    const logical = typeof t.logicalType === 'string' ? t.logicalType : undefined;
    if (logical === 'decimal' && (t.type === 'bytes' || t.type === 'fixed')) {
      const p = Number(t.precision);
      const s = Number(t.scale ?? 0);
      if (Number.isInteger(p) && Number.isInteger(s) && p >= 1 && p <= 38 && s >= 0 && s <= p) return { type: `decimal(${p},${s})` };
      return { problem: `is a decimal of precision ${String(t.precision)} (Spark holds at most 38 digits)` };
    }
    if (t.type === 'enum') return { type: 'string' };
    if (t.type === 'fixed') return { type: 'binary' };
    return primitive(t.type, logical);
  }
  return { problem: `has a type that is not an Avro type (${JSON.stringify(t)})` };
}

function primitive(t: string, logical: string | undefined): { type?: string; problem?: string } {
  switch (t) {
    case 'boolean':
    case 'float':
    case 'double':
    case 'string':
      return { type: t };
    case 'bytes':
      return { type: 'binary' };
    case 'int':
      return { type: logical === 'date' ? 'date' : 'int' };
    case 'long':
      if (logical === 'timestamp-millis' || logical === 'timestamp-micros') return { type: 'timestamp' };
      if (logical === 'local-timestamp-millis' || logical === 'local-timestamp-micros')
        return { problem: `is a ${logical} (a timestamp without time zone; not a bronze column type)` };
      return { type: 'bigint' };
    default:
      return { problem: `is an Avro ${t} (not a bronze column type)` };
  }
}

/**
 * The reader schema one writer version is resolved into: the latest version, except that a field
 * the writer wrote as a decimal of another precision or scale keeps the writer's type. Avro's
 * resolution matches bytes to bytes whatever their logical type, and spark-avro reads the
 * unscaled value at the reader's scale: 120.50 written at scale 2 would land as 12.050 under a
 * latest version of scale 3. Read at its own scale, it is cast into the declared column, which
 * must hold it exactly (readerIssues).
 */
export function readerFor(writer: string, latest: string): string {
  const w = JSON.parse(writer) as Json;
  const r = JSON.parse(latest) as Json;
  if (!isObject(w) || !isObject(r) || !Array.isArray(w.fields) || !Array.isArray(r.fields)) return latest;
  const written = new Map(w.fields.filter(isObject).map((f) => [f.name, f] as const));
  const decimalOf = (t: Json | undefined): string | undefined => {
    const branches = Array.isArray(t) ? t.filter((b) => b !== 'null') : [t];
    const b = branches.length === 1 ? branches[0] : undefined;
    return isObject(b) && b.logicalType === 'decimal' ? `${String(b.precision)},${String(b.scale ?? 0)}` : undefined;
  };
  let changed = false;
  const fields = r.fields.map((f) => {
    const wf = isObject(f) ? written.get(f.name) : undefined;
    if (!isObject(f) || !wf) return f;
    const [from, to] = [decimalOf(wf.type), decimalOf(f.type)];
    if (from === undefined || to === undefined || from === to) return f;
    changed = true;
    return { ...f, type: wf.type ?? null };
  });
  return changed ? JSON.stringify({ ...r, fields }) : latest;
}

const DECIMAL = /^decimal\((\d+),(\d+)\)$/;

/** Whether every value of Spark type `from` lands exactly in `to` (a cast that never rounds nor overflows). */
export function fitsExactly(from: string, to: string): boolean {
  if (from === to) return true;
  const f = DECIMAL.exec(from);
  const t = DECIMAL.exec(to);
  if (f && t) return Number(f[2]) <= Number(t[2]) && Number(f[1]) - Number(f[2]) <= Number(t[1]) - Number(t[2]);
  const widening: Record<string, readonly string[]> = { int: ['bigint', 'double'], float: ['double'] };
  if (t && (from === 'int' || from === 'bigint')) return (from === 'int' ? 10 : 19) <= Number(t[1]) - Number(t[2]);
  return widening[from]?.includes(to) ?? false;
}

/** The reader field a declared column reads: its own name, else the one field equal to it ignoring case. */
export function readerField(fields: ReadonlyMap<string, unknown>, column: string): string | undefined {
  if (fields.has(column)) return column;
  const matches = [...fields.keys()].filter((f) => f.toLowerCase() === column.toLowerCase());
  return matches.length === 1 ? matches[0] : undefined;
}

/** What keeps a reader schema from filling the declared columns, at `source.value-schema.<column>`. */
export function readerIssues(fields: AvroFields, schema: Record<string, string>, what: string): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const [c, declared] of Object.entries(schema)) {
    const path = `source.value-schema.${c}`;
    const f = readerField(fields, c);
    if (f === undefined) {
      issues.push({ path, message: `${what} has no field ${c} (its fields: ${[...fields.keys()].join(', ')})` });
      continue;
    }
    const t = fields.get(f)!;
    if (t.problem) issues.push({ path, message: `${what}'s field ${f} ${t.problem}` });
    else if (!fitsExactly(t.type!, declared))
      issues.push({ path, message: `${what}'s field ${f} is read as ${t.type}, which does not land exactly in ${declared}: declare ${t.type}` });
  }
  return issues;
}

/** Intermediate columns (dropped before the table sees the rows). */
const ID = '__lake_avro_id';
/** The column of decoder k's record (a struct of its reader schema's fields; NULL where the record is not its). */
export const decodedColumn = (k: number) => `__lake_avro_${k}`;

/**
 * A field the reader schema gains, which no writer has: Avro's resolution fills it with its
 * default, true. A body that does not decode is, in from_avro's PERMISSIVE mode, a row of NULLs,
 * so this field tells a failed decode from a record whose own fields are all NULL.
 */
const DECODED = '__lake_decoded';
function withSentinel(reader: string): string {
  const schema = JSON.parse(reader) as { fields: unknown[] };
  return JSON.stringify({ ...schema, fields: [...schema.fields, { name: DECODED, type: 'boolean', default: true }] });
}

/**
 * Each decoder's reading of `_kafka_value` in a column of its own (`decodedColumn(k)`): from the
 * Confluent header (magic byte 0, the schema id as 4 big-endian bytes) the records whose id (and
 * topic) are the decoder's, read by spark-avro's from_avro with its writer schema and resolved into
 * its reader schema. Returns the rows, whether decoder k read the row (`read(k)`: its header named
 * it and its body decoded), and the columns to drop once the caller has read them.
 */
export function withDecoders(records: Query, decoders: readonly AvroDecoder[]): { rows: Query; read: (k: number) => Expr; drop: string[] } {
  const value = col('_kafka_value');
  // The header: magic byte 0 and the schema id (unsigned, big-endian); NULL when it is not one.
  const framed = and(fn('>=', fn('octet_length', value), lit(5)), eq(fn('hex', fn('substr', value, lit(1), lit(1))), lit('00')));
  const id = fn('if', framed, cast(fn('conv', fn('hex', fn('substr', value, lit(2), lit(4))), lit(16), lit(10)), 'bigint'), lit(null));
  let rows = records.withColumns([[ID, id]]);
  const body = fn('substr', value, lit(6));
  if (decoders.length)
    rows = rows.withColumns(
      decoders.map((d, k) => {
        const matches = and(
          isNotNull(col(ID)),
          ...(d.id === undefined ? [] : [eq(col(ID), lit(d.id))]),
          ...(d.topic === undefined ? [] : [eq(col('_kafka_topic'), lit(d.topic))]),
        );
        // PERMISSIVE: a body that does not decode (truncated, another schema) is a row of NULLs, not a failed run.
        const options = [lit('mode'), lit('PERMISSIVE'), lit('avroSchema'), lit(withSentinel(d.reader ?? d.writer))];
        return [decodedColumn(k), fn('if', matches, fn('from_avro', body, lit(d.writer), fn('map', ...options)), lit(null))] as const;
      }),
    );
  return { rows, read: (k) => isNotNull(col(decodedColumn(k), DECODED)), drop: [ID, ...decoders.map((_, k) => decodedColumn(k))] };
}

/**
 * Decode `_kafka_value` into the declared columns with the decoders (whose reader schemas were
 * checked by readerIssues), plus `_kafka_undecoded`. With no decoder every present value is undecodable
 * (the plan as `plan` shows it before the registry was asked).
 */
export function decodeAvro(records: Query, schema: Record<string, string>, decoders: readonly AvroDecoder[]): Query {
  const value = col('_kafka_value');
  const { rows, read, drop } = withDecoders(records, decoders);
  const readerFields = decoders.map((d) => avroRecordFields(d.reader ?? d.writer).fields ?? new Map());
  const columns = Object.entries(schema).map(([c, type]) => {
    const reads = decoders.flatMap((_, k) => {
      const f = readerField(readerFields[k]!, c);
      return f === undefined ? [] : [cast(col(decodedColumn(k), f), type)];
    });
    return [c, reads.length === 0 ? cast(lit(null), type) : reads.length === 1 ? reads[0]! : coalesce(...reads)] as const;
  });
  const decoded = decoders.length ? or(...decoders.map((_, k) => read(k))) : lit(false);
  const undecodable = and(isNotNull(value), not(decoded));
  return rows.withColumns([...columns, [UNDECODED, fn('if', undecodable, fn('array', lit('_kafka_value')), cast(fn('array'), 'array<string>'))]]).drop(...drop);
}
