import { z } from 'zod';
import { ConfigError } from '../../core/errors.js';
import { COLUMN_PATTERN, type Layer, tableParts } from '../../core/naming.js';
import { catalogName, columnName, columnTypeName, name, tableName } from '../../core/config/validate.js';
import { KAFKA_TOPIC } from '../../core/config/platform.js';
import { isUnderRoot } from '../../core/tenant.js';
import { alias, col, fn, lit } from '../../spark/plan/expressions.js';
import { Query, sqlCommand } from '../../spark/plan/query.js';
import { sql } from '../../spark/plan/sql.js';
import type { JobContext, JobPlan, StreamProgress } from '../template.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { createNamespaceStep } from '../tables.js';
import {
  BRONZE_SESSION_CONF,
  BRONZE_STAMPS,
  SNAPSHOT_DATE,
  bronzeOutput,
  bronzeRef,
  bronzeShape,
  bronzeShapeKeys,
  checkBronzePartitionBy,
  createBronzeTable,
} from '../layers/bronze.js';
import { TOPIC_GLOB, type TopicSelection, checkGrant, connectionOptions, subscription, topicChecks } from './kafka-source.js';
import { type AvroDecoder, avroRecordFields, decodeAvro, readerFor, readerIssues } from './kafka-avro.js';
import { type RowFields, debeziumEnvelope, decodeDebeziumAvro, envelopeIssues } from './kafka-debezium-avro.js';
import type { RegisteredSchema } from '../steps.js';
import { CDC_LSN, CDC_OP, CDC_TS, CDC_UNAVAILABLE, DECODE_METRICS, type DebeziumSettings, UNDECODED, decodeValue, observeDecoding } from './kafka-values.js';
import type { SchemaDiff } from '../template.js';

/**
 * kafka-bronze-ingest: copy Kafka records into the tenant's bronze Iceberg or Delta table
 * `<catalog>.<tenant>_bronze.<table>` with Structured Streaming, trigger availableNow: a run takes
 * what the topics hold when it starts and ends (an Airflow task, not a service).
 *
 * Every record keeps its raw key, value, headers, topic, partition, offset and timestamp (the
 * `_kafka_*` columns), and the bronze stamps. `_snapshot_date` is the UTC date of the record's
 * Kafka timestamp: a replayed record gets the same row. Values may also be parsed: JSON or Avro
 * with a declared schema, or Debezium's change-event envelope (JSON or Avro) into the row's columns
 * plus `op`, `_cdc_ts_ms` and `_cdc_lsn`, the columns cdc-silver-merge v2 resolves.
 *
 * Exactly once: the query's checkpoint (`<storage-root>/_checkpoints/<table>`) records the offsets
 * of each micro-batch before it is written, and Iceberg's and Delta's streaming sinks commit a
 * batch id at most once; a run killed at any point (runner or Spark server) is resumed by the next
 * run from the checkpoint, and every offset lands once.
 */

const TEMPLATE = 'kafka-bronze-ingest';

/** The raw record's columns, as Spark's Kafka source names them, and as bronze names them. */
export const KAFKA_COLUMNS = [
  ['key', '_kafka_key'],
  ['value', '_kafka_value'],
  ['topic', '_kafka_topic'],
  ['partition', '_kafka_partition'],
  ['offset', '_kafka_offset'],
  ['timestamp', '_kafka_timestamp'],
  ['timestampType', '_kafka_timestamp_type'],
  ['headers', '_kafka_headers'],
] as const;

export { CDC_LSN, CDC_OP, CDC_TS, CDC_UNAVAILABLE, UNDECODED };

/** Names a parsed value column cannot take: they are the template's own. */
const RESERVED = new Set<string>([...KAFKA_COLUMNS.map(([, b]) => b), ...BRONZE_STAMPS, CDC_OP, CDC_TS, CDC_LSN, CDC_UNAVAILABLE, UNDECODED]);

