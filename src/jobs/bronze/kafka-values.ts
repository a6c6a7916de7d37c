import { sql } from '../../spark/plan/sql.js';
import { type Expr, alias, and, cast, coalesce, col, eq, fn, isNotNull, isNull, lit, not, or, tryCast } from '../../spark/plan/expressions.js';
import type { Query } from '../../spark/plan/query.js';
import { BAD_VALUE_MARKER } from '../../core/errors.js';

/**
 * How kafka-bronze-ingest turns a record's value into typed columns (docs/templates/kafka-bronze-ingest.md,
 * "Parsed values"). Every declared field is read as text first (the JSON field's string, or any other
 * JSON value's text) and converted to its declared type here, so a value either lands exactly or is
 * known not to fit: a decimal is never rounded, a timestamp never read in the wrong unit, and a
 * value that does not fit is never a silent NULL (the run fails, or the column is NULL and counted).
 *
 * Debezium's JSON converter sends, per column type, one of its encodings: decimals as the unscaled
 * value's big-endian two's-complement bytes in base64 (`decimal.handling.mode=precise`, the scale in
 * the event's schema), as text (`string`) or as a number (`double`); timestamps as microseconds
 * (`MicroTimestamp`), milliseconds (`Timestamp`), nanoseconds (`NanoTimestamp`) or ISO-8601 text
 * with an offset (`ZonedTimestamp`); dates as days since 1970. With schemas on, each event's schema
 * names the encoding of each field; without them the declared connector settings do.
 */

export const CDC_OP = 'op';
export const CDC_TS = '_cdc_ts_ms';
/** The change's position in the source's log (PostgreSQL: `source.lsn`), what orders a key's changes. */
export const CDC_LSN = '_cdc_lsn';
/** Columns whose value the source did not send (Debezium's placeholder for an unchanged TOASTed value). */
export const CDC_UNAVAILABLE = '_cdc_unavailable';
/** Columns whose value did not fit its declared type (NULL in this row), or `_kafka_value` when the value did not decode at all. */
export const UNDECODED = '_kafka_undecoded';
/** The name of the streaming query's observed aggregates: decode counts per micro-batch. */
export const DECODE_METRICS = 'lake_decode';

export interface DebeziumSettings {
  readonly decimalHandlingMode: 'precise' | 'string' | 'double';
  readonly timePrecisionMode: 'adaptive' | 'adaptive_time_microseconds' | 'connect';
  readonly unavailableValuePlaceholder: string;
}

export type ParsedFormat = 'json' | 'debezium-json';

/** Intermediate columns of the plan (dropped before the table sees the rows). */
const VALUE = '__lake_value';
const ROW = '__lake_row';
const NAMES = '__lake_field_names';
const PARAMS = '__lake_field_params';
const BAD = '__lake_bad';
const UNAV = '__lake_unavailable';
const UNDECODABLE = '__lake_undecodable';
const ROW_FIELDS = '__lake_row_fields';

const DECIMAL = /^decimal\((\d+),(\d+)\)$/;
const INTEGER_TEXT = '^-?[0-9]+$';
const TWO_TO_64 = lit({ decimal: '18446744073709551616', precision: 20, scale: 0 });

const when = (...args: Expr[]) => fn('when', ...args);
const str = (s: string) => lit(s);

/** Per field of a Debezium event: whether the event has a schema, its logical type name and `scale` parameter. */
interface FieldSchema {
  readonly hasSchema: Expr;
  readonly name: Expr;
  readonly scale: Expr;
}

/**
 * Columns the decoding binds, stage by stage (one `withColumns` each), so that an expression reads
 * a bound column instead of repeating its subtree: the plan stays linear in the number of columns.
 */
class Bindings {
  private n = 0;
  readonly stages: (readonly [string, Expr])[][] = [];
  readonly names: string[] = [];
  bind(stage: number, expr: Expr): Expr {
    const name = `__lake_d${this.n++}`;
    (this.stages[stage] ??= []).push([name, expr]);
    this.names.push(name);
    return col(name);
  }
}

/** The stage at which every column's decoded value is bound (the deepest decoding is a decimal's). */
const VALUE_STAGE = 6;

