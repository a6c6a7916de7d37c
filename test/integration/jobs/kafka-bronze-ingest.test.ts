import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { type RecordId, createTopic, debeziumDecimal, deleteRecords, endOffsets, kafkaBootstrap, produce, recordKey } from '../../support/kafka.js';
import { freshTenant, objectsUnder, readDeltaWithDeltaRs, readIcebergWithPyIceberg, remote, repoRoot, spawnCli, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'object-store', 'py-tools');

/**
 * kafka-bronze-ingest against the real local broker (scripts/kafka) and Spark Connect: records
 * produced with kafka-clients, read back by PyIceberg and delta-rs (not by Spark), every offset
 * checked by (topic, partition, offset). The kill tests end a run mid-stream (the runner by
 * SIGKILL, the Spark server by SIGKILL of its process group) and check that the next run lands
 * every offset exactly once.
 */

const tenant = freshTenant();
const LONG = 1_500_000;
let dir: string;

const platform = () => `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } }
}
`;

const job = (source: string, target: string) => `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "it-kafka" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { ${source} }
target { ${target} }
`;

let n = 0;
function files(config: string): string {
  const path = join(dir, `job-${++n}.conf`);
  writeFileSync(path, config);
  return path;
}

async function run(config: string, extra: string[] = []) {
  return runJob(files(config), join(dir, 'platform.conf'), extra);
}

const keys = (ids: readonly RecordId[]) => ids.map(recordKey).sort();
/** Every landed offset, duplicates kept: exactly once means equal to the produced list. */
const landed = (rows: Record<string, unknown>[]) => rows.map(recordKey).sort();

function debezium(id: number, op: 'c' | 'u' | 'd', status: string, ts: number, wrapped = false) {
  // The amount as Debezium sends a decimal by default (precise: base64 of the unscaled bytes).
  const row = { id, customer: `c${id}`, status, amount: debeziumDecimal((10.5 + id).toFixed(2), 2) };
  const event = { before: op === 'c' ? null : row, after: op === 'd' ? null : row, op, ts_ms: ts, source: { ts_ms: ts } };
  return { key: JSON.stringify({ id }), partition: id % 2, value: wrapped ? { schema: {}, payload: event } : event };
}

beforeAll(() => {
  dir = tempFiles({ 'platform.conf': platform() });
});

describe('kafka-bronze-ingest into Iceberg, then cdc-silver-merge (the documented chain)', () => {
  const topic = `${tenant.id}.orders`;
  const source = `topics = ["${topic}"], value-format = debezium-json, value-schema { id = bigint, customer = string, status = string, amount = "decimal(12,2)" }`;
  const target = 'table = "orders_events", format = iceberg, catalog = "lake"';

  it(
    'lands every record once with its raw columns and the parsed event; a rerun with nothing new skips (99); silver holds the latest state',
    async () => {
      createTopic(topic, 2);
      const produced = produce(topic, [
        { ...debezium(1, 'c', 'NEW', 1000), headers: { trace: 'abc' } },
        debezium(2, 'c', 'NEW', 1100, true),
        debezium(1, 'u', 'PAID', 1200),
        debezium(2, 'd', 'NEW', 1300),
        { key: JSON.stringify({ id: 2 }), partition: 0, value: null }, // Debezium's tombstone after a delete
        debezium(3, 'c', 'NEW', 1400),
      ]);
      const first = await run(job(source, target));
      expect(first.code, first.stderr).toBe(0);
      expect(first.status.outputs[0]).toMatchObject({ table: `lake.${tenant.id}_bronze.orders_events`, format: 'iceberg', metrics: { rowsWritten: 6 } });

      const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'orders_events');
      expect(landed(rows)).toEqual(keys(produced));
      const created = rows.find((r) => r._kafka_partition === 1 && r._kafka_offset === 0)!;
      expect(created).toMatchObject({
        id: 1,
        customer: 'c1',
        status: 'NEW',
        op: 'c',
        _cdc_ts_ms: 1000,
        _lake_tenant: tenant.id,
        _lake_source: `kafka:local/${topic}`,
      });
      expect(JSON.stringify(created._kafka_headers)).toContain('trace');
      expect(rows.find((r) => r.op === 'd')).toMatchObject({ id: 2, status: 'NEW' }); // a delete's row is its before image
      expect(rows.filter((r) => r._kafka_value === null)).toHaveLength(1); // the tombstone, kept raw

      const again = await run(job(source, target));
      expect(again.code, again.stderr).toBe(99);
      expect(landed(readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'orders_events'))).toEqual(keys(produced));

      const silver = await run(`
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-kafka-silver" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_events", format = iceberg, catalog = "lake", where = "op IS NOT NULL" }
cdc { primary-key = ["id"], sequence-by = ["_cdc_ts_ms", "_kafka_offset"], delete-when = "op = 'd'" }
columns { include = ["id", "customer", "status", "amount"] }
target { table = "orders", format = iceberg, catalog = "lake" }
`);
      expect(silver.code, silver.stderr).toBe(0);
      const state = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders')
        .map((r) => ({ id: Number(r.id), status: r.status }))
        .sort((a, b) => a.id - b.id);
      expect(state).toEqual([
        { id: 1, status: 'PAID' },
        { id: 3, status: 'NEW' },
      ]);
    },
    LONG,
  );
});

