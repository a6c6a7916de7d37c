import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { configIssues } from '../../support/load.js';
import { tempFiles } from '../../support/files.js';
import { inlineReferences } from '../../../src/jobs/bronze/kafka-avro.js';
import { debeziumEnvelope, envelopeIssues, withoutLogicalTypes } from '../../../src/jobs/bronze/kafka-debezium-avro.js';
import type { Step } from '../../../src/jobs/template.js';
import { subjectSchemas } from '../../../src/runner/schema-registry.js';
import { Secret } from '../../../src/core/secrets.js';
import { ExitCode, type LakehouseError } from '../../../src/core/errors.js';

/**
 * value-format debezium-avro: Debezium's envelope written by an Avro converter. The shapes below are
 * what Debezium 3.6's PostgreSQL connector registers through Apicurio's converter (the envelope
 * names its Value record once and refers to it by name; the Source record is another subject's
 * schema, named by a reference); the decoding itself is proved on the live server
 * (test/integration/debezium/avro.test.ts).
 */

const platform = `
catalogs { lake { format = iceberg, default = true } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
kafka.clusters.events { bootstrap-servers = "kafka:9092", tenants { acme { topic-prefixes = ["acme."] } } }
schema-registries.shop { url = "http://registry:8080/apis/ccompat/v7" }
`;

const connect = (type: string, name: string, extra: object = {}) => ({ type, 'connect.version': 1, 'connect.name': name, ...extra });
const decimal = (precision: number, scale: number) =>
  connect('bytes', 'org.apache.kafka.connect.data.Decimal', {
    scale,
    precision,
    logicalType: 'decimal',
    'connect.parameters': { scale: String(scale), 'connect.decimal.precision': String(precision) },
  });
const optional = (t: unknown) => ['null', t];
const value = (extra: object[] = []) => ({
  type: 'record',
  name: 'Value',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'amount', type: optional(decimal(12, 2)), default: null },
    {
      name: 'free',
      type: optional({
        type: 'record',
        name: 'VariableScaleDecimal',
        namespace: 'io.debezium.data',
        fields: [
          { name: 'scale', type: 'int' },
          { name: 'value', type: 'bytes' },
        ],
        'connect.name': 'io.debezium.data.VariableScaleDecimal',
      }),
      default: null,
    },
    { name: 'ts', type: optional(connect('long', 'io.debezium.time.MicroTimestamp')), default: null },
    { name: 'tz', type: optional(connect('string', 'io.debezium.time.ZonedTimestamp')), default: null },
    { name: 'd', type: optional(connect('int', 'io.debezium.time.Date')), default: null },
    { name: 'note', type: optional('string'), default: null },
    { name: 'raw', type: optional('bytes'), default: null },
    ...extra,
  ],
});
const SOURCE = 'io.debezium.connector.postgresql.Source';
const source = {
  type: 'record',
  name: 'Source',
  namespace: 'io.debezium.connector.postgresql',
  fields: [
    { name: 'ts_ms', type: 'long' },
    { name: 'lsn', type: optional('long'), default: null },
  ],
};
const envelope = (row = value(), src: unknown = SOURCE) => ({
  type: 'record',
  name: 'Envelope',
  namespace: 'acme.public.orders',
  fields: [
    { name: 'before', type: optional(row), default: null },
    { name: 'after', type: optional('Value'), default: null },
    { name: 'source', type: src },
    { name: 'op', type: 'string' },
    { name: 'ts_ms', type: optional('long'), default: null },
  ],
});
const inline = (e = envelope()) => inlineReferences(JSON.stringify(e), new Map([[SOURCE, JSON.stringify(source)]]));

const config = (source_: string) => `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "acme-orders-dbz-avro" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { value-format = debezium-avro, ${source_} }
target { table = "orders_events", format = iceberg }
`;
async function load(job: string) {
  const dir = tempFiles({ 'job.conf': job, 'platform.conf': platform });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env: {}, runId: 'test-run' });
}
const issues = (job: string) => configIssues(job, { platform, env: {} });
const stream = (steps: readonly Step[]) => steps.find((s): s is Extract<Step, { kind: 'stream' }> => s.kind === 'stream')!;