const SCALAR_TYPES = ['string', 'boolean', 'int', 'bigint', 'float', 'double', 'date', 'timestamp', 'binary'];
/** A value column's type: a scalar or decimal(p,s), normalised (it travels inside a schema Spark parses). */
const columnType = () => columnTypeName(SCALAR_TYPES);

const source = z
  .object({
    cluster: name().optional().describe("A Kafka cluster of the platform config (kafka.clusters.<name>); default: the platform's default cluster."),
    topics: z
      .array(z.string().regex(KAFKA_TOPIC, 'must be a Kafka topic name (letters, digits, . _ -)'))
      .min(1)
      .optional()
      .describe('The topics to read; each must be granted to the tenant by the platform. Exactly one of topics and topic-pattern.'),
    'topic-pattern': z
      .string()
      .regex(TOPIC_GLOB, 'must be a topic name glob: topic name characters and * (e.g. acme.orders.*)')
      .optional()
      .describe(
        'A glob over topic names (* matches any run of topic name characters), also matching topics created later; it must start with a granted prefix.',
      ),
    'starting-offsets': z
      .enum(['earliest', 'latest'])
      .default('earliest')
      .describe('Where the first run starts; later runs resume from the checkpoint whatever this says.'),
    'max-offsets-per-trigger': z
      .number()
      .int()
      .min(1)
      .max(100_000_000)
      .optional()
      .describe('At most this many records per micro-batch (each batch is one table commit); default: all available in one batch.'),
    'fail-on-data-loss': z
      .boolean()
      .default(true)
      .describe('Fail (65) when offsets the checkpoint expects are gone (retention, a recreated topic); false skips them.'),
    'value-format': z
      .enum(['raw', 'json', 'debezium-json', 'avro', 'debezium-avro'])
      .default('raw')
      .describe(
        "raw: bytes only; json: parse with value-schema; debezium-json: a Debezium change event (Kafka Connect's JSON converter); avro: Avro in the Confluent wire format (source.avro says where the writer schemas are); debezium-avro: a Debezium change event in Avro (an Avro converter writing the Confluent wire format; source.avro as for avro).",
      ),
    avro: z
      .object({
        registry: name()
          .optional()
          .describe(
            "A schema registry of the platform config (schema-registries.<name>): each topic's writer schemas are its subject <topic>-value's versions, the reader schema its latest version.",
          ),
        schema: z
          .union([z.string(), z.record(z.string(), z.unknown())])
          .optional()
          .describe('The writer schema itself (Avro JSON, as text or as an object): no registry.'),
        'schema-id': z
          .number()
          .int()
          .min(0)
          .max(2 ** 32 - 1)
          .optional()
          .describe('With schema: the schema id the records carry; a record with another id is undecodable (default: any id).'),
      })
      .strict()
      .optional()
      .describe('Where the writer schemas of value-format avro and debezium-avro come from: exactly one of registry and schema.'),
    'value-schema': z
      .record(columnName(), columnType())
      .optional()
      .describe(
        "The columns to parse out of the value (json, avro), or of the envelope's row (debezium-json, debezium-avro): column name -> type. Columns may be added later (the bronze table gains them), never removed or retyped.",
      ),
    'bad-values': z
      .enum(['fail', 'set-null'])
      .default('fail')
      .describe(
        'A value that does not fit its declared type (a decimal that would be rounded or overflow, text in a bigint column): fail the run (65, naming topic, partition, offset and column), or keep the column NULL, list it in _kafka_undecoded and count it in the status (set-null).',
      ),
    debezium: z
      .object({
        'decimal-handling-mode': z
          .enum(['precise', 'string', 'double'])
          .optional()
          .describe(
            "The connector's decimal.handling.mode, for JSON events without schemas (with schemas, and in Avro, each event's schema says): precise (the default) = base64 bytes of the unscaled value at the declared column's scale.",
          ),
        'time-precision-mode': z
          .enum(['adaptive', 'adaptive_time_microseconds', 'connect'])
          .optional()
          .describe(
            "The connector's time.precision.mode, for JSON events without schemas: a numeric timestamp is microseconds (adaptive, the default: PostgreSQL's timestamp(4..6)) or milliseconds (connect).",
          ),
        'unavailable-value-placeholder': z
          .string()
          .min(1)
          .max(256)
          .default('__debezium_unavailable_value')
          .describe("The connector's unavailable.value.placeholder: a TOASTed column it did not get is NULL and listed in _cdc_unavailable, never this text."),
      })
      .strict()
      .optional()
      .describe('How the Debezium connector encodes values (value-format debezium-json or debezium-avro): its settings of the same names.'),
  })
  .strict()
  .superRefine((s, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    if (s.topics === undefined && s['topic-pattern'] === undefined) issue(['topics'], 'is required (or source.topic-pattern)');
    if (s.topics !== undefined && s['topic-pattern'] !== undefined) issue(['topic-pattern'], 'cannot be combined with source.topics: give one of them');
    s.topics?.forEach((t, i) => {
      if (s.topics!.indexOf(t) !== i) issue(['topics', i], `"${t}" appears twice`);
    });
    const schema = s['value-schema'];
    if (s.debezium !== undefined && !isDebezium(s['value-format'])) issue(['debezium'], 'needs value-format debezium-json or debezium-avro');
    if (s['value-format'] === 'debezium-avro')
      for (const k of ['decimal-handling-mode', 'time-precision-mode'] as const)
        if (s.debezium?.[k] !== undefined)
          issue(['debezium', k], "is for JSON events without schemas: an Avro event's schema names each field's encoding (leave it out)");
    avroIssues(s, issue);
    if (s['value-format'] === 'raw' && schema !== undefined)
      issue(['value-schema'], 'needs a parsed value-format (json, debezium-json, avro or debezium-avro)');
    if (s['value-format'] !== 'raw' && (schema === undefined || Object.keys(schema).length === 0))
      issue(['value-schema'], `is required with value-format ${s['value-format']} (the columns to parse)`);
    const seen = new Set<string>();
    for (const c of Object.keys(schema ?? {})) {
      if (RESERVED.has(c.toLowerCase()) || c.toLowerCase().startsWith('_kafka_') || c.toLowerCase().startsWith('_lake_'))
        issue(['value-schema', c], 'is a column of the template (raw record, bronze stamps, op, _cdc_*): choose another name');
      if (seen.has(c.toLowerCase())) issue(['value-schema', c], 'appears twice (column names are case-insensitive)');
      seen.add(c.toLowerCase());
    }
  })
  .describe('The Kafka records to read: the cluster, the topics, where the first run starts, how the value is parsed.');