describe('kafka-bronze-ingest on an S3 root: the checkpoint lives on the object store', () => {
  const s3 = freshTenant('s3');
  const topic = `${s3.id}.orders`;
  const s3Platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${s3.id} { storage-roots = ["${s3.root}"] } }
kafka.clusters.local { bootstrap-servers = "${kafkaBootstrap()}", tenants { ${s3.id} { topic-prefixes = ["${s3.id}."] } } }
`;
  const s3Job = `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "it-kafka-s3" }
tenant { id = "${s3.id}", storage-root = "${s3.root}" }
source { topics = ["${topic}"], value-format = debezium-json, value-schema { id = bigint, status = string } }
target { table = "orders_events", format = iceberg, catalog = "lake" }
`;
  const runS3 = () => {
    writeFileSync(join(dir, 's3-platform.conf'), s3Platform());
    return runJob(files(s3Job), join(dir, 's3-platform.conf'));
  };

  it(
    'lands each record once, resumes from the S3 checkpoint (a rerun skips, new records land alone); read by PyIceberg over S3',
    async () => {
      createTopic(topic, 2);
      const first = produce(topic, [debezium(1, 'c', 'NEW', 1000), debezium(2, 'c', 'NEW', 1100)]);
      const r1 = await runS3();
      expect(r1.code, r1.stderr).toBe(0);
      const checkpoint = objectsUnder(`${s3.root}/_checkpoints/orders_events`).map((o) => o.path);
      expect(checkpoint.some((p) => p.startsWith('/offsets/'))).toBe(true);
      expect(checkpoint.some((p) => p.startsWith('/commits/'))).toBe(true);
      const again = await runS3();
      expect(again.code, again.stderr).toBe(99);
      const second = produce(topic, [debezium(1, 'u', 'PAID', 1200)]);
      const r3 = await runS3();
      expect(r3.code, r3.stderr).toBe(0);
      expect(r3.status.outputs[0].metrics).toMatchObject({ rowsWritten: 1 });
      expect(landed(readIcebergWithPyIceberg(`${s3.id}_bronze`, 'orders_events'))).toEqual(keys([...first, ...second]));
    },
    LONG,
  );
});

describe('kafka-bronze-ingest into Delta, then cdc-silver-merge into Delta (the documented chain on the other format)', () => {
  const topic = `${tenant.id}.orders.delta`;
  const source = `topics = ["${topic}"], value-format = debezium-json, value-schema { id = bigint, customer = string, status = string, amount = "decimal(12,2)" }`;
  const target = 'table = "orders_events_delta", format = delta, catalog = "spark_catalog"';
  const silverJob = `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-kafka-silver-delta" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_events_delta", format = delta, catalog = "spark_catalog", where = "op IS NOT NULL" }
