import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { configIssues } from '../../support/load.js';
import { tempFiles } from '../../support/files.js';
import { avroRecordFields, fitsExactly, readerFor, readerIssues } from '../../../src/jobs/bronze/kafka-avro.js';
import type { Step } from '../../../src/jobs/template.js';
import { subjectSchemas } from '../../../src/runner/schema-registry.js';
import { Secret } from '../../../src/core/secrets.js';
import { ExitCode, type LakehouseError } from '../../../src/core/errors.js';

const REGISTRY_PASSWORD = 'sr-pw-91f3never-printed';

const platform = `
catalogs { lake { format = iceberg, default = true } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
kafka.clusters.events { bootstrap-servers = "kafka:9092", tenants { acme { topic-prefixes = ["acme."] } } }
schema-registries {
  shop_registry { url { env = "SR_URL" }, username = "lakehouse", password { env = "SR_PW" } }
  other { url = "http://other:8081" }
}
`;
const env = { SR_URL: 'http://registry.internal:8080/apis/ccompat/v7', SR_PW: REGISTRY_PASSWORD };

const order = {
  type: 'record',
  name: 'Order',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'amount', type: { type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 } },
    { name: 'note', type: ['null', 'string'], default: null },
  ],
};

const config = (source: string) => `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "acme-orders-avro" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { value-format = avro, ${source} }
target { table = "orders_avro", format = iceberg }
`;

async function load(job: string) {
  const dir = tempFiles({ 'job.conf': job, 'platform.conf': platform });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env, runId: 'test-run' });
}
const issues = (job: string) => configIssues(job, { platform, env });
const stream = (steps: readonly Step[]) => steps.find((s): s is Extract<Step, { kind: 'stream' }> => s.kind === 'stream')!;

describe('kafka-bronze-ingest value-format avro: config', () => {
  it('refuses avro without a writer schema source, or with both (78 at source.avro)', async () => {
    for (const avro of ['', 'avro { }', `avro { registry = shop_registry, schema = ${JSON.stringify(order)} }`]) {
      const found = await issues(config(`topics = ["acme.orders"], ${avro}${avro ? ',' : ''} value-schema { id = bigint }`));
      expect(found.map((i) => i.path)).toEqual(['source.avro']);
      expect(found[0]!.message).toContain('exactly one writer schema source');
    }
  });

  it('refuses a registry the platform does not name (78, with the closest name)', async () => {
    const found = await issues(config('topics = ["acme.orders"], avro { registry = shop_regsitry }, value-schema { id = bigint }'));
    expect(found).toEqual([
      expect.objectContaining({
        path: 'source.avro.registry',
        message: expect.stringMatching(/schema registry "shop_regsitry" is not configured by the platform .*did you mean "shop_registry"\?/),
      }),
    ]);
  });

  it.each([
    ['avro settings under another format', 'value-format = json, topics = ["acme.o"], avro { registry = other }, value-schema { id = bigint }', 'source.avro'],
    ['a registry with a topic pattern', 'topic-pattern = "acme.*", avro { registry = other }, value-schema { id = bigint }', 'source.topic-pattern'],
    ['a schema id with a registry', 'topics = ["acme.o"], avro { registry = other, schema-id = 3 }, value-schema { id = bigint }', 'source.avro.schema-id'],
    ['an inline schema that is not a record', 'topics = ["acme.o"], avro { schema = "\\"string\\"" }, value-schema { id = bigint }', 'source.avro.schema'],
    ['an inline schema that is not JSON', 'topics = ["acme.o"], avro { schema = "{nope" }, value-schema { id = bigint }', 'source.avro.schema'],
    [
      'a declared column the inline schema lacks',
      `topics = ["acme.o"], avro { schema = ${JSON.stringify(order)} }, value-schema { customer = string }`,
      'source.value-schema.customer',
    ],
    [
      'a declared type the Avro type does not land in exactly',
      `topics = ["acme.o"], avro { schema = ${JSON.stringify(order)} }, value-schema { amount = "decimal(12,1)" }`,
      'source.value-schema.amount',
    ],
    ['avro without value-schema', 'topics = ["acme.o"], avro { registry = other }', 'source.value-schema'],
  ])('refuses %s (78 at its path)', async (_what, source, path) => {
    const job = source.startsWith('value-format') ? config(source).replace('value-format = avro, ', '') : config(source);
    expect((await issues(job)).map((i) => i.path)).toEqual([path]);
  });

  it('platform: a registry password needs its username, by reference', async () => {
    const bad = platform.replace('username = "lakehouse", ', '');
    const found = await configIssues(config('topics = ["acme.o"], avro { registry = other }, value-schema { id = bigint }'), { platform: bad, env });
    expect(found.map((i) => i.path)).toEqual(['(platform) schema-registries.shop_registry.username']);
  });
});