describe("Debezium's Avro envelope: the schema", () => {
  it('reads the row of after (a reference by name to the Value record before it), op, ts_ms and the source position', () => {
    const { envelope: e, problem } = debeziumEnvelope(inline());
    expect(problem).toBeUndefined();
    expect(e!.tsMs).toBe(true);
    expect(e!.source).toEqual({ tsMs: true, lsn: true });
    expect(Object.fromEntries(e!.row)).toEqual({
      id: { kind: 'scalar' },
      amount: { kind: 'bytes', name: 'org.apache.kafka.connect.data.Decimal', scale: '2' },
      free: { kind: 'variable-scale', name: 'io.debezium.data.VariableScaleDecimal' },
      ts: { kind: 'scalar', name: 'io.debezium.time.MicroTimestamp' },
      tz: { kind: 'string', name: 'io.debezium.time.ZonedTimestamp' },
      d: { kind: 'scalar', name: 'io.debezium.time.Date' },
      note: { kind: 'string' },
      raw: { kind: 'bytes' },
    });
    expect(e!.before).toEqual(e!.after);
  });

  it('names an Avro logical type without connect.name as the Connect type it stands for', () => {
    const row = value([
      { name: 'at', type: { type: 'long', logicalType: 'timestamp-micros' } },
      { name: 'price', type: { type: 'fixed', name: 'P', size: 8, logicalType: 'decimal', precision: 10, scale: 3 } },
    ]);
    const { envelope: e } = debeziumEnvelope(inline(envelope(row)));
    expect(e!.row.get('at')).toEqual({ kind: 'scalar', name: 'io.debezium.time.MicroTimestamp' });
    expect(e!.row.get('price')).toEqual({ kind: 'bytes', name: 'org.apache.kafka.connect.data.Decimal', scale: '3' });
  });

  it.each([
    ['a record without op', { type: 'record', name: 'X', fields: [{ name: 'after', type: value() }] }],
    [
      'a record whose after is not a record',
      {
        type: 'record',
        name: 'X',
        fields: [
          { name: 'op', type: 'string' },
          { name: 'after', type: 'string' },
        ],
      },
    ],
    ['not a record', 'string'],
  ])('refuses %s as an envelope', (_what, schema) => {
    expect(debeziumEnvelope(JSON.stringify(schema)).problem).toMatch(/not a Debezium change event envelope/);
  });

  it('takes the logical types off what spark-avro reads (a decimal of 39 digits still decodes as its bytes)', () => {
    const stripped = withoutLogicalTypes(JSON.stringify(envelope(value([{ name: 'huge', type: decimal(39, 0) }]))));
    expect(stripped).not.toContain('logicalType');
    expect(stripped).toContain('"connect.name":"org.apache.kafka.connect.data.Decimal"');
  });

  it("a declared column must be a field of some version's row; one that only older (or newer) versions have is allowed", () => {
    const v1 = debeziumEnvelope(inline()).envelope!.row;
    const v2 = debeziumEnvelope(inline(envelope(value([{ name: 'channel', type: optional('string'), default: null }])))).envelope!.row;
    expect(envelopeIssues([v1, v2], { id: 'int', channel: 'string' }, 'no version of subject s')).toEqual([]);
    expect(envelopeIssues([v1, v2], { chanel: 'string' }, 'no version of subject s')).toEqual([
      {
        path: 'source.value-schema.chanel',
        message: expect.stringMatching(/^no version of subject s has no field chanel in its row \(its fields: id, amount.*channel\)$/),
      },
    ]);
  });
});

