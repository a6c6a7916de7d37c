import { join } from 'node:path';
import { toJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { configIssues as refusedIssues } from '../../support/load.js';
import { formatStep } from '../../../src/app/plan-view.js';
import { formatExpr } from '../../../src/spark/plan/format.js';
import { endOffsets } from '../../../src/jobs/bronze/kafka-bronze-ingest.js';
import { globToJavaRegex, grantIssues } from '../../../src/jobs/bronze/kafka-source.js';
import type { Step } from '../../../src/jobs/template.js';
import { compileCommandPlan, compileRelationPlan, compileStreamingQueryCommand } from '../../../src/spark/plan/compile.js';
import { InputMissingError } from '../../../src/core/errors.js';
import { SparkError } from '../../../src/spark/errors.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { tempFiles } from '../../support/files.js';

const PASSWORD = 'kafka-pw-3c9d"never\\printed';

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] }, globex { storage-roots = ["file:///lake/globex"] } }
kafka.clusters {
  events {
    bootstrap-servers = ["broker-1:9093", "broker-2:9093"]
    default = true
    security-protocol = SASL_SSL
    sasl { mechanism = SCRAM-SHA-512, username = "lakehouse", password { env = "KAFKA_PW" } }
    tls  { truststore-location = "/etc/kafka/ca.pem", truststore-type = PEM }
    tenants {
      acme   { topics = ["shared.fx-rates"], topic-prefixes = ["acme."] }
      globex { topic-prefixes = ["globex."] }
    }
  }
  plain { bootstrap-servers = "kafka:9092" }
}
`;

const config = (source: string, target = 'target { table = "orders_events", format = iceberg }') => `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "acme-orders-events" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { ${source} }
${target}
`;

async function load(job: string, opts: { platform?: string; env?: Record<string, string> } = {}) {
  const dir = tempFiles({ 'job.conf': job, 'platform.conf': opts.platform ?? platform });
  return loadJob({
    configFile: join(dir, 'job.conf'),
    envFile: join(dir, 'platform.conf'),
    overrides: [],
    env: opts.env ?? { KAFKA_PW: PASSWORD },
    runId: 'test-run',
  });
}

const issues = (job: string, opts: Parameters<typeof load>[1] = {}) =>
  refusedIssues(job, { platform: opts.platform ?? platform, env: opts.env ?? { KAFKA_PW: PASSWORD } });

const stream = (steps: readonly Step[]) => steps.find((s): s is Extract<Step, { kind: 'stream' }> => s.kind === 'stream')!;

describe('kafka-bronze-ingest: config', () => {
  it('accepts granted topics, by name, by prefix and by a glob under a granted prefix', async () => {
    for (const source of ['topics = ["acme.orders", "shared.fx-rates"]', 'topic-pattern = "acme.orders.*"', 'topic-pattern = "acme.*"'])
      await expect(load(config(source))).resolves.toBeTruthy();
  });

  it.each([
    ["another tenant's topic", 'topics = ["acme.orders", "globex.orders"]', 'source.topics[1]'],
    ['a topic in no grant', 'topics = ["payments"]', 'source.topics[0]'],
    ["Kafka's own topics", 'topics = ["__consumer_offsets"]', 'source.topics[0]'],
    ['a glob wider than the grant', 'topic-pattern = "acme*"', 'source.topic-pattern'],
    ['a glob over everything', 'topic-pattern = "*"', 'source.topic-pattern'],
    ['a glob over another tenant', 'topic-pattern = "globex.*"', 'source.topic-pattern'],
  ])('refuses %s (78, at the topic)', async (_what, source, path) => {
    expect((await issues(config(source))).map((i) => i.path)).toEqual([path]);
  });

  it.each([
    ['its own brokers', 'topics = ["acme.orders"], bootstrap-servers = "evil:9092"', 'source.bootstrap-servers'],
    ['a Kafka option', 'topics = ["acme.orders"], options { "kafka.bootstrap.servers" = "evil:9092" }', 'source.options'],
    ['a regex (not a glob)', 'topic-pattern = "acme\\\\..*|.*"', 'source.topic-pattern'],
    ['a glob escaping into Java regex syntax', 'topic-pattern = "acme.(?:x)|(.*)"', 'source.topic-pattern'],
    ['both topics and a pattern', 'topics = ["acme.orders"], topic-pattern = "acme.*"', 'source.topic-pattern'],
    ['no topics', 'starting-offsets = earliest', 'source.topics'],
    [
      'a parsed column named like a raw column',
      'topics = ["acme.o"], value-format = json, value-schema { _kafka_offset = bigint }',
      'source.value-schema._kafka_offset',
    ],
    [
      'a parsed column named like a stamp',
      'topics = ["acme.o"], value-format = json, value-schema { _snapshot_date = date }',
      'source.value-schema._snapshot_date',
    ],
    [
      'a type Spark would parse as more than a type',
      'topics = ["acme.o"], value-format = json, value-schema { id = "bigint, x string" }',
      'source.value-schema.id',
    ],
    ['json without a schema', 'topics = ["acme.o"], value-format = json', 'source.value-schema'],
    ['a schema for raw values', 'topics = ["acme.o"], value-schema { id = bigint }', 'source.value-schema'],
    ['an unknown cluster', 'cluster = "elsewhere", topics = ["acme.o"]', 'source.cluster'],
  ])('refuses %s (78, with its path)', async (_what, source, path) => {
    expect((await issues(config(source))).map((i) => i.path)).toContain(path);
  });

  it('refuses a parquet target: a streaming sink needs a table', async () => {
    expect((await issues(config('topics = ["acme.o"]', 'target { table = "t", format = parquet }'))).map((i) => i.path)).toEqual(['target.format']);
  });

  it('refuses a catalog of the other format', async () => {
    expect((await issues(config('topics = ["acme.o"]', 'target { table = "t", format = delta, catalog = "lake" }'))).map((i) => i.path)).toEqual([
      'target.format',
    ]);
  });

  it('a tenant without a grant reads nothing', async () => {
    const single = platform.replace('acme   { topics = ["shared.fx-rates"], topic-prefixes = ["acme."] }', '');
    expect((await issues(config('topics = ["acme.orders"]'), { platform: single })).map((i) => i.path)).toEqual(['source.topics[0]']);
  });

  it('platform: SASL needs a SASL protocol and credentials by reference', async () => {
    const bad = `kafka.clusters.x { bootstrap-servers = "k:9092", sasl { mechanism = PLAIN, username = "u", password = "literal" } }`;
    const paths = (await issues(config('topics = ["acme.o"]'), { platform: bad })).map((i) => i.path);
    expect(paths).toEqual(['(platform) kafka.clusters.x.sasl.password']);
  });
});

describe('kafka-bronze-ingest: plan', () => {
  it('creates the namespace and table, then streams availableNow with the checkpoint beside the layers', async () => {
    const job = await load(config('topics = ["acme.orders"], max-offsets-per-trigger = 500, starting-offsets = latest'));
    expect(job.plan.steps.map((s) => `${s.kind}:${s.id}`)).toEqual([
      'query:check-topic-0',
      'command:create-namespace',
      'ensureTable:create-table',
      'compareSchemas:check-schema',
      'stream:ingest',
    ]);
    const s = stream(job.plan.steps);
    expect(s.command).toMatchObject({
      kind: 'writeStream',
      table: ['lake', 'acme_bronze', 'orders_events'],
      trigger: 'availableNow',
      outputMode: 'append',
      options: { checkpointLocation: 'file:///lake/acme/_checkpoints/orders_events', 'fanout-enabled': 'true', 'check-ordering': 'false' },
    });
    const proto = compileCommandPlan(s.command, { reveal: false });
    const json = JSON.parse(toJsonString(PlanSchema, proto)) as { command: { writeStreamOperationStart: Record<string, any> } };
    const start = json.command.writeStreamOperationStart;
    expect(start).toMatchObject({ availableNow: true, outputMode: 'append', tableName: '`lake`.`acme_bronze`.`orders_events`' });
    expect(start.format).toBeUndefined(); // an Iceberg catalog's table is its own sink
    // The streaming source: the platform's brokers and security, the granted topic, the tenant's offsets.
    const text = JSON.stringify(start.input);
    expect(text).toContain('"isStreaming":true');
    for (const s of [
      'broker-1:9093,broker-2:9093',
      'SASL_SSL',
      'SCRAM-SHA-512',
      '/etc/kafka/ca.pem',
      '"subscribe":"acme.orders"',
      '"maxOffsetsPerTrigger":"500"',
      '"startingOffsets":"latest"',
    ])
      expect(text).toContain(s);
  });

  it('creates the table partitioned by _snapshot_date then the configured fields, with its properties (docs/table-shape.md)', async () => {
    const created = async (target: string) => {
      const s = (await load(config('topics = ["acme.orders"]', target))).plan.steps.find((x) => x.id === 'create-table');
      if (s?.kind !== 'ensureTable' || s.create.kind !== 'writeV2') throw new Error('no create-table step');
      return { partitionBy: s.create.partitionBy.map(formatExpr), properties: s.create.properties, shape: s.shape };
    };
    const ice = await created(
      'target { table = "t", format = iceberg, partition-by = ["_kafka_topic", "hours(_kafka_timestamp)"], table-properties { write.distribution-mode = none } }',
    );
    expect(ice.partitionBy).toEqual(['_snapshot_date', '_kafka_topic', 'hours(_kafka_timestamp)']);
    expect(ice.properties).toEqual({ location: 'file:///lake/acme/bronze/t', 'format-version': '2', 'write.distribution-mode': 'none' });
    expect(ice.shape?.partitionByConfigured).toBe(true);
    const delta = await created('target { table = "t", format = delta, catalog = "spark_catalog", partition-by = ["_kafka_partition"] }');
    expect(delta.partitionBy).toEqual(['_snapshot_date', '_kafka_partition']);
    expect(delta.properties).toMatchObject({ 'delta.enableChangeDataFeed': 'true' });
    expect((await created('target { table = "t", format = iceberg }')).partitionBy).toEqual(['_snapshot_date']);
    for (const [target, path] of [
      ['target { table = "t", format = iceberg, partition-by = ["_snapshot_date"] }', 'target.partition-by[0]'],
      ['target { table = "t", format = iceberg, table-properties { write.data.path = "file:///elsewhere" } }', 'target.table-properties.write.data.path'],
      ['target { table = "t", format = delta, catalog = "spark_catalog", partition-by = ["bucket(4, _kafka_key)"] }', 'target.partition-by[0]'],
    ])
      expect((await issues(config('topics = ["acme.orders"]', target))).map((i) => i.path)).toEqual([path]);
  });

  it('checks each listed topic first, reading none of its records; a glob by one record of what it matches; a topic the cluster lacks is 66 at its path', async () => {
    const job = await load(config('topics = ["acme.orders", "acme.refunds"]'));
    const checks = job.plan.steps.filter((s) => s.id.startsWith('check-topic')) as Extract<Step, { kind: 'query' }>[];
    expect(checks.map((s) => s.id)).toEqual(['check-topic-0', 'check-topic-1']);
    const text = JSON.stringify(compileRelationPlan(checks[1]!.query.rel, { reveal: false }));
    for (const s of ['"subscribe":"acme.refunds"', '"startingOffsetsByTimestampStrategy":"latest"', '"endingOffsets":"latest"', 'broker-1:9093'])
      expect(text).toContain(s);
    const unknown = new SparkError({
      grpcCode: 13,
      message: 'org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition.',
      messageParameters: {},
      classes: [],
      causes: [],
    });
    const e = checks[1]!.explainFailure!(unknown)!;
    expect(e).toBeInstanceOf(InputMissingError);
    expect(e.exitCode).toBe(66);
    expect(e.message).toBe('source.topics[1]: topic "acme.refunds" does not exist on Kafka cluster "events"; nothing was created');
    expect(
      checks[1]!.explainFailure!(new SparkError({ grpcCode: 14, message: 'unavailable', messageParameters: {}, classes: [], causes: [] })),
    ).toBeUndefined();
    const glob = await load(config('topic-pattern = "acme.orders.*"'));
    const probe = glob.plan.steps[0] as Extract<Step, { kind: 'query' }>;
    expect(probe.id).toBe('check-topics');
    expect(probe.interpret([{ topic: 'acme.orders.eu' }])).toEqual({});
    expect(probe.interpret([]).fail).toBeInstanceOf(InputMissingError);
  });

  it('the SASL password travels only in the revealed plan, inside the JAAS line, escaped', async () => {
    const job = await load(config('topics = ["acme.orders"]'));
    const s = stream(job.plan.steps);
    const hidden = toJsonString(PlanSchema, compileCommandPlan(s.command, { reveal: false }));
    expect(hidden).not.toContain('kafka-pw');
    expect(formatStep(s)).not.toContain('kafka-pw');
    const shown = JSON.parse(toJsonString(PlanSchema, compileCommandPlan(s.command, { reveal: true }))) as any;
    const options = JSON.stringify(shown);
    expect(options).toContain('ScramLoginModule required username=\\"lakehouse\\" password=\\"kafka-pw-3c9d\\\\\\"never\\\\\\\\printed\\";');
  });

  it('a glob becomes a Java regex of topic name characters under its literal prefix', async () => {
    expect(globToJavaRegex('acme.orders.*')).toBe('acme\\.orders\\.[A-Za-z0-9._-]*');
    const job = await load(config('topic-pattern = "acme.orders-*"'));
    expect(JSON.stringify(stream(job.plan.steps).command.input)).toContain('"subscribePattern":"acme\\\\.orders\\\\-[A-Za-z0-9._-]*"');
  });

  // Spark's Kafka source matches subscribePattern with java.util.regex on the server's driver, on
  // every topic of the cluster, in a thread no cancel interrupts: `acme.*a*a*…*Z` as consecutive
  // `[…]*` runs backtracks in polynomial time of a degree the tenant chooses (measured in Java on a
  // 31-character topic: 8 stars 0.16 s, 10 stars 2.8 s; a 249-character glob has 240).
  // JavaScript's engine backtracks the same way; an atomic group `(?>X)` is `(?=(X))\N` in it.
  const jsRegex = (glob: string) => {
    let n = 0;
    return new RegExp(`^(?:${globToJavaRegex(glob).replace(/\(\?>([^()]*)\)/g, (_, body: string) => `(?=(${body}))\\${++n}`)})$`);
  };
  /** What a glob means: `*` is any run of topic name characters, everything else literal. */
  const globMatches = (glob: string, topic: string): boolean => {
    const [first, ...rest] = glob.split('*');
    if (!rest.length) return glob === topic;
    const last = rest.pop()!;
    if (!topic.startsWith(first!) || topic.length < first!.length + last.length || !topic.endsWith(last)) return false;
    let at = first!.length;
    for (const seg of rest) {
      const found = topic.indexOf(seg, at);
      if (found < 0 || found + seg.length > topic.length - last.length) return false;
      at = found + seg.length;
    }
    return true;
  };

  it('a glob with many stars cannot make the regex backtrack: it matches in linear time', () => {
    // Bounded so that the unfixed regex fails in seconds, not hours (10 stars: ~3 s in Java).
    for (const [glob, topic] of [
      [`acme.${'*'.repeat(10)}Z`, 'acme.orders.customers.v1.events'],
      [`acme.${'*a'.repeat(6)}*Z`, `acme.${'a'.repeat(60)}`],
      [`acme.${'*a'.repeat(120)}*Z`, `acme.${'a'.repeat(244)}`],
    ]) {
      const started = process.hrtime.bigint();
      expect(jsRegex(glob!).test(topic!)).toBe(false);
      expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(200);
    }
  });

  it('the regex means what the glob means (random globs and topics)', () => {
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    const alphabet = 'ab.-';
    const word = (len: number) => Array.from({ length: len }, () => alphabet[rnd(alphabet.length)]).join('');
    for (let i = 0; i < 3000; i++) {
      const glob = Array.from({ length: 1 + rnd(4) }, () => word(rnd(3))).join('*'.repeat(1 + rnd(2)));
      const topic = word(rnd(10));
      expect([glob, topic, jsRegex(glob).test(topic)]).toEqual([glob, topic, globMatches(glob, topic)]);
    }
  });

  it('grants: exact names, prefixes, globs only under a prefix', () => {
    const grant = { topics: ['x.y'], prefixes: ['acme.'] };
    expect(grantIssues({ topics: ['x.y', 'acme.a'] }, grant, 'c')).toEqual([]);
    expect(grantIssues({ pattern: 'x.y' }, grant, 'c')).toEqual([]);
    expect(grantIssues({ pattern: 'x.*' }, grant, 'c')).toHaveLength(1);
    expect(grantIssues({ pattern: 'acme.*.events' }, grant, 'c')).toEqual([]);
  });

  it('keeps every raw column and the stamps; Debezium adds the row, op and _cdc_ts_ms', async () => {
    const job = await load(
      config(
        'topics = ["acme.orders"], value-format = debezium-json, value-schema { id = bigint, amount = "decimal(12, 2)" }',
        'target { table = "orders_events", format = delta, catalog = "spark_catalog" }',
      ),
    );
    // A V1 table of the session catalog: the sink names its provider (Spark's default is parquet).
    const proto = JSON.parse(toJsonString(PlanSchema, compileCommandPlan(stream(job.plan.steps).command, { reveal: false }))) as {
      command: { writeStreamOperationStart: { format?: string } };
    };
    expect(proto.command.writeStreamOperationStart.format).toBe('delta');
    const text = formatStep(stream(job.plan.steps));
    for (const c of [
      '_kafka_key',
      '_kafka_value',
      '_kafka_topic',
      '_kafka_partition',
      '_kafka_offset',
      '_kafka_timestamp',
      '_kafka_headers',
      '_lake_tenant',
      '_lake_source',
      '_lake_ingested_at',
      '_snapshot_date',
      ' AS id',
      ' AS amount',
      ' AS op',
      ' AS _cdc_ts_ms',
    ])
      expect(text).toContain(c);
    expect(text).toContain('DECIMAL(12,2)');
    expect(text).toContain('includeHeaders=true');
    // Delta needs no Iceberg writer option.
    expect(stream(job.plan.steps).command.options).toEqual({ checkpointLocation: 'file:///lake/acme/_checkpoints/orders_events' });
  });

  it('metrics from the micro-batches; nothing new skips (99)', async () => {
    const job = await load(config('topics = ["acme.orders"]'));
    const s = stream(job.plan.steps);
    expect(s.interpret([]).skip).toMatch(/no new records/);
    const progress = [
      { batchId: 0, numInputRows: 3, sources: [{ description: 'KafkaV2', endOffset: { 'acme.orders': { '0': 2, '1': 1 } }, numInputRows: 3 }] },
      { batchId: 1, numInputRows: 2, sources: [{ description: 'KafkaV2', endOffset: { 'acme.orders': { '0': 4, '1': 1 } }, numInputRows: 2 }] },
    ];
    expect(s.interpret(progress)).toMatchObject({
      metrics: { rowsRead: 5, rowsWritten: 5 },
      output: { table: 'lake.acme_bronze.orders_events', metrics: { rowsWritten: 5, batches: 2 } },
    });
    expect(endOffsets(progress)).toEqual({ 'acme.orders': { '0': 4, '1': 1 } });
  });

  it('compiles the streaming query commands the executor sends', () => {
    const q = { id: 'a', runId: 'b' };
    const wait = JSON.parse(toJsonString(PlanSchema, compileStreamingQueryCommand(q, { await: { timeoutMs: 30_000 } }))) as any;
    expect(wait.command.streamingQueryCommand).toEqual({ queryId: { id: 'a', runId: 'b' }, awaitTermination: { timeoutMs: '30000' } });
    expect((JSON.parse(toJsonString(PlanSchema, compileStreamingQueryCommand(q, 'stop'))) as any).command.streamingQueryCommand.stop).toBe(true);
  });
});