/**
 * The decimal text of a big-endian two's-complement integer (base64 in `bytesText`) times
 * 10^-scale: exact, the point is placed, nothing is computed. Up to 16 bytes (beyond that NULL: no
 * Spark decimal holds it). `conv` reads at most 64 bits, so the bytes are read as two halves; a
 * negative value is read from its complement, so no intermediate exceeds the value's magnitude.
 */
function unscaledBytesText(b: Bindings, bytesText: Expr, scale: Expr): { text: Expr; stage: number } {
  const hex = b.bind(0, fn('hex', fn('try_to_binary', bytesText, str('base64'))));
  const k = b.bind(0, scale);
  const negative = b.bind(1, fn('>=', fn('substr', hex, lit(1), lit(1)), str('8')));
  const magnitude = b.bind(2, fn('if', negative, fn('translate', hex, str('0123456789ABCDEF'), str('FEDCBA9876543210')), hex));
  const n = fn('length', magnitude);
  const half = (h: Expr) => cast(fn('conv', h, lit(16), lit(10)), 'decimal(38,0)');
  const lo = half(fn('right', magnitude, lit(16)));
  const hi = fn('if', fn('>', n, lit(16)), half(fn('left', magnitude, fn('-', n, lit(16)))), lit({ decimal: '0', precision: 1, scale: 0 }));
  const unsigned = fn('try_add', fn('try_multiply', hi, TWO_TO_64), lo);
  const abs = fn('if', negative, fn('try_add', unsigned, lit(1)), unsigned);
  const digits = b.bind(3, fn('if', fn('>', n, lit(32)), lit(null), cast(abs, 'string')));
  const padded = b.bind(4, fn('if', fn('>', fn('length', digits), k), digits, fn('lpad', digits, fn('+', k, lit(1)), str('0'))));
  const len = fn('length', padded);
  const intPart = fn('substr', padded, lit(1), fn('-', len, k));
  const frac = fn('substr', padded, fn('+', fn('-', len, k), lit(1)), k);
  const text = fn('concat', fn('if', negative, str('-'), str('')), intPart, fn('if', fn('>', k, lit(0)), fn('concat', str('.'), frac), str('')));
  return { text: fn('if', fn('<', k, lit(0)), lit(null), text), stage: 5 };
}

/**
 * Decimal text as the declared decimal(p,s), only when exact: NULL when it overflows p or has
 * non-zero digits beyond s (Spark's cast would round them away). A double's text in scientific
 * notation is exact when the decimal converts back to the same double.
 */
function exactDecimal(text: Expr, type: string, s: number): Expr {
  const value = tryCast(text, type);
  const fraction = fn('regexp_extract', text, str('\\.([0-9]*)$'), lit(1));
  const plainExact = fn('rlike', fn('substr', fraction, lit(s + 1)), str('^0*$'));
  const scientificExact = eq(cast(value, 'double'), tryCast(text, 'double'));
  const exact = fn('if', fn('rlike', text, str('[eE]')), scientificExact, plainExact);
  return fn('if', coalesce(exact, lit(false)), value, lit(null));
}

/** A numeric timestamp in `unit` (`s`, `ms`, `us`, `ns`): nanoseconds only when whole microseconds (Spark's precision). */
function numericTimestamp(text: Expr, unit: Expr): Expr {
  const n = tryCast(text, 'bigint');
  return when(
    eq(unit, str('us')),
    fn('timestamp_micros', n),
    eq(unit, str('ms')),
    fn('timestamp_millis', n),
    eq(unit, str('ns')),
    fn('if', eq(fn('pmod', n, lit(1000)), lit(0)), fn('timestamp_micros', fn('div', n, lit(1000))), lit(null)),
    fn('timestamp_seconds', n),
  );
}

/**
 * A field's text as its declared type, bound at VALUE_STAGE; NULL when it does not fit. `field` is
 * the Debezium schema's view of it (undefined for plain JSON).
 */
