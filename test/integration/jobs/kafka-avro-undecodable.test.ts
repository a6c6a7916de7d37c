import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { confluentAvro, registerSchema, schemaRegistryUrl } from '../../support/avro.js';
import { createTopic, kafkaBootstrap, produce, recordKey } from '../../support/kafka.js';
import { freshTenant, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'schema-registry', 'py-tools');

/**
 * value-format avro: records that do not decode (a schema id the registry does not hold for the
 * subject, another magic byte, a header without a body, a truncated body) land raw with NULL parsed
 * columns and `_kafka_undecoded = ["_kafka_value"]`, counted in the status; they never fail the run.
 * A tombstone is none of them. Read back by PyIceberg.
 */

const tenant = freshTenant();
let dir: string;
const topic = `${tenant.id}.payments`;

const schema = {
  type: 'record',
  name: 'Payment',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'currency', type: 'string' },
  ],
};

beforeAll(() => {
  dir = tempFiles({
    'platform.conf': `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topics = ["${topic}"] } }
}
schema-registries.payments { url = "${schemaRegistryUrl()}", default = true }
`,
  });
});

describe('kafka-bronze-ingest value-format avro: undecodable records', () => {
  it('keeps unknown schema ids, bad magic bytes, short and truncated values raw with NULL columns, counted as undecodable', async () => {
    createTopic(topic, 1);
    const id = await registerSchema(`${topic}-value`, schema);
    const good = confluentAvro(id, schema, { id: 1, currency: 'CHF' });
    const unknownId = confluentAvro(id + 1000, schema, { id: 2, currency: 'EUR' });
    const badMagic = Buffer.concat([Buffer.from([1]), good.subarray(1)]);
    const truncated = good.subarray(0, good.length - 2);
    const produced = produce(topic, [
      { key: 'good', value: good },
      { key: 'unknown-id', value: unknownId },
      { key: 'bad-magic', value: badMagic },
      { key: 'short', value: Buffer.from([0, 0, 0]) },
      { key: 'truncated', value: truncated },
      { key: 'tombstone', value: null },
    ]);
    writeFileSync(
      join(dir, 'job.conf'),
      `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "it-avro-undecodable" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { topics = ["${topic}"], value-format = avro, avro { registry = payments }, value-schema { id = bigint, currency = string } }
target { table = "payments_avro", format = iceberg }
`,
    );
    const r = await runJob(join(dir, 'job.conf'), join(dir, 'platform.conf'));
    expect(r.code, r.stderr).toBe(0);

    const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'payments_avro');
    expect(rows.map(recordKey).sort()).toEqual(produced.map(recordKey).sort());
    const byKey = Object.fromEntries(rows.map((x) => [String(x._kafka_key).replace(/^b'|'$/g, ''), x]));
    expect(byKey.good).toMatchObject({ id: 1, currency: 'CHF', _kafka_undecoded: [] });
    for (const k of ['unknown-id', 'bad-magic', 'short', 'truncated']) {
      expect(byKey[k], k).toMatchObject({ id: null, currency: null, _kafka_undecoded: ['_kafka_value'] });
      expect(byKey[k]!._kafka_value, k).not.toBeNull();
    }
    expect(byKey.tombstone).toMatchObject({ id: null, currency: null, _kafka_value: null, _kafka_undecoded: [] });
    expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 6, undecodable: 4 });
  }, 300_000);
});
