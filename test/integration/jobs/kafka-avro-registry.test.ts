import { join } from 'node:path';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { confluentAvro, decimalBytes, registerSchema, schemaRegistryUrl } from '../../support/avro.js';
import { createTopic, kafkaBootstrap, produce, recordKey } from '../../support/kafka.js';
import { freshTenant, queryWithDuckDb, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'schema-registry', 'py-tools');

/**
 * value-format avro with a real schema registry (scripts/schema-registry: Apicurio's Confluent API):
 * one topic written with three versions of its subject (a field added with a default, then one
 * removed), each record in the Confluent wire format with its own schema id, decoded on the server
 * into the declared columns by Avro's resolution into the latest version. Read back by PyIceberg
 * and DuckDB, not by Spark.
 */

const tenant = freshTenant();
let dir: string;
const topic = `${tenant.id}.orders`;
const subject = `${topic}-value`;
const tenantDir = tenant.root.replace(/^file:\/\//, '');

const decimal = { type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 };
const micros = { type: 'long', logicalType: 'timestamp-micros' };
const v1 = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'amount', type: decimal },
    { name: 'placed_at', type: micros },
    { name: 'note', type: ['null', 'string'], default: null },
  ],
};
// A field added with a default: v1's records read it as "EUR".
const v2 = { ...v1, fields: [...v1.fields, { name: 'currency', type: 'string', default: 'EUR' }] };
// A field removed: the reader (the latest version) skips v1's and v2's note.
const v3 = { ...v2, fields: v2.fields.filter((f) => f.name !== 'note') };