function decodeText(b: Bindings, text: Expr, type: string, field: FieldSchema | undefined, dbz: DebeziumSettings | undefined): Expr {
  const isInteger = fn('rlike', text, str(INTEGER_TEXT));
  const decimal = DECIMAL.exec(type);
  if (decimal) {
    const s = Number(decimal[2]);
    if (!field || !dbz) return b.bind(VALUE_STAGE, exactDecimal(b.bind(0, text), type, s));
    // With schemas: the field's logical type says bytes (Decimal), a {scale, value} struct
    // (VariableScaleDecimal) or text; without: decimal.handling.mode (precise: bytes of the declared scale).
    const named = (n: string) => coalesce(eq(field.name, str(n)), lit(false));
    // A NUMERIC without scale is a {scale, value} struct: named so by the schema, or seen as JSON without it.
    const varScale = fn('if', field.hasSchema, named('io.debezium.data.VariableScaleDecimal'), coalesce(fn('startswith', text, str('{')), lit(false)));
    const useBytes = b.bind(
      0,
      fn('if', field.hasSchema, or(named('org.apache.kafka.connect.data.Decimal'), varScale), lit(dbz.decimalHandlingMode === 'precise')),
    );
    const raw = b.bind(0, text);
    const bytes = unscaledBytesText(
      b,
      fn('if', varScale, fn('get_json_object', text, str('$.value')), text),
      fn('if', varScale, tryCast(fn('get_json_object', text, str('$.scale')), 'int'), coalesce(tryCast(field.scale, 'int'), lit(s))),
    );
    const decimalText = b.bind(bytes.stage, fn('if', useBytes, bytes.text, raw));
    return b.bind(VALUE_STAGE, exactDecimal(decimalText, type, s));
  }
  switch (type) {
    case 'string':
      return b.bind(VALUE_STAGE, text);
    case 'binary':
      return b.bind(VALUE_STAGE, fn('try_to_binary', text, str('base64')));
    case 'date':
      return b.bind(VALUE_STAGE, fn('if', isInteger, fn('date_from_unix_date', tryCast(text, 'int')), tryCast(text, 'date')));
    case 'timestamp': {
      // Plain JSON numbers are seconds (as Spark's JSON reader takes them); Debezium's name the unit.
      let unit: Expr = str('s');
      if (field && dbz) {
        const fallback = dbz.timePrecisionMode === 'connect' ? 'ms' : 'us';
        unit = coalesce(
          when(
            eq(field.name, str('io.debezium.time.MicroTimestamp')),
            str('us'),
            eq(field.name, str('io.debezium.time.NanoTimestamp')),
            str('ns'),
            eq(field.name, str('io.debezium.time.Timestamp')),
            str('ms'),
            eq(field.name, str('org.apache.kafka.connect.data.Timestamp')),
            str('ms'),
          ),
          str(fallback),
        );
      }
      return b.bind(VALUE_STAGE, fn('if', isInteger, numericTimestamp(text, unit), tryCast(text, 'timestamp')));
    }
    default:
      return b.bind(VALUE_STAGE, tryCast(text, type));
  }
}

/** The value's struct as Spark's from_json parses it: every declared field as text. */
export function valueStruct(format: ParsedFormat, schema: Record<string, string>): string {
  const columns = sql.join(
    Object.keys(schema).map((c) => sql`${sql.id(c)}: string`),
    sql`, `,
  ).text;
  const row = `struct<${columns}>`;
  // Spark's from_json gives a row of NULLs, not NULL, for text that is not JSON: the corrupt-record
  // column is what tells it from a value whose fields are all null.
  const corrupt = `${CORRUPT}: string`;
  if (format === 'json') return `struct<${columns ? `${columns}, ` : ''}${corrupt}>`;
  const envelope = `before: ${row}, after: ${row}, op: string, ts_ms: bigint, source: struct<ts_ms: bigint, lsn: bigint>`;
  const fields = 'array<struct<field: string, name: string, parameters: map<string, string>>>';
  return `struct<schema: struct<fields: array<struct<field: string, fields: ${fields}>>>, payload: struct<${envelope}>, ${envelope}, ${corrupt}>`;
}

/** from_json's column for the text of a value it could not parse (a reserved `__lake_` name). */
const CORRUPT = '__lake_corrupt';

export interface DecodeOptions {
  readonly format: ParsedFormat;
  readonly schema: Record<string, string>;
  readonly debezium?: DebeziumSettings | undefined;
  readonly badValues: 'fail' | 'set-null';
  /**
   * The value already parsed by another decoder into the struct from_json gives (valueStruct of
   * the format: Debezium's Avro envelope, envelopeValue), instead of reading `_kafka_value` as JSON.
   */
  readonly parsed?: Expr;
}