const isDebezium = (format: string) => format === 'debezium-json' || format === 'debezium-avro';
const isAvro = (format: string) => format === 'avro' || format === 'debezium-avro';

/** The writer schema of `source.avro.schema` as JSON text. */
const inlineSchema = (s: string | Record<string, unknown>): string => (typeof s === 'string' ? s : JSON.stringify(s));

function avroIssues(
  s: {
    'value-format': string;
    avro?: { registry?: string; schema?: string | Record<string, unknown>; 'schema-id'?: number };
    topics?: string[];
    'value-schema'?: Record<string, string>;
  },
  issue: (path: (string | number)[], message: string) => void,
): void {
  const a = s.avro;
  const format = s['value-format'];
  if (!isAvro(format)) {
    if (a !== undefined) issue(['avro'], 'needs value-format avro or debezium-avro');
    return;
  }
  if (a === undefined || (a.registry === undefined) === (a.schema === undefined)) {
    issue(
      ['avro'],
      `value-format ${format} needs exactly one writer schema source: avro.registry (a schema registry of the platform config) or avro.schema (the writer schema)`,
    );
    return;
  }
  if (a['schema-id'] !== undefined && a.schema === undefined) issue(['avro', 'schema-id'], 'needs avro.schema (with a registry the records name their schema)');
  if (a.registry !== undefined && s.topics === undefined)
    issue(['topic-pattern'], "cannot be combined with avro.registry: the writer schemas are each topic's subject <topic>-value; list source.topics");
  if (a.schema !== undefined && format === 'debezium-avro') {
    const parsed = debeziumEnvelope(inlineSchema(a.schema));
    if (parsed.problem) issue(['avro', 'schema'], parsed.problem);
    else
      for (const i of envelopeIssues([parsed.envelope!.row], s['value-schema'] ?? {}, 'avro.schema'))
        issue(i.path.replace(/^source\./, '').split('.'), i.message);
  } else if (a.schema !== undefined) {
    const parsed = avroRecordFields(inlineSchema(a.schema));
    if (parsed.problem) issue(['avro', 'schema'], parsed.problem);
    else for (const i of readerIssues(parsed.fields!, s['value-schema'] ?? {}, 'avro.schema')) issue(i.path.replace(/^source\./, '').split('.'), i.message);
  }
}