const T0 = 1_700_000_000_000_000n; // 2023-11-14T22:13:20Z in microseconds

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } }
}
schema-registries.shop_registry { url = "${schemaRegistryUrl()}" }
`;

const job = (valueSchema: string, table = 'orders_avro') => `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "it-avro-registry" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source {
  topics = ["${topic}"]
  value-format = avro
  avro { registry = "shop_registry" }
  value-schema { ${valueSchema} }
}
target { table = "${table}", format = iceberg }
`;

let n = 0;
function write(config: string): string {
  const path = join(dir, `job-${++n}.conf`);
  writeFileSync(path, config);
  return path;
}

beforeAll(() => {
  dir = tempFiles({ 'platform.conf': platform() });
});

describe('kafka-bronze-ingest value-format avro with a schema registry', () => {
  it('decodes every version of the subject into the declared columns (defaults for added fields, removed ones skipped), read back by PyIceberg and DuckDB; a rerun skips (99)', async () => {
    createTopic(topic, 1);
    const id1 = await registerSchema(subject, v1);
    const id2 = await registerSchema(subject, v2);
    const id3 = await registerSchema(subject, v3);
    expect(new Set([id1, id2, id3]).size).toBe(3);
    const produced = produce(topic, [
      { key: '1', value: confluentAvro(id1, v1, { id: 1, amount: decimalBytes(12050n), placed_at: Number(T0), note: 'first' }) },
      { key: '2', value: confluentAvro(id1, v1, { id: 2, amount: decimalBytes(-5n), placed_at: Number(T0 + 1n), note: null }) },
      { key: '3', value: confluentAvro(id2, v2, { id: 3, amount: decimalBytes(9999999999n), placed_at: Number(T0 + 2n), note: 'x', currency: 'USD' }) },
      { key: '4', value: confluentAvro(id3, v3, { id: 4, amount: decimalBytes(0n), placed_at: Number(T0 + 3n), currency: 'GBP' }) },
    ]);

    const r = await runJob(write(job('id = bigint, amount = "decimal(12,2)", placed_at = timestamp, currency = string')), join(dir, 'platform.conf'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 4, undecodable: 0 });
    // The registry's URL is the platform's: never in the status or the logs.
    expect(JSON.stringify(r.status) + r.stderr + r.stdout).not.toContain(schemaRegistryUrl());

    const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'orders_avro').sort((a, b) => Number(a.id) - Number(b.id));
    expect(rows.map(recordKey).sort()).toEqual(produced.map(recordKey).sort());
    expect(rows.map((x) => [x.id, x.amount, x.currency, x._kafka_undecoded])).toEqual([
      [1, '120.50', 'EUR', []],
      [2, '-0.05', 'EUR', []],
      [3, '99999999.99', 'USD', []],
      [4, '0.00', 'GBP', []],
    ]);
    expect(rows.map((x) => String(x.placed_at))).toEqual([
      '2023-11-14 22:13:20+00:00',
      '2023-11-14 22:13:20.000001+00:00',
      '2023-11-14 22:13:20.000002+00:00',
      '2023-11-14 22:13:20.000003+00:00',
    ]);
    expect(Object.keys(rows[0]!)).not.toContain('note');

    // A second engine on the table's files: DuckDB's Iceberg reader sums the exact decimals.
    const metadata = join(tenant.root.replace(/^file:\/\//, ''), 'bronze/orders_avro/metadata');
    const current = readdirSync(metadata)
      .filter((f) => f.endsWith('.metadata.json'))
      .sort()
      .pop()!;
    const [sum] = queryWithDuckDb(`SELECT CAST(sum(amount) AS VARCHAR) AS total, count(*) AS n FROM iceberg_scan('${join(metadata, current)}')`);
    expect(sum).toEqual({ total: '100000120.44', n: 4 });

    const again = await runJob(write(job('id = bigint, amount = "decimal(12,2)", placed_at = timestamp, currency = string')), join(dir, 'platform.conf'));
    expect(again.code, again.stderr).toBe(99);
  }, 420_000);

  it("a decimal whose scale a later version changed lands at the scale its record was written with (Avro's resolution alone would read 120.50 as 12.050)", async () => {
    const rescaled = `${tenant.id}.rescaled`;
    const at = (scale: number) => ({
      ...v1,
      name: 'Rescaled',
      fields: [v1.fields[0]!, { name: 'amount', type: { type: 'bytes', logicalType: 'decimal', precision: 12, scale } }],
    });
    createTopic(rescaled, 1);
    const [old, now] = [await registerSchema(`${rescaled}-value`, at(2)), await registerSchema(`${rescaled}-value`, at(3))];
    produce(rescaled, [
      { key: '1', value: confluentAvro(old, at(2), { id: 1, amount: decimalBytes(12050n) }) },
      { key: '2', value: confluentAvro(now, at(3), { id: 2, amount: decimalBytes(1234n) }) },
    ]);
    const r = await runJob(
      write(job('id = bigint, amount = "decimal(13,3)"', 'orders_rescaled').replace(`"${topic}"`, `"${rescaled}"`)),
      join(dir, 'platform.conf'),
    );
    expect(r.code, r.stderr).toBe(0);
    const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'orders_rescaled').sort((a, b) => Number(a.id) - Number(b.id));
    expect(rows.map((x) => [x.id, x.amount, x._kafka_undecoded])).toEqual([
      [1, '120.500', []],
      [2, '1.234', []],
    ]);
  }, 300_000);

  it("refuses a declared column the subject's latest version does not have (78 at its path, naming the subject), and a subject the registry lacks (66)", async () => {
    const r = await runJob(write(job('id = bigint, note = string', 'orders_note')), join(dir, 'platform.conf'));
    expect(r.code, r.stderr).toBe(78);
    // Asked before the first step: no table was created with the refused column (nor anything else).
    expect(existsSync(join(tenantDir, 'bronze/orders_note'))).toBe(false);
    expect(JSON.stringify(r.status.error)).toMatch(/source\.value-schema\.note.*subject .*-value's latest schema \(version 3, id \d+\) has no field note/);

    const other = `${tenant.id}.unregistered`;
    createTopic(other, 1);
    produce(other, [{ key: '1', value: Buffer.from([0, 0, 0, 0, 1, 2]) }]);
    const missing = await runJob(write(job('id = bigint', 'orders_missing').replace(`"${topic}"`, `"${other}"`)), join(dir, 'platform.conf'));
    expect(missing.code, missing.stderr).toBe(66);
    expect(existsSync(join(tenantDir, 'bronze/orders_missing'))).toBe(false);
    expect(missing.status.error.message).toContain(`source.avro.registry: subject "${other}-value" does not exist in schema registry "shop_registry"`);
  }, 300_000);
});