cdc { primary-key = ["id"], sequence-by = ["_cdc_ts_ms", "_kafka_offset"], delete-when = "op = 'd'" }
columns { include = ["id", "customer", "status", "amount"] }
target { table = "orders_delta", format = delta, catalog = "spark_catalog" }
`;
  const state = () =>
    readDeltaWithDeltaRs(`${tenant.root}/silver/orders_delta`)
      .map((r) => ({ id: Number(r.id), status: r.status, amount: Number(r.amount) }))
      .sort((a, b) => a.id - b.id);

  it(
    'every offset lands once in bronze Delta (by topic, partition, offset, read by delta-rs); silver holds the latest state; reruns add nothing',
    async () => {
      createTopic(topic, 2);
      const first = produce(topic, [
        debezium(1, 'c', 'NEW', 1000),
        debezium(2, 'c', 'NEW', 1100, true),
        debezium(1, 'u', 'PAID', 1200),
        debezium(3, 'c', 'NEW', 1300),
      ]);
      const r1 = await run(job(source, target));
      expect(r1.code, r1.stderr).toBe(0);
      expect(r1.status.outputs[0]).toMatchObject({
        table: `spark_catalog.${tenant.id}_bronze.orders_events_delta`,
        format: 'delta',
        metrics: { rowsWritten: 4 },
      });
      const bronze = () => readDeltaWithDeltaRs(`${tenant.root}/bronze/orders_events_delta`);
      expect(landed(bronze())).toEqual(keys(first));
      expect(bronze().find((r) => r._kafka_partition === 1 && r._kafka_offset === 1)).toMatchObject({ id: 1, status: 'PAID', op: 'u', _cdc_ts_ms: 1200 });

      const s1 = await run(silverJob);
      expect(s1.code, s1.stderr).toBe(0);
      expect(s1.status.outputs[0]).toMatchObject({ table: `spark_catalog.${tenant.id}_silver.orders_delta`, format: 'delta' });
      expect(state()).toEqual([
        { id: 1, status: 'PAID', amount: 11.5 },
        { id: 2, status: 'NEW', amount: 12.5 },
        { id: 3, status: 'NEW', amount: 13.5 },
      ]);

      // The next day's events: a delete (with Debezium's tombstone after it) and an update.
      const second = produce(topic, [
        debezium(2, 'd', 'NEW', 2000),
        { key: JSON.stringify({ id: 2 }), partition: 0, value: null },
        debezium(3, 'u', 'SHIPPED', 2100),
      ]);
      const r2 = await run(job(source, target));
      expect(r2.code, r2.stderr).toBe(0);
      expect(r2.status.outputs[0].metrics).toMatchObject({ rowsWritten: 3 });
      expect(landed(bronze())).toEqual(keys([...first, ...second]));
      const again = await run(job(source, target));
      expect(again.code, again.stderr).toBe(99);
      expect(landed(bronze())).toEqual(keys([...first, ...second]));

      const s2 = await run(silverJob);
      expect(s2.code, s2.stderr).toBe(0);
      expect(state()).toEqual([
        { id: 1, status: 'PAID', amount: 11.5 },
        { id: 3, status: 'SHIPPED', amount: 13.5 },
      ]);
      const s3 = await run(silverJob);
      expect(s3.code, s3.stderr).toBe(0);
      expect(s3.status.outputs[0]).toMatchObject({ metrics: { inserted: 0, updated: 0, deleted: 0 } });
      expect(state()).toHaveLength(2);
    },
    LONG,
  );
});

describe('diff of a stream: what the next run would read, from its checkpoint to the topics’ end', () => {
  it(
    'predicts the rows, offsets and decode counts the run then reports, first from the starting offsets, then from the checkpoint, writing nothing',
    async () => {
      const topic = `${tenant.id}.previewed`;
      createTopic(topic, 2);
      const config = files(
        job(
          `topics = ["${topic}"], value-format = json, value-schema { id = bigint, name = string }`,
          'table = "previewed", format = iceberg, catalog = "lake"',
        ),
      );
      const platformFile = join(dir, 'platform.conf');
      const diff = () => runJob(config, platformFile, ['--dry-run']);
      const outputs = (s: any) => s.outputs.map((o: any) => ({ table: o.table, metrics: o.metrics }));
      const batch = (from: number, count: number) =>
        produce(
          topic,
          Array.from({ length: count }, (_, i) => ({ key: `k${from + i}`, partition: (from + i) % 2, value: { id: from + i, name: `n${from + i}` } })),
        );

      batch(0, 4);
      produce(topic, [{ key: 'bad', partition: 1, value: Buffer.from('{not json') }]);
      const first = await diff();
      expect(first.code, first.stderr).toBe(0);
      expect(first.status.command).toBe('diff');
      const [read] = first.status.diff.streams;
      expect(read).toMatchObject({ step: 'ingest', rows: 5, batches: 1, from: 'earliest', to: { [topic]: endOffsets(topic) } });
      expect(read.committedBatch).toBeUndefined();
      expect(first.status.diff.notPredicted).toEqual([]);
      // Nothing was written: no table, no checkpoint.
      expect(existsSync(fileURLToPath(read.checkpoint))).toBe(false);
      expect(existsSync(fileURLToPath(`${tenant.root}/bronze/previewed`))).toBe(false);
      const ran = await run(readFileSync(config, 'utf8'));
      expect(ran.code, ran.stderr).toBe(0);
      expect(outputs(first.status)).toEqual(outputs(ran.status));
      expect(ran.status.outputs[0].metrics).toMatchObject({ rowsWritten: 5, undecodable: 1 });

      // The next run resumes at the checkpoint: only the new records.
      const offsetsAfterFirst = endOffsets(topic);
      batch(10, 3);
      const second = await diff();
      expect(second.code, second.stderr).toBe(0);
      expect(second.status.diff.streams[0]).toMatchObject({
        rows: 3,
        committedBatch: 0,
        from: { [topic]: offsetsAfterFirst },
        to: { [topic]: endOffsets(topic) },
      });
      const checkpointFiles = readdirSync(fileURLToPath(`${read.checkpoint}/commits`)).sort();
      const again = await run(readFileSync(config, 'utf8'));
      expect(again.code, again.stderr).toBe(0);
      expect(outputs(second.status)).toEqual(outputs(again.status));
      expect(readdirSync(fileURLToPath(`${read.checkpoint}/commits`)).length).toBeGreaterThan(checkpointFiles.length);

      // Caught up: the diff says the run would do nothing (99), as the run does.
      const idle = await diff();
      expect(idle.code, idle.stderr).toBe(99);
      expect(idle.status.diff.streams[0]).toMatchObject({ rows: 0, batches: 0 });
      expect((await run(readFileSync(config, 'utf8'))).code).toBe(99);
    },
    LONG,
  );
});

describe('a streaming query that fails on the server (STREAM_FAILED)', () => {
  it(
    'is restarted once from its checkpoint, fails again and ends the run with its code; nothing is written twice',
    async () => {
      const topic = `${tenant.id}.lost`;
      createTopic(topic, 1);
      const config = job(`topics = ["${topic}"]`, 'table = "lost", format = iceberg, catalog = "lake"');
      const before = produce(topic, [{ value: 'a' }, { value: 'b' }, { value: 'c' }]);
      const r1 = await run(config);
      expect(r1.code, r1.stderr).toBe(0);
      // Offsets the checkpoint expects next (3, 4) are gone, as if retention removed them unread:
      // with fail-on-data-loss (the default) the query fails on the server, each time it starts.
      produce(topic, [{ value: 'd' }, { value: 'e' }, { value: 'f' }]);
      deleteRecords(topic, 0, 5);
      const r2 = await run(config, ['--log-level', 'info']);
      const log = r2.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; attempt?: number });
      expect(log.filter((l) => l.msg === 'streaming query started').map((l) => l.attempt)).toEqual([1, 2]);
      expect(log.filter((l) => l.msg === 'streaming query failed; restarting it once from its checkpoint')).toHaveLength(1);
      // Lost offsets are lost data: 65, not retryable (a rerun cannot bring them back).
      expect(r2.status.error).toMatchObject({ code: 'SOURCE_DATA_LOST', category: 'data', sparkErrorClass: 'STREAM_FAILED' });
      expect(r2.code).toBe(65);
      expect(r2.status.exitCode).toBe(65);
      expect(landed(readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'lost'))).toEqual(keys(before));
    },
    LONG,
  );
});

describe('kafka-bronze-ingest into Delta, by topic glob, raw values', () => {
  it(
    'lands the records of every matching topic, read back by delta-rs',
    async () => {
      const a = `${tenant.id}.events.a`;
      const b = `${tenant.id}.events.b`;
      createTopic(a, 1);
      createTopic(b, 3);
      const produced = [
        ...produce(a, [{ key: 'k1', value: 'plain text' }, { value: { n: 1 } }]),
        ...produce(
          b,
          [0, 1, 2, 0, 1].map((p, i) => ({ key: `k${i}`, value: `v${i}`, partition: p })),
        ),
      ];
      const r = await run(
        job(`topic-pattern = "${tenant.id}.events.*", max-offsets-per-trigger = 3`, 'table = "events", format = delta, catalog = "spark_catalog"'),
      );
      expect(r.code, r.stderr).toBe(0);
      // 7 records, 3 per micro-batch: Spark rounds each partition's share up, so a batch may take a
      // few more than the limit, but never all 7 of four partitions at once.
      expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 7 });
      expect(r.status.outputs[0].metrics.batches).toBeGreaterThan(1);
      const rows = readDeltaWithDeltaRs(`${tenant.root}/bronze/events`);
      expect(landed(rows)).toEqual(keys(produced));
    },
    LONG,
  );
});

describe('kafka-bronze-ingest: a topic-pattern cannot hold the server', () => {
  // Spark matches subscribePattern with java.util.regex on its driver against every topic of the
  // cluster, in a thread no cancel interrupts. A glob of 31 stars as consecutive `[…]*` runs would
  // backtrack for longer than anyone waits on this 60-character topic name; built with atomic
  // groups it is matched in time linear in the name.
  it(
    'a glob of many stars matches (or not) at once on the real server',
    async () => {
      const topic = `${tenant.id}.${'a'.repeat(60)}`;
      createTopic(topic, 1);
      const produced = produce(topic, [{ key: 'k', value: 'v' }]);
      const started = Date.now();
      const none = await run(job(`topic-pattern = "${tenant.id}.${'*a'.repeat(30)}*Z"`, 'table = "many_stars", format = delta, catalog = "spark_catalog"'));
      // Matching no topic is the missing input it is (66), found before anything is created.
      expect(none.code, none.stderr).toBe(66);
      expect(existsSync(`${tenant.root.replace(/^file:\/\//, '')}/bronze/many_stars`)).toBe(false);
      const some = await run(job(`topic-pattern = "${tenant.id}.${'*a'.repeat(30)}*"`, 'table = "many_stars", format = delta, catalog = "spark_catalog"'));
      expect(some.code, some.stderr).toBe(0);
      expect(landed(readDeltaWithDeltaRs(`${tenant.root}/bronze/many_stars`))).toEqual(keys(produced));
      expect(Date.now() - started).toBeLessThan(240_000);
    },
    LONG,
  );
});