describe('kafka-bronze-ingest value-format avro: plan', () => {
  it('an inline schema decodes with from_avro on the server; the plan names no registry', async () => {
    const loaded = await load(
      config(`topics = ["acme.o"], avro { schema = ${JSON.stringify(order)}, schema-id = 7 }, value-schema { id = bigint, amount = "decimal(12,2)" }`),
    );
    const s = stream(loaded.plan.steps);
    expect(s.registry).toBeUndefined();
    const text = JSON.stringify(s.command);
    expect(text).toContain('"from_avro"');
    expect(text).toContain('"PERMISSIVE"');
  });

  it("with a registry the stream decodes every version of the topic's subject, resolved into its latest; URL and password stay secrets", async () => {
    const loaded = await load(config('topics = ["acme.orders"], avro { registry = shop_registry }, value-schema { id = bigint, amount = "decimal(12,2)" }'));
    const s = stream(loaded.plan.steps);
    expect(s.registry!.subjects).toEqual(['acme.orders-value']);
    expect(JSON.stringify(loaded.plan)).not.toContain('registry.internal');
    expect(JSON.stringify(loaded.plan)).not.toContain(REGISTRY_PASSWORD);
    // Before the registry answers, nothing decodes (what `plan` shows).
    expect(JSON.stringify(s.command)).not.toContain('from_avro');
    const v2 = { ...order, fields: [...order.fields, { name: 'currency', type: 'string', default: 'EUR' }] };
    const built = JSON.stringify(
      s.registry!.build([
        { subject: 'acme.orders-value', version: 1, id: 11, schema: JSON.stringify(order) },
        { subject: 'acme.orders-value', version: 2, id: 12, schema: JSON.stringify(v2) },
      ]),
    );
    expect(built.match(/"from_avro"/g)).toHaveLength(2);
    // Both are read into v2, the latest (Avro's resolution: v2's default for v1's missing currency),
    // with the field that tells a failed decode (a row of NULLs) from a decoded one.
    expect(built.match(/"avroSchema"/g)).toHaveLength(2);
    expect(built.match(/\\"currency\\",\\"type\\":\\"string\\",\\"default\\":\\"EUR\\"},{\\"name\\":\\"__lake_decoded\\"/g)).toHaveLength(2);
    expect(() =>
      s.registry!.build([{ subject: 'acme.orders-value', version: 1, id: 11, schema: JSON.stringify({ ...order, fields: [order.fields[0]] }) }]),
    ).toThrow(/source\.value-schema\.amount: subject acme\.orders-value's latest schema \(version 1, id 11\) has no field amount/);
  });
});

describe('kafka-bronze-ingest value-format avro: several topics', () => {
  it("a decimal an older version wrote at another scale is read at its own scale, not the latest's (Avro's resolution would read 120.50 as 12.050); it must fit the column too", async () => {
    const at = (precision: number, scale: number) => ({
      ...order,
      fields: order.fields.map((f) => (f.name === 'amount' ? { ...f, type: { type: 'bytes', logicalType: 'decimal', precision, scale } } : f)),
    });
    const v2 = { ...at(14, 3), fields: [...at(14, 3).fields, { name: 'currency', type: 'string', default: 'EUR' }] };
    const own = JSON.parse(readerFor(JSON.stringify(order), JSON.stringify(v2))) as { fields: { name: string; type: unknown }[] };
    // The latest's fields (currency, with its default), with the writer's decimal.
    expect(own.fields.map((f) => f.name)).toEqual(['id', 'amount', 'note', 'currency']);
    expect(own.fields[1]!.type).toEqual({ type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 });
    expect(readerFor(JSON.stringify(order), JSON.stringify({ ...order, fields: [...order.fields, { name: 'x', type: 'int', default: 0 }] }))).not.toContain(
      '"scale":3',
    );
    const registry = async (declared: string) =>
      stream(
        (await load(config(`topics = ["acme.orders"], avro { registry = shop_registry }, value-schema { id = bigint, amount = "${declared}" }`))).plan.steps,
      ).registry!;
    const versions = [
      { subject: 'acme.orders-value', version: 1, id: 11, schema: JSON.stringify(order) },
      { subject: 'acme.orders-value', version: 2, id: 12, schema: JSON.stringify(v2) },
    ];
    const built = JSON.stringify((await registry('decimal(14,3)')).build(versions));
    expect(built).toContain(JSON.stringify(JSON.stringify({ type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 })).slice(1, -1));
    // A version whose decimal does not land exactly in the declared column is 78, as the latest's would be.
    const narrow = at(12, 4);
    await expect(
      (async () =>
        (await registry('decimal(14,3)')).build([
          { subject: 'acme.orders-value', version: 1, id: 11, schema: JSON.stringify(narrow) },
          { subject: 'acme.orders-value', version: 2, id: 12, schema: JSON.stringify(v2) },
        ]))(),
    ).rejects.toThrow(
      /source\.value-schema\.amount: subject acme\.orders-value's version 1 \(id 11\)'s field amount is read as decimal\(12,4\), which does not land exactly in decimal\(14,3\)/,
    );
  });

  it("each topic's records are read only with its own subject's versions (a schema id is global, the reader is the subject's)", async () => {
    const loaded = await load(config('topics = ["acme.a", "acme.b"], avro { registry = shop_registry }, value-schema { id = bigint }'));
    const s = stream(loaded.plan.steps);
    expect(s.registry!.subjects).toEqual(['acme.a-value', 'acme.b-value']);
    const other = { ...order, name: 'Other' };
    const built = JSON.stringify(
      s.registry!.build([
        { subject: 'acme.a-value', version: 1, id: 3, schema: JSON.stringify(order) },
        { subject: 'acme.b-value', version: 1, id: 3, schema: JSON.stringify(other) },
      ]),
    );
    expect(built.match(/"from_avro"/g)).toHaveLength(2);
    expect(built).toContain('"acme.a"');
    expect(built).toContain('"acme.b"');
  });
});

describe('Avro types into bronze columns', () => {
  it('maps Avro types as spark-avro does, and accepts only exact landings', () => {
    const f = avroRecordFields(
      JSON.stringify({
        type: 'record',
        name: 'R',
        fields: [
          { name: 'a', type: ['null', 'int'] },
          { name: 'b', type: { type: 'long', logicalType: 'timestamp-millis' } },
          { name: 'c', type: { type: 'long', logicalType: 'local-timestamp-micros' } },
          { name: 'd', type: ['int', 'string'] },
          { name: 'e', type: { type: 'enum', name: 'E', symbols: ['X'] } },
          { name: 'g', type: { type: 'fixed', name: 'F', size: 4 } },
          { name: 'h', type: { type: 'array', items: 'int' } },
        ],
      }),
    ).fields!;
    expect(Object.fromEntries([...f].map(([k, v]) => [k, v.type ?? 'refused']))).toEqual({
      a: 'int',
      b: 'timestamp',
      c: 'refused',
      d: 'refused',
      e: 'string',
      g: 'binary',
      h: 'refused',
    });
    expect(fitsExactly('int', 'bigint')).toBe(true);
    expect(fitsExactly('bigint', 'int')).toBe(false);
    expect(fitsExactly('float', 'double')).toBe(true);
    expect(fitsExactly('double', 'float')).toBe(false);
    expect(fitsExactly('decimal(12,2)', 'decimal(14,3)')).toBe(true);
    expect(fitsExactly('decimal(12,2)', 'decimal(12,3)')).toBe(false);
    expect(fitsExactly('bigint', 'decimal(19,0)')).toBe(true);
    expect(fitsExactly('bigint', 'decimal(18,0)')).toBe(false);
    expect(readerIssues(f, { A: 'bigint' }, 'the schema')).toEqual([]);
  });
});

describe('the schema registry client', () => {
  const ref = {
    name: 'shop_registry',
    url: new Secret('http://user:pw-in-url-5150@registry:8080/apis/ccompat/v7'),
    basicAuth: { username: 'u', password: new Secret('pw-x9') },
  };
  const answering =
    (routes: Record<string, [number, unknown]>): typeof fetch =>
    async (input, init) => {
      expect((init?.headers as Record<string, string>).authorization).toBe(`Basic ${Buffer.from('u:pw-x9').toString('base64')}`);
      expect(String(input)).not.toContain('pw-in-url-5150');
      const path = String(input).replace('http://registry:8080/apis/ccompat/v7', '');
      const [status, body] = routes[path] ?? [404, { error_code: 40401 }];
      return new Response(JSON.stringify(body), { status });
    };

  it('reads every version of a subject, ascending, Avro only', async () => {
    const found = await subjectSchemas(ref, ['t-value'], 'source.avro.registry', {
      fetch: answering({
        '/subjects/t-value/versions': [200, [2, 1, 3]],
        '/subjects/t-value/versions/1': [200, { id: 5, schema: '{"type":"record"}' }],
        '/subjects/t-value/versions/2': [200, { id: 9, schema: '{"type":"record"}', schemaType: 'AVRO' }],
        '/subjects/t-value/versions/3': [200, { id: 10, schema: 'syntax = "proto3";', schemaType: 'PROTOBUF' }],
      }),
    });
    expect(found.map((f) => [f.version, f.id])).toEqual([
      [1, 5],
      [2, 9],
    ]);
  });

  it.each([
    [404, ExitCode.inputMissing, /subject "t-value" does not exist in schema registry "shop_registry"/],
    [401, ExitCode.permission, /refused the platform's credentials/],
    [503, ExitCode.unavailable, /answered HTTP 503/],
  ])('HTTP %i is exit %i, naming the registry by name, never its URL', async (status, code, message) => {
    const e = (await subjectSchemas(ref, ['t-value'], 'source.avro.registry', { fetch: answering({ '/subjects/t-value/versions': [status, {}] }) }).catch(
      (x: unknown) => x,
    )) as LakehouseError;
    expect(e.exitCode).toBe(code);
    expect(e.message).toMatch(message);
    expect(e.message).not.toContain('pw-in-url-5150');
  });

  it('a registry that does not answer is 69 (retryable)', async () => {
    const e = (await subjectSchemas(ref, ['t-value'], 'source.avro.registry', {
      fetch: () =>
        Promise.reject(
          new TypeError('fetch failed', {
            cause: Object.assign(new Error('connect ECONNREFUSED http://user:pw-in-url-5150@registry'), { code: 'ECONNREFUSED' }),
          }),
        ),
    }).catch((x: unknown) => x)) as LakehouseError;
    expect(e.exitCode).toBe(ExitCode.unavailable);
    expect(e.retryable).toBe(true);
    expect(e.message).toContain('did not answer (ECONNREFUSED)');
    expect(e.message).not.toContain('pw-in-url-5150');
  });
});
