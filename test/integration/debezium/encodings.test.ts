import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { type DebeziumSource, debeziumSource, startCdcPostgres } from '../../support/debezium.js';
import { kafkaBootstrap, waitForRecords } from '../../support/kafka.js';
import type { Postgres } from '../../support/postgres.js';
import { freshTenant, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'kafka-connect', 'postgres', 'py-tools');

/**
 * What Debezium 3.6's PostgreSQL connector really sends, decoded by kafka-bronze-ingest: one table
 * with each encoding-sensitive type, captured by four real connectors (decimal.handling.mode
 * precise, string and double with the JSON converter's schemas; precise without them), read back by
 * PyIceberg and compared with the values PostgreSQL holds. A value that does not fit its declared
 * column is a 65 naming the record and the column, or NULL and counted.
 */

const tenant = freshTenant();
const LONG = 1_500_000;
const id = tenant.id.replace(/^it_/, '');
const table = `enc_${id}`;
let dir: string;
let pg: Postgres;
const sources: DebeziumSource[] = [];

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.cdc {
  bootstrap-servers = "${kafkaBootstrap()}"
  default = true
  tenants { ${tenant.id} { topic-prefixes = ["enc_${id}_"] } }
}
`;

// Declared as a tenant would for this table; ts3 (timestamp(3)) only where schemas name its unit.
const SCHEMA = `id = int, amount = "decimal(12,2)", neg = "decimal(12,2)", big = "decimal(38,10)", free = "decimal(20,5)", ts = timestamp, tz = timestamp, d = date, note = string, price3 = "decimal(12,2)"`;

// Without schemas Debezium sends a decimal's unscaled digits only: the declared scale must be
// PostgreSQL's (price3 is numeric(12,3)). free is a NUMERIC without scale ({scale, value}): its
// own scale says 3.14159, which decimal(5,2) cannot hold.
const PLAIN = SCHEMA.replace('price3 = "decimal(12,2)"', 'price3 = "decimal(12,3)"').replace('free = "decimal(20,5)"', 'free = "decimal(5,2)"');

let n = 0;
async function ingest(source: string, targetTable: string) {
  const path = join(dir, `job-${++n}.conf`);
  writeFileSync(
    path,
    `job { template = "kafka-bronze-ingest", schema-version = 1, name = "it-dbz-enc" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { ${source} }
target { table = "${targetTable}", format = iceberg }
`,
  );
  return runJob(path, join(dir, 'platform.conf'));
}

/** A decimal's text without trailing zeros, so PostgreSQL's spelling and the declared scale's compare. */
const num = (v: unknown) =>
  v === null || v === undefined
    ? null
    : String(v)
        .replace(/(\.\d*?)0+$/, '$1')
        .replace(/\.$/, '');

beforeAll(() => {
  dir = tempFiles({ 'platform.conf': platform() });
  pg = startCdcPostgres();
  pg.psql(`
CREATE TABLE ${table} (id int PRIMARY KEY, amount numeric(12,2), neg numeric(12,2), big numeric(38,10), free numeric,
  ts timestamp(6), ts3 timestamp(3), tz timestamptz, d date, note text, price3 numeric(12,3));
INSERT INTO ${table} VALUES
  (1, 120.50, -7.25, 12345678901234567890.0123456789, 3.14159, '2026-07-05 08:00:00.123456', '2026-07-05 08:00:00.123',
   '2026-07-05 08:00:00+02', '2026-07-05', 'hello', 10.500),
  (2, 0.01, -0.01, -1.5, -42, '1969-12-31 23:59:59.999999', NULL, NULL, '1900-01-01', NULL, 1.005);`);
  for (const [suffix, schemas, settings] of [
    ['p', true, {}],
    ['s', true, { 'decimal.handling.mode': 'string' }],
    ['d', true, { 'decimal.handling.mode': 'double', 'time.precision.mode': 'connect' }],
    ['n', false, {}],
  ] as const)
    sources.push(debeziumSource(pg, dir, `enc_${id}_${suffix}`, [table], { schemas, settings }));
  for (const s of sources) waitForRecords(s.topic(table), 2);
}, LONG);

afterAll(() => {
  for (const s of sources) s.stop();
  pg?.psql(`DROP TABLE IF EXISTS ${table}`);
});

describe('Debezium encodings, with the JSON converter schemas on', () => {
  it(
    'precise, string and double decimals, MicroTimestamp, connect Timestamp, ZonedTimestamp and Date land as PostgreSQL holds them; a value with more digits than its column is NULL and counted',
    async () => {
      const topics = ['p', 's', 'd'].map((s) => `"enc_${id}_${s}.public.${table}"`).join(', ');
      const r = await ingest(
        `topics = [${topics}], value-format = debezium-json, bad-values = set-null, value-schema { ${SCHEMA}, ts3 = timestamp }`,
        'enc_schemas',
      );
      expect(r.code, r.stderr).toBe(0);
      // price3 = 1.005 fits no decimal(12,2): NULL once per topic, never rounded to 1.01 or 1.00.
      expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 6, undecodable: 0, 'nulled.price3': 3 });
      const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'enc_schemas');
      const pgRows = pg
        .psql(`SELECT id, amount, neg, big, free FROM ${table} ORDER BY id`)
        .split('\n')
        .map((l) => l.split('|'));
      for (const suffix of ['p', 's', 'd']) {
        const of = (i: number) => rows.find((x) => x._kafka_topic === `enc_${id}_${suffix}.public.${table}` && x.id === i)!;
        for (const [i, amount, neg, big, free] of pgRows) {
          const row = of(Number(i));
          expect({ op: row.op, amount: num(row.amount), neg: num(row.neg), free: num(row.free) }, suffix).toEqual({
            op: 'r',
            amount: num(amount),
            neg: num(neg),
            free: num(free),
          });
          // A double cannot carry 30 digits: only the exact encodings are compared digit for digit.
          if (suffix !== 'd') expect(num(row.big), suffix).toBe(num(big));
          expect(row._cdc_lsn, suffix).toEqual(expect.any(Number));
        }
        expect(num(of(1).price3)).toBe('10.5');
        expect(of(2).price3).toBeNull();
        expect(of(2)._kafka_undecoded).toEqual(['price3']);
        expect(of(1)._kafka_undecoded).toEqual([]);
        expect(of(1).tz).toBe('2026-07-05 06:00:00+00:00');
        expect(of(1).d).toBe('2026-07-05');
        expect(of(2).d).toBe('1900-01-01');
        expect(of(1).note).toBe('hello');
        // MicroTimestamp keeps the microseconds; connect mode sends milliseconds, read as such.
        expect(of(1).ts).toBe(suffix === 'd' ? '2026-07-05 08:00:00.123000+00:00' : '2026-07-05 08:00:00.123456+00:00');
        expect(of(2).ts).toBe(suffix === 'd' ? '1969-12-31 23:59:59.999000+00:00' : '1969-12-31 23:59:59.999999+00:00');
        expect(of(1).ts3).toBe('2026-07-05 08:00:00.123000+00:00');
      }
    },
    LONG,
  );
});

describe('Debezium encodings, schemas off (decimal.handling.mode precise: the declared scale)', () => {
  const topic = () => `"enc_${id}_n.public.${table}"`;

  it(
    'a value that does not fit is a 65 naming topic, partition, offset and column, and nothing of its batch lands',
    async () => {
      const r = await ingest(`topics = [${topic()}], value-format = debezium-json, value-schema { ${PLAIN} }`, 'enc_plain_fail');
      expect(r.code, r.stderr).toBe(65);
      expect(r.status.error).toMatchObject({ code: 'SOURCE_BAD_VALUE', category: 'data' });
      expect(r.status.error.message).toContain(`topic enc_${id}_n.public.${table}, partition 0, offset 0, column free`);
      expect(readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'enc_plain_fail')).toEqual([]);
    },
    LONG,
  );

  it(
    'with bad-values = set-null every other value lands exactly (the unscaled bytes at the declared scale), the bad one is NULL and counted',
    async () => {
      const r = await ingest(`topics = [${topic()}], value-format = debezium-json, bad-values = set-null, value-schema { ${PLAIN} }`, 'enc_plain');
      expect(r.code, r.stderr).toBe(0);
      expect(r.status.outputs[0].metrics).toMatchObject({ rowsWritten: 2, undecodable: 0, 'nulled.free': 1 });
      const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'enc_plain').sort((a, b) => Number(a.id) - Number(b.id));
      expect(rows.map((x) => [num(x.amount), num(x.neg), num(x.big), num(x.free), x.ts, x.tz, x.d, num(x.price3)])).toEqual([
        ['120.5', '-7.25', '12345678901234567890.0123456789', null, '2026-07-05 08:00:00.123456+00:00', '2026-07-05 06:00:00+00:00', '2026-07-05', '10.5'],
        ['0.01', '-0.01', '-1.5', '-42', '1969-12-31 23:59:59.999999+00:00', null, '1900-01-01', '1.005'],
      ]);
    },
    LONG,
  );
});