const target = z
  .object({
    table: tableName().describe(
      'The bronze table: <catalog>.<tenant>_bronze.<table> at <storage-root>/bronze/<table>; also keys the checkpoint at <storage-root>/_checkpoints/<table>.',
    ),
    format: z.enum(['iceberg', 'delta']).describe('The bronze table format (a streaming sink needs a table: parquet files are not offered).'),
    catalog: catalogName().optional().describe("The platform's catalog (default: its default catalog); it must hold tables of this format."),
    ...bronzeShapeKeys,
  })
  .strict()
  .superRefine(checkBronzePartitionBy)
  .describe('The bronze table the records are appended to.');

const v1 = defineVersion(1, { sections: { source, target } });
export type KafkaBronzeIngestSpec = SpecOf<typeof v1.sections>;

/** `<storage-root>/_checkpoints/<table>`: beside the layers, literal and under the tenant's root. */
export function checkpointLocation(ctx: JobContext, table: string): string {
  const root = ctx.tenant.storageRoot.replace(/\/+$/, '');
  const path = `${root}/_checkpoints/${table}`;
  if (!COLUMN_PATTERN.test(table) || !isUnderRoot(path, [root]) || path === root)
    throw new ConfigError([{ path: 'target.table', message: `the checkpoint path ${JSON.stringify(path)} is not a literal path under ${root}` }]);
  return path;
}

/**
 * Kafka records as bronze rows: the raw columns renamed, the parsed ones, the stamps. The same
 * function shapes the streaming query and the (empty, batch) query that creates the table, so the
 * two cannot disagree on a column.
 */
export function bronzeRows(
  records: Query,
  spec: KafkaBronzeIngestSpec,
  s: { tenant: string; origin: string },
  decoders: readonly AvroDecoder[] = inlineDecoders(spec),
): Query {
  const format = spec.source['value-format'];
  const schema = spec.source['value-schema'] ?? {};
  let rows = records.select(...KAFKA_COLUMNS.map(([from, to]) => alias(col(from), to)));
  const badValues = spec.source['bad-values'];
  if (format === 'avro') rows = decodeAvro(rows, schema, decoders);
  else if (format === 'debezium-avro') rows = decodeDebeziumAvro(rows, { schema, decoders, debezium: debeziumSettings(spec)!, badValues });
  else if (format !== 'raw') rows = decodeValue(rows, { format, schema, debezium: debeziumSettings(spec), badValues });
  return rows.withColumns([
    ['_lake_tenant', lit(s.tenant)],
    ['_lake_source', lit(s.origin)],
    ['_lake_ingested_at', fn('current_timestamp')],
    // The record's own date (UTC), not the run's: a record replayed after a failure gets the same row.
    [SNAPSHOT_DATE, fn('to_date', fn('to_utc_timestamp', col('_kafka_timestamp'), fn('current_timezone')))],
  ]);
}

/** The inline writer schema's decoder (none without one: a registry's come when the run starts). */
function inlineDecoders(spec: KafkaBronzeIngestSpec): AvroDecoder[] {
  const a = spec.source.avro;
  if (!isAvro(spec.source['value-format']) || a?.schema === undefined) return [];
  return [{ writer: inlineSchema(a.schema), ...(a['schema-id'] === undefined ? {} : { id: a['schema-id'] }) }];
}