/** One image of a Debezium event (before, after): its declared columns as text, and the encoding its schema names for each. */
export interface EnvelopeImage {
  /** A struct of the declared columns' text, in the order of the declared schema (NULL: the event has no such image). */
  readonly text: Expr;
  /** Per declared column the writer field has: its logical type name and `scale` parameter, as the JSON converter's schema names them. */
  readonly fields: readonly { readonly column: string; readonly name?: string | undefined; readonly scale?: string | undefined }[];
}

/**
 * A Debezium event that another decoder parsed (Avro), as the struct from_json gives for a JSON
 * event with schemas (valueStruct('debezium-json')): decodeValue then reads it exactly as it reads
 * JSON, one decoding of Debezium's encodings for both.
 */
export function envelopeValue(
  schema: Record<string, string>,
  e: { readonly before: EnvelopeImage; readonly after: EnvelopeImage; readonly op: Expr; readonly tsMs: Expr; readonly sourceTsMs: Expr; readonly lsn: Expr },
): Expr {
  const fieldType = 'struct<field: string, name: string, parameters: map<string, string>>';
  const image = (side: string, i: EnvelopeImage) =>
    cast(
      fn(
        'named_struct',
        str('field'),
        str(side),
        str('fields'),
        fn(
          'array',
          ...i.fields.map((f) =>
            cast(
              fn(
                'named_struct',
                str('field'),
                str(f.column),
                str('name'),
                f.name === undefined ? lit(null) : str(f.name),
                str('parameters'),
                f.scale === undefined ? fn('map') : fn('map', str('scale'), str(f.scale)),
              ),
              fieldType,
            ),
          ),
        ),
      ),
      `struct<field: string, fields: array<${fieldType}>>`,
    );
  const value = fn(
    'named_struct',
    str('schema'),
    fn('named_struct', str('fields'), fn('array', image('before', e.before), image('after', e.after))),
    str('payload'),
    lit(null),
    str('before'),
    e.before.text,
    str('after'),
    e.after.text,
    str('op'),
    e.op,
    str('ts_ms'),
    e.tsMs,
    str('source'),
    fn('named_struct', str('ts_ms'), e.sourceTsMs, str('lsn'), e.lsn),
    str(CORRUPT),
    lit(null),
  );
  return cast(value, valueStruct('debezium-json', schema));
}

/**
 * Parse `_kafka_value` into the declared columns (and, for Debezium, `op`, `_cdc_ts_ms`,
 * `_cdc_lsn`, `_cdc_unavailable`), plus `_kafka_undecoded`. A value that does not fit its column
 * fails the query with a message naming the record and the column (`bad-values = fail`), or leaves
 * the column NULL, listed in `_kafka_undecoded` (`null`). A value that does not decode at all
 * (not JSON; a Debezium value without `op`) keeps NULL columns and `_kafka_undecoded = [_kafka_value]`.
 * With `parsed` (Debezium's Avro envelope) a value its decoder could not read is NULL there, so undecodable too.
 */