describe('schema references (the Confluent API)', () => {
  it("inline the referenced schema at its first use; a later use keeps the name; the schema's own names are left alone", () => {
    const twice = { ...envelope(), fields: [...envelope().fields, { name: 'source2', type: SOURCE }] };
    const out = JSON.parse(inlineReferences(JSON.stringify(twice), new Map([[SOURCE, JSON.stringify(source)]]))) as {
      fields: { name: string; type: unknown }[];
    };
    expect(out.fields.find((f) => f.name === 'source')!.type).toEqual(source);
    expect(out.fields.find((f) => f.name === 'source2')!.type).toBe(SOURCE);
    expect(out.fields.find((f) => f.name === 'after')!.type).toEqual(['null', 'Value']);
  });

  it('a reference named in the namespace it is used in; a referenced schema without a namespace keeps the null namespace', () => {
    const plain = { type: 'record', name: 'Money', fields: [{ name: 'cents', type: 'long' }] };
    const user = { type: 'record', name: 'Order', namespace: 'shop', fields: [{ name: 'm', type: 'Money' }] };
    const out = JSON.parse(inlineReferences(JSON.stringify(user), new Map([['Money', JSON.stringify(plain)]])));
    expect(out.fields[0].type).toEqual({ ...plain, namespace: '' });
  });

  const ref = { name: 'shop', url: new Secret('http://registry:8080/apis/ccompat/v7') };
  const answering =
    (routes: Record<string, unknown>): typeof fetch =>
    async (input) => {
      const path = String(input).replace('http://registry:8080/apis/ccompat/v7', '');
      const body = routes[path];
      return new Response(JSON.stringify(body ?? { error_code: 40401 }), { status: body === undefined ? 404 : 200 });
    };

  it("the registry's versions come back with their references inlined, each referenced version read once", async () => {
    const asked: string[] = [];
    const routes: Record<string, unknown> = {
      '/subjects/t-value/versions': [1, 2],
      '/subjects/t-value/versions/1': { id: 3, schema: JSON.stringify(envelope()), references: [{ name: SOURCE, subject: SOURCE, version: 1 }] },
      '/subjects/t-value/versions/2': { id: 4, schema: JSON.stringify(envelope()), references: [{ name: SOURCE, subject: SOURCE, version: 1 }] },
      [`/subjects/${SOURCE}/versions/1`]: { id: 2, schema: JSON.stringify(source), references: [] },
    };
    const fetch_: typeof fetch = (input, init) => {
      asked.push(String(input));
      return answering(routes)(input, init);
    };
    const found = await subjectSchemas(ref, ['t-value'], 'source.avro.registry', { fetch: fetch_ });
    expect(found.map((f) => [f.version, f.id])).toEqual([
      [1, 3],
      [2, 4],
    ]);
    for (const f of found) expect(debeziumEnvelope(f.schema).envelope!.source).toEqual({ tsMs: true, lsn: true });
    expect(asked.filter((u) => u.includes(SOURCE))).toHaveLength(1);
  });

  it('references that form a cycle, or name a subject the registry lacks, fail the run before anything is created', async () => {
    const cyclic = await subjectSchemas(ref, ['t-value'], 'source.avro.registry', {
      fetch: answering({
        '/subjects/t-value/versions': [1],
        '/subjects/t-value/versions/1': { id: 3, schema: JSON.stringify(envelope()), references: [{ name: SOURCE, subject: 'a', version: 1 }] },
        '/subjects/a/versions/1': { id: 5, schema: JSON.stringify(source), references: [{ name: 'B', subject: 'b', version: 1 }] },
        '/subjects/b/versions/1': { id: 6, schema: JSON.stringify(source), references: [{ name: 'A', subject: 'a', version: 1 }] },
      }),
    }).catch((e: unknown) => e as LakehouseError);
    expect((cyclic as LakehouseError).message).toMatch(/reference each other in a cycle/);
    const missing = await subjectSchemas(ref, ['t-value'], 'source.avro.registry', {
      fetch: answering({
        '/subjects/t-value/versions': [1],
        '/subjects/t-value/versions/1': { id: 3, schema: JSON.stringify(envelope()), references: [{ name: SOURCE, subject: SOURCE, version: 7 }] },
      }),
    }).catch((e: unknown) => e as LakehouseError);
    expect((missing as LakehouseError).exitCode).toBe(ExitCode.inputMissing);
    expect((missing as LakehouseError).message).toContain(`subject "${SOURCE}" does not exist in schema registry "shop" (a schema of the topic references it)`);
  });
});