describe('kafka-bronze-ingest refusals on a live stack', () => {
  it('a listed topic the cluster does not have: 66 naming it at its path, before any namespace, table or checkpoint exists', async () => {
    const present = `${tenant.id}.present`;
    createTopic(present, 1);
    const missing = `${tenant.id}.no_such_topic`;
    const r = await run(job(`topics = ["${present}", "${missing}"]`, 'table = "missing_topic", format = iceberg, catalog = "lake"'));
    expect(r.code, r.stderr).toBe(66);
    expect(r.status.error.message).toBe(`source.topics[1]: topic "${missing}" does not exist on Kafka cluster "local"; nothing was created`);
    expect(r.status.failedStep).toBe('check-topic-1');
    expect(r.status.completedSteps).toEqual(['check-topic-0']);
    const root = tenant.root.replace(/^file:\/\//, '');
    expect(existsSync(`${root}/_checkpoints/missing_topic`)).toBe(false);
    expect(existsSync(`${root}/bronze/missing_topic`)).toBe(false);
    expect(() => readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'missing_topic')).toThrow();
  });

  it('a topic pattern matching no topic: 66 at source.topic-pattern, nothing created', async () => {
    const r = await run(job(`topic-pattern = "${tenant.id}.nothing.*"`, 'table = "no_match", format = delta, catalog = "spark_catalog"'));
    expect(r.code, r.stderr).toBe(66);
    expect(r.status.error.message).toContain(`source.topic-pattern: "${tenant.id}.nothing.*" matches no topic that holds a record`);
    expect(r.status.completedSteps).toEqual([]);
    expect(existsSync(`${tenant.root.replace(/^file:\/\//, '')}/bronze/no_match`)).toBe(false);
  });

  it('a topic of another tenant: 78 at its path, nothing sent to Spark, no table created', async () => {
    const r = await run(job('topics = ["globex.orders"]', 'table = "refused", format = iceberg, catalog = "lake"'));
    expect(r.code).toBe(78);
    expect(r.status.error.issues.map((i: { path: string }) => i.path)).toEqual(['source.topics[0]']);
    expect(r.status.spark?.operationIds ?? []).toEqual([]);
    expect(() => readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'refused')).toThrow();
  });

  it('brokers given by the tenant: 78, the config cannot name them', async () => {
    const r = await run(job(`topics = ["${tenant.id}.orders"], "kafka.bootstrap.servers" = "127.0.0.1:1"`, 'table = "x", format = iceberg'));
    expect(r.code).toBe(78);
    expect(JSON.stringify(r.status.error)).toContain('kafka.bootstrap.servers');
  });
});