/**
 * A registry's decoders: per topic, every version of its subject `<topic>-value`, each resolved
 * into the subject's latest version (the reader), which must fill the declared columns exactly.
 * Debezium's envelope (debezium-avro) is read with each version's own schema instead: its latest
 * version must be an envelope, and each declared column a field of some version's row.
 */
export function registryDecoders(spec: KafkaBronzeIngestSpec, found: readonly RegisteredSchema[]): AvroDecoder[] {
  const out: AvroDecoder[] = [];
  const issues = [];
  const topics = spec.source.topics ?? [];
  // Debezium's rows, of every version of every topic: a declared column may be one table's only.
  const rows: RowFields[] = [];
  for (const topic of topics) {
    const subject = subjectOf(topic);
    const versions = found.filter((f) => f.subject === subject).sort((a, b) => a.version - b.version);
    const latest = versions[versions.length - 1];
    if (!latest) continue;
    const what = `subject ${subject}'s latest schema (version ${latest.version}, id ${latest.id})`;
    const forTopic = topics.length > 1 ? { topic } : {};
    if (spec.source['value-format'] === 'debezium-avro') {
      const envelopes = versions.map((v) => debeziumEnvelope(v.schema));
      const last = envelopes[envelopes.length - 1]!;
      if (last.problem) issues.push({ path: 'source.avro.registry', message: `${what} ${last.problem}` });
      // A version that is not an envelope has no decoder: its records are kept raw, counted undecodable.
      for (const [i, v] of versions.entries()) {
        const e = envelopes[i]!.envelope;
        if (!e) continue;
        rows.push(e.row);
        out.push({ writer: v.schema, id: v.id, ...forTopic });
      }
      continue;
    }
    const reader = avroRecordFields(latest.schema);
    if (reader.problem) {
      issues.push({ path: 'source.avro.registry', message: `${what} ${reader.problem}` });
      continue;
    }
    issues.push(...readerIssues(reader.fields!, spec.source['value-schema'] ?? {}, what));
    for (const v of versions) {
      if (v.id === latest.id) {
        out.push({ writer: v.schema, id: v.id, ...forTopic });
        continue;
      }
      // A decimal an older version wrote at another scale is read at its own (readerFor), and must fit too.
      const own = readerFor(v.schema, latest.schema);
      if (own !== latest.schema)
        for (const i of readerIssues(
          avroRecordFields(own).fields!,
          spec.source['value-schema'] ?? {},
          `subject ${subject}'s version ${v.version} (id ${v.id})`,
        ))
          if (!issues.some((x) => x.path === i.path)) issues.push(i);
      out.push({ writer: v.schema, reader: own, id: v.id, ...forTopic });
    }
  }
  if (spec.source['value-format'] === 'debezium-avro' && !issues.length) {
    const subjects = topics.map(subjectOf);
    issues.push(
      ...envelopeIssues(
        rows,
        spec.source['value-schema'] ?? {},
        subjects.length === 1 ? `no version of subject ${subjects[0]}` : `no version of subjects ${subjects.join(', ')}`,
      ),
    );
  }
  if (issues.length) throw new ConfigError(issues);
  return out;
}

/** The subject of a topic's values (Confluent's TopicNameStrategy). */
export const subjectOf = (topic: string): string => `${topic}-value`;

function debeziumSettings(spec: KafkaBronzeIngestSpec): DebeziumSettings | undefined {
  if (!isDebezium(spec.source['value-format'])) return undefined;
  const d = spec.source.debezium;
  return {
    decimalHandlingMode: d?.['decimal-handling-mode'] ?? 'precise',
    timePrecisionMode: d?.['time-precision-mode'] ?? 'adaptive',
    unavailableValuePlaceholder: d?.['unavailable-value-placeholder'] ?? '__debezium_unavailable_value',
  };
}