describe('kafka-bronze-ingest value-format debezium-avro: config and plan', () => {
  it.each([
    ['no writer schema source', 'topics = ["acme.o"], value-schema { id = int }', 'source.avro'],
    [
      'a JSON-only connector setting',
      'topics = ["acme.o"], avro.registry = shop, debezium.decimal-handling-mode = string, value-schema { id = int }',
      'source.debezium.decimal-handling-mode',
    ],
    [
      'an inline schema that is not an envelope',
      `topics = ["acme.o"], avro.schema = ${JSON.stringify(JSON.stringify(value()))}, value-schema { id = int }`,
      'source.avro.schema',
    ],
    [
      'a declared column the row lacks',
      `topics = ["acme.o"], avro.schema = ${JSON.stringify(inline())}, value-schema { customer = string }`,
      'source.value-schema.customer',
    ],
  ])('refuses %s (78 at its path)', async (_what, source_, path) => {
    expect((await issues(config(source_))).map((i) => i.path)).toEqual([path]);
  });

  it('the placeholder setting is read as for debezium-json; an inline envelope decodes on the server into the columns cdc-silver-merge reads', async () => {
    const loaded = await load(
      config(
        `topics = ["acme.o"], avro.schema = ${JSON.stringify(inline())}, debezium.unavailable-value-placeholder = "__gone", value-schema { id = int, amount = "decimal(12,2)", note = string }`,
      ),
    );
    const s = stream(loaded.plan.steps);
    expect(s.registry).toBeUndefined();
    const text = JSON.stringify(s.command);
    expect(text.match(/"from_avro"/g)).toHaveLength(1);
    expect(text).toContain('__gone');
    // spark-avro reads the bytes and numbers as sent; the encodings are read by their names.
    expect(text).not.toContain('logicalType');
    expect(text).toContain('org.apache.kafka.connect.data.Decimal');
    for (const c of ['op', '_cdc_ts_ms', '_cdc_lsn', '_cdc_unavailable', '_kafka_undecoded', 'amount', 'note']) expect(text).toContain(`"${c}"`);
  });

  it('with a registry: every version of the subject decodes with its own schema (no reader schema); a latest that is not an envelope, or a column in no version, is 78', async () => {
    const loaded = await load(config('topics = ["acme.orders"], avro.registry = shop, value-schema { id = int, channel = string }'));
    const s = stream(loaded.plan.steps);
    const v1 = inline();
    const v2 = inline(envelope(value([{ name: 'channel', type: optional('string'), default: null }])));
    const built = JSON.stringify(
      s.registry!.build([
        { subject: 'acme.orders-value', version: 1, id: 3, schema: v1 },
        { subject: 'acme.orders-value', version: 2, id: 7, schema: v2 },
      ]),
    );
    expect(built.match(/"from_avro"/g)).toHaveLength(2);
    // Each version is its own reader: its schema (logical types off) with only the field that tells a failed decode added.
    for (const v of [v1, v2]) {
      const reader = JSON.parse(withoutLogicalTypes(v)) as { fields: unknown[] };
      const withSentinel = JSON.stringify({ ...reader, fields: [...reader.fields, { name: '__lake_decoded', type: 'boolean', default: true }] });
      expect(built).toContain(JSON.stringify(withSentinel).slice(1, -1));
    }
    expect(() => s.registry!.build([{ subject: 'acme.orders-value', version: 1, id: 3, schema: v1 }])).toThrow(
      /no version of subject acme.orders-value has no field channel/,
    );
    expect(() => s.registry!.build([{ subject: 'acme.orders-value', version: 1, id: 3, schema: JSON.stringify(value()) }])).toThrow(
      /not a Debezium change event envelope/,
    );
  });
});