/** Wait until `check` holds (polling), or fail after `ms` or as soon as the run ended without it. */
async function until(check: () => boolean, ms: number, what: string, child?: { exitCode: number | null }, log = () => ''): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return;
    if (child && child.exitCode !== null) throw new Error(`the run ended (${child.exitCode}) before ${what}:\n${log()}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Until the runner logged that its streaming query started (it may first wait for the server). */
const streamStarted = (child: { exitCode: number | null }, log: () => string) =>
  until(() => log().includes('streaming query started'), 300_000, 'the stream started', child, log);

describe('exactly once across failures', () => {
  const many = (n: number, partitions: number) => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: { i }, partition: i % partitions }));

  it(
    'the runner killed (SIGKILL) mid-stream: the next run lands every offset exactly once',
    async () => {
      const topic = `${tenant.id}.kill.runner`;
      createTopic(topic, 2);
      const produced = produce(topic, many(60, 2));
      const config = job(`topics = ["${topic}"], max-offsets-per-trigger = 6`, 'table = "kill_runner", format = iceberg, catalog = "lake"');
      const path = files(config);
      const { child, done } = spawnCli(['--config', path, '--env', join(dir, 'platform.conf'), '--remote', remote(), '--log-level', 'info']);
      let log = '';
      child.stderr!.on('data', (b: Buffer) => (log += b.toString()));
      await streamStarted(child, () => log);
      // Let at least one micro-batch commit, then kill the runner without a chance to clean up.
      const checkpoint = join(tenant.root.replace(/^file:\/\//, ''), '_checkpoints/kill_runner/commits');
      await until(
        () => {
          try {
            return execFileSync('ls', [checkpoint]).toString().trim() !== '';
          } catch {
            return false;
          }
        },
        300_000,
        'a committed micro-batch',
        child,
        () => log,
      );
      child.kill('SIGKILL');
      await done;

      const rerun = await run(config);
      expect([0, 99], rerun.stderr).toContain(rerun.code);
      expect(landed(readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'kill_runner'))).toEqual(keys(produced));
    },
    LONG,
  );

  it(
    'the Spark server killed mid-stream: the run fails retryable, the next lands every offset exactly once',
    async () => {
      const topic = `${tenant.id}.kill.spark`;
      createTopic(topic, 2);
      const produced = produce(topic, many(60, 2));
      const config = job(`topics = ["${topic}"], max-offsets-per-trigger = 6`, 'table = "kill_spark", format = delta, catalog = "spark_catalog"');
      const path = files(config);
      const { child, done } = spawnCli([
        '--config',
        path,
        '--env',
        join(dir, 'platform.conf'),
        '--remote',
        remote(),
        '--log-level',
        'info',
        '--retry-budget',
        '5',
      ]);
      let log = '';
      child.stderr!.on('data', (b: Buffer) => (log += b.toString()));
      await streamStarted(child, () => log);
      const checkpoint = join(tenant.root.replace(/^file:\/\//, ''), '_checkpoints/kill_spark/offsets');
      await until(
        () => {
          try {
            return execFileSync('ls', [checkpoint]).toString().trim() !== '';
          } catch {
            return false;
          }
        },
        300_000,
        'a planned micro-batch',
        child,
        () => log,
      );
      // SIGKILL to the server's whole process group (scripts/spark-connect starts it as a session leader).
      const port = new URL(remote().replace(/^sc:/, 'http:')).port;
      const status = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'status', '--port', port]).toString();
      const pid = Number(/\(pid (\d+)\)/.exec(status)![1]);
      process.kill(-pid, 'SIGKILL');
      const failed = await done;
      expect([69, 75]).toContain(failed.code);

      execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'start', '--port', port, '--conf', 'spark.driver.memory=1500m'], {
        stdio: 'inherit',
        timeout: 900_000,
      });
      const rerun = await run(config);
      expect([0, 99], rerun.stderr).toContain(rerun.code);
      expect(landed(readDeltaWithDeltaRs(`${tenant.root}/bronze/kill_spark`))).toEqual(keys(produced));
    },
    LONG,
  );
});