export function decodeValue(records: Query, o: DecodeOptions): Query {
  const fields = Object.entries(o.schema);
  let rows = records.withColumns([
    [
      VALUE,
      o.parsed ??
        fn('from_json', cast(col('_kafka_value'), 'string'), lit(valueStruct(o.format, o.schema)), fn('map', lit('columnNameOfCorruptRecord'), lit(CORRUPT))),
    ],
  ]);
  const dbz = o.format === 'debezium-json' ? o.debezium : undefined;
  const present = isNotNull(col('_kafka_value'));
  let text = (c: string): Expr => col(VALUE, c);
  let field = (_c: string): FieldSchema | undefined => undefined;
  let undecodable = and(present, or(isNull(col(VALUE)), isNotNull(col(VALUE, CORRUPT))));
  let envelope: (readonly [string, Expr])[] = [];
  if (dbz) {
    // With or without the JSON converter's schema/payload wrapper; a delete's row is its before image.
    const either = (...path: string[]) => coalesce(col(VALUE, 'payload', ...path), col(VALUE, ...path));
    const op = either('op');
    const isDelete = coalesce(eq(op, str('d')), lit(false));
    const schemaFields = (...path: string[]) => col(VALUE, 'schema', 'fields', ...path);
    const rowFields = fn(
      'try_element_at',
      fn('map_from_arrays', schemaFields('field'), schemaFields('fields')),
      fn('if', isDelete, str('before'), str('after')),
    );
    rows = rows
      .withColumns([
        [ROW, fn('if', isDelete, either('before'), either('after'))],
        [ROW_FIELDS, rowFields],
      ])
      .withColumns([
        [NAMES, fn('map_from_arrays', col(ROW_FIELDS, 'field'), col(ROW_FIELDS, 'name'))],
        [PARAMS, fn('map_from_arrays', col(ROW_FIELDS, 'field'), col(ROW_FIELDS, 'parameters'))],
      ]);
    text = (c) => col(ROW, c);
    field = (c) => ({
      hasSchema: isNotNull(col(NAMES)),
      name: fn('try_element_at', col(NAMES), str(c)),
      scale: fn('try_element_at', fn('try_element_at', col(PARAMS), str(c)), str('scale')),
    });
    undecodable = and(present, or(isNull(col(VALUE)), isNotNull(col(VALUE, CORRUPT)), isNull(op)));
    envelope = [
      [CDC_OP, op],
      [CDC_TS, coalesce(either('source', 'ts_ms'), either('ts_ms'))],
      [CDC_LSN, either('source', 'lsn')],
    ];
  }
  // Debezium's placeholder for a value it did not get (an unchanged TOASTed column): not a value,
  // never a bad one; the column is NULL and listed in _cdc_unavailable.
  const unavailable = (c: string, type: string): Expr => {
    if (!dbz) return lit(false);
    const p = dbz.unavailableValuePlaceholder;
    const forms = type === 'binary' ? [p, Buffer.from(p, 'utf8').toString('base64')] : [p];
    return coalesce(or(...forms.map((f) => eq(text(c), str(f)))), lit(false));
  };
  const b = new Bindings();
  const decoded = fields.map(([c, type]) => [c, decodeText(b, text(c), type, field(c), dbz)] as const);
  for (const stage of b.stages) if (stage?.length) rows = rows.withColumns(stage);
  const bad = (c: string, type: string, value: Expr) => and(isNotNull(text(c)), isNull(value), not(unavailable(c, type)));
  rows = rows.withColumns([
    ...decoded.map(([c, v]) => [c, fn('if', unavailable(c, o.schema[c]!), lit(null), v)] as const),
    [BAD, fn('array_compact', fn('array', ...decoded.map(([c, v]) => fn('if', bad(c, o.schema[c]!, v), str(c), lit(null)))))],
    [UNAV, fn('array_compact', fn('array', ...fields.map(([c, t]) => fn('if', unavailable(c, t), str(c), lit(null)))))],
    [UNDECODABLE, undecodable],
    ...envelope,
  ]);
  // fail: the check is part of a written column, evaluated for every row before it lands (a Filter
  // would be pushed below the decoding by the optimizer, inlining every stage into its condition).
  let listed: Expr = col(BAD);
  if (o.badValues === 'fail') {
    const message = fn(
      'concat',
      str(`${BAD_VALUE_MARKER} a value does not fit its declared column (source.value-schema): topic `),
      col('_kafka_topic'),
      str(', partition '),
      cast(col('_kafka_partition'), 'string'),
      str(', offset '),
      cast(col('_kafka_offset'), 'string'),
      str(', column '),
      fn('array_join', col(BAD), str(', ')),
      str(' (set source.bad-values = set-null to keep such values NULL and count them)'),
    );
    listed = fn('if', fn('>', fn('size', col(BAD)), lit(0)), fn('raise_error', message), col(BAD));
  }
  return rows
    .withColumns([...(dbz ? [[CDC_UNAVAILABLE, col(UNAV)] as const] : []), [UNDECODED, fn('if', col(UNDECODABLE), fn('array', str('_kafka_value')), listed)]])
    .drop(VALUE, ROW, ROW_FIELDS, NAMES, PARAMS, BAD, UNAV, UNDECODABLE, ...b.names);
}

/**
 * The decode counts of a micro-batch, observed on the rows as they are written: records whose value
 * did not decode, and per declared column the values that did not fit (NULL under `bad-values = set-null`).
 */
export function observeDecoding(rows: Query, schema: Record<string, string>): Query {
  const listed = (c: string) => fn('count_if', fn('array_contains', col(UNDECODED), str(c)));
  return rows.observe(DECODE_METRICS, alias(listed('_kafka_value'), 'undecodable'), ...Object.keys(schema).map((c) => alias(listed(c), `nulled.${c}`)));
}