/** The decode counts of a run: records that did not decode, and per column the values kept NULL. */
export function decodeCounts(progress: readonly StreamProgress[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of progress)
    for (const [k, v] of Object.entries(p.observedMetrics?.[DECODE_METRICS] ?? {})) {
      const n = Number(v ?? 0);
      if (Number.isFinite(n)) out[k] = (out[k] ?? 0) + n;
    }
  return Object.fromEntries(Object.entries(out).filter(([k, n]) => n > 0 || k === 'undecodable'));
}

/**
 * The bronze table follows the declared columns: a column added to value-schema (or a column of
 * the template that an older version did not write) is added to the table before the stream
 * writes; one removed or retyped cannot be, as the table's rows keep it.
 */
export function bronzeSchemaDecision(diff: SchemaDiff, parts: string[]): { fail?: ConfigError; commands?: ReturnType<typeof sqlCommand>[] } {
  const issues = [
    ...diff.missing.map((c) => ({
      path: 'source.value-schema',
      message: `the bronze table has a column ${c} that the config no longer declares: columns can be added, never removed (write to a new table)`,
    })),
    ...diff.changed.map((c) => ({
      path: `source.value-schema.${c.name}`,
      message: `the bronze table has ${c.name} as ${c.tableType}, the config declares ${c.sourceType}: a column's type is fixed (write to a new table)`,
    })),
  ];
  if (issues.length) return { fail: new ConfigError(issues) };
  if (!diff.added.length) return {};
  const columns = sql.join(
    diff.added.map((f) => sql`${sql.id(f.name)} ${sql.sparkType(f.type)}`),
    sql`, `,
  );
  return { commands: [sqlCommand(sql`ALTER TABLE ${sql.target(parts)} ADD COLUMNS (${columns})`)] };
}

function selection(spec: KafkaBronzeIngestSpec): TopicSelection {
  return spec.source.topics !== undefined ? { topics: spec.source.topics } : { pattern: spec.source['topic-pattern']! };
}

/** Per topic-partition, the highest offset the batches reached (Kafka's end offsets are exclusive). */
export function endOffsets(progress: readonly StreamProgress[]): Record<string, Record<string, number>> {
  // Without prototypes: a topic named __proto__ is a topic, not the prototype of the result.
  const out: Record<string, Record<string, number>> = Object.create(null);
  for (const p of progress)
    for (const s of p.sources) {
      const end = s.endOffset;
      if (!end || typeof end !== 'object') continue;
      for (const [topic, parts] of Object.entries(end as Record<string, Record<string, number>>))
        for (const [partition, offset] of Object.entries(parts ?? {})) {
          const t = (out[topic] ??= Object.create(null) as Record<string, number>);
          t[partition] = Math.max(t[partition] ?? 0, Number(offset));
        }
    }
  return out;
}

