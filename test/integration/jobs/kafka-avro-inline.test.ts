import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { confluentAvro } from '../../support/avro.js';
import { createTopic, kafkaBootstrap, produce, recordKey } from '../../support/kafka.js';
import { freshTenant, readDeltaWithDeltaRs, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'py-tools');

/**
 * value-format avro with the writer schema in the config (no registry), written as HOCON's JSON
 * object: records in the Confluent wire format with the configured schema id decode, one with
 * another id is undecodable. Into Delta, read back by delta-rs.
 */

const tenant = freshTenant();
let dir: string;
const topic = `${tenant.id}.sensors`;

const schema = {
  type: 'record',
  name: 'Reading',
  namespace: 'plant',
  fields: [
    { name: 'sensor', type: 'string' },
    { name: 'celsius', type: 'float' },
    { name: 'count', type: 'int' },
    { name: 'day', type: { type: 'int', logicalType: 'date' } },
    { name: 'ok', type: ['null', 'boolean'], default: null },
  ],
};

beforeAll(() => {
  dir = tempFiles({
    'platform.conf': `
catalogs { spark_catalog { format = delta, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } }
}
`,
  });
});

describe('kafka-bronze-ingest value-format avro with an inline schema', () => {
  it('decodes the records of the configured schema id into the declared columns (widened exactly), another id is undecodable; read back by delta-rs', async () => {
    createTopic(topic, 1);
    const produced = produce(topic, [
      { key: 'a', value: confluentAvro(7, schema, { sensor: 'a', celsius: 21.5, count: 3, day: 19_675, ok: true }) },
      { key: 'b', value: confluentAvro(7, schema, { sensor: 'b', celsius: -4.25, count: 2_147_483_647, day: 0, ok: null }) },
      { key: 'c', value: confluentAvro(8, schema, { sensor: 'c', celsius: 0, count: 0, day: 0, ok: false }) },
    ]);
    writeFileSync(
      join(dir, 'job.conf'),
      `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "it-avro-inline" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source {
  topics = ["${topic}"]
  value-format = avro
  avro { schema-id = 7, schema = ${JSON.stringify(schema)} }
  # float and int widen exactly into double and bigint
  value-schema { sensor = string, celsius = double, count = bigint, day = date, ok = boolean }
}
target { table = "sensor_readings", format = delta }
`,
    );
    const r = await runJob(join(dir, 'job.conf'), join(dir, 'platform.conf'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 3, undecodable: 1 });

    const rows = readDeltaWithDeltaRs(`${tenant.root}/bronze/sensor_readings`).sort((x, y) => String(x._kafka_offset).localeCompare(String(y._kafka_offset)));
    expect(rows.map(recordKey).sort()).toEqual(produced.map(recordKey).sort());
    expect(rows.map((x) => [x.sensor, x.celsius, x.count, String(x.day), x.ok, x._kafka_undecoded])).toEqual([
      ['a', 21.5, 3, '2023-11-14', true, []],
      ['b', -4.25, 2_147_483_647, '1970-01-01', null, []],
      [null, null, null, 'null', null, ['_kafka_value']],
    ]);
  }, 300_000);
});