function plan(ctx: JobContext, spec: KafkaBronzeIngestSpec): JobPlan {
  const { source, target } = spec;
  const cluster = ctx.kafkaCluster(source.cluster, 'source.cluster');
  const topics = selection(spec);
  checkGrant(topics, cluster);

  const bronze = bronzeRef(ctx, target, 'target');
  if (bronze.kind !== 'table') throw new ConfigError([{ path: 'target.format', message: 'must be iceberg or delta' }]);
  const parts = tableParts(bronze.table);
  const shape = bronzeShape(bronze, target);
  const checkpoint = checkpointLocation(ctx, target.table);
  const origin = `kafka:${cluster.name}/${'topics' in topics ? topics.topics.join(',') : topics.pattern}`;
  const connection = connectionOptions(cluster);
  const stamps = { tenant: ctx.tenant.id, origin };

  const stream = Query.readStream('kafka', {
    options: {
      ...connection,
      ...subscription(topics),
      startingOffsets: source['starting-offsets'],
      failOnDataLoss: String(source['fail-on-data-loss']),
      includeHeaders: 'true',
      ...(source['max-offsets-per-trigger'] !== undefined ? { maxOffsetsPerTrigger: String(source['max-offsets-per-trigger']) } : {}),
    },
  });
  // The table is created from the same shape over a batch read that selects no record.
  const empty = Query.read('kafka', {
    options: { ...connection, ...subscription(topics), startingOffsets: 'earliest', endingOffsets: 'latest', includeHeaders: 'true' },
  });
  const output = bronzeOutput(bronze);
  const layer: Layer = 'bronze';
  const streamCommand = (decoders?: readonly AvroDecoder[]) =>
    (spec.source['value-format'] === 'raw'
      ? bronzeRows(stream, spec, stamps)
      : observeDecoding(bronzeRows(stream, spec, stamps, decoders), spec.source['value-schema'] ?? {})
    ).writeStreamTo(parts, {
      checkpointLocation: checkpoint,
      queryName: `${TEMPLATE}.${ctx.tenant.id}.${layer}.${target.table}`.replace(/[^A-Za-z0-9_.-]/g, '_'),
      // Iceberg's writers expect rows clustered by partition unless fanout is on; streaming
      // micro-batches are not sorted for them. A Delta table of the session catalog is a V1
      // table: the sink must name its provider, or Spark refuses it as not its default, parquet.
      // A column added to value-schema is appended to the table, not where the stream has it: Iceberg's
      // writer matches the stream's columns by name, not by position (check-ordering off; Delta does).
      ...(target.format === 'iceberg' ? { options: { 'fanout-enabled': 'true', 'check-ordering': 'false' } } : { format: 'delta' }),
    });
  const registry =
    isAvro(spec.source['value-format']) && spec.source.avro?.registry !== undefined
      ? {
          ref: ctx.schemaRegistry(spec.source.avro.registry, 'source.avro.registry'),
          subjects: (spec.source.topics ?? []).map(subjectOf),
          configPath: 'source.avro.registry',
          build: (found: readonly RegisteredSchema[]) => streamCommand(registryDecoders(spec, found)),
        }
      : undefined;
  return {
    sessionConf: {
      ...BRONZE_SESSION_CONF,
      // Every micro-batch's progress is kept for the run's metrics (Spark keeps 100 by default).
      'spark.sql.streaming.numRecentProgressUpdates': '100000',
    },
    steps: [
      // The topics first: a missing one is 66 before any namespace, table or checkpoint exists.
      ...topicChecks(topics, cluster, connection),
      createNamespaceStep(bronze.table),
      {
        kind: 'ensureTable',
        id: 'create-table',
        title: `Create ${bronze.name} at ${bronze.location} if missing`,
        table: bronze.table,
        location: bronze.location,
        configPath: 'target.table',
        create: createBronzeTable(bronze, bronzeRows(empty, spec, stamps), shape),
        shape,
      },
      {
        kind: 'compareSchemas',
        id: 'check-schema',
        title: `Compare the declared columns with ${bronze.name}`,
        source: bronzeRows(empty, spec, stamps),
        table: bronze.table,
        interpret: (diff) => bronzeSchemaDecision(diff, parts),
      },
      {
        kind: 'stream',
        id: 'ingest',
        title: `Stream ${origin} into ${bronze.name} until caught up (checkpoint ${checkpoint})`,
        command: streamCommand(),
        ...(registry ? { registry } : {}),
        interpret: (progress) => {
          const rows = progress.reduce((n, p) => n + p.numInputRows, 0);
          if (rows === 0) return { skip: `no new records in ${origin}: nothing written to ${bronze.name}` };
          const decoded = spec.source['value-format'] === 'raw' ? {} : decodeCounts(progress);
          return {
            output: { ...output, metrics: { rowsWritten: rows, batches: progress.filter((p) => p.numInputRows > 0).length, ...decoded } },
            metrics: { rowsRead: rows, rowsWritten: rows },
          };
        },
      },
    ],
  };
}

export const kafkaBronzeIngest = defineTemplate({
  name: TEMPLATE,
  layer: 'bronze',
  summary:
    "Copy Kafka topics (the tenant's granted topics) into a bronze Iceberg or Delta table with Structured Streaming (availableNow): raw key, value, headers and offsets, optionally parsed JSON, Avro or Debezium events (JSON or Avro); every offset lands exactly once.",
  stability: 'experimental',
  newest: v1,
  plan,
});
