import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { schemaRegistryUrl } from '../../support/avro.js';
import { type DebeziumSource, debeziumSource, startCdcPostgres } from '../../support/debezium.js';
import { kafkaBootstrap, waitForTopics } from '../../support/kafka.js';
import type { Postgres } from '../../support/postgres.js';
import { freshTenant, readIcebergWithPyIceberg, repoRoot, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'kafka-connect', 'postgres', 'schema-registry', 'py-tools');

/**
 * Debezium's envelope in Avro (value-format debezium-avro): real connectors with Apicurio's Avro
 * converter writing the Confluent wire format to the stack's schema registry, read by
 * kafka-bronze-ingest (each version of the topic's subject with its own schema; Debezium's Source
 * record is a schema reference the runner inlines) and merged by cdc-silver-merge as
 * docs/templates/kafka-bronze-ingest.md ("Kafka to silver") says. Silver is compared with
 * PostgreSQL's own values through PyIceberg: the connector's default encodings (precise decimals'
 * bytes with the schema's scale, VariableScaleDecimal, MicroTimestamp, ZonedTimestamp, Date, bytes)
 * and those of decimal.handling.mode string with time.precision.mode connect, a TOASTed column an
 * update leaves out, two updates in one transaction, a REPLICA IDENTITY FULL delete and its
 * tombstone, and a column added in PostgreSQL (a second version of the subject) reaching silver
 * under add-columns. A value that does not fit its column is a 65 naming the record, or NULL and counted.
 */

const tenant = freshTenant();
const LONG = 1_500_000;
const id = tenant.id.replace(/^it_/, '');
const dflt = `dav_${id}`; // REPLICA IDENTITY DEFAULT, a TOASTed column
const full = `davf_${id}`; // REPLICA IDENTITY FULL
const strs = `davs_${id}`; // captured with decimal.handling.mode string, time.precision.mode connect
let dir: string;
let pg: Postgres;
let precise: DebeziumSource;
let strings: DebeziumSource;

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.cdc { bootstrap-servers = "${kafkaBootstrap()}", default = true, tenants { ${tenant.id} { topic-prefixes = ["dav_${id}_"] } } }
schema-registries.cdc_registry { url = "${schemaRegistryUrl()}" }
`;

const COLUMNS =
  'id = int, status = string, notes = string, amount = "decimal(12,2)", free = "decimal(20,5)", ts = timestamp, tz = timestamp, d = date, raw = binary, price3 = "decimal(12,2)"';
const topics = () => [precise.topic(dflt), precise.topic(full), strings.topic(strs)];

let n = 0;
async function bronze(source: string, table = 'changes') {
  const path = join(dir, `bronze-${++n}.conf`);
  writeFileSync(
    path,
    `job { template = "kafka-bronze-ingest", schema-version = 1, name = "it-dbz-avro" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { value-format = debezium-avro, avro.registry = cdc_registry, ${source} }
target { table = "${table}", format = iceberg }
`,
  );
  return runJob(path, join(dir, 'platform.conf'));
}

/** The documented snippet, as written, on this test's bronze table (the tables' ids do not overlap). */
async function silver() {
  const doc = readFileSync(join(repoRoot, 'docs/templates/kafka-bronze-ingest.md'), 'utf8');
  const snippet = /## Kafka to silver[\s\S]*?```hocon\n([\s\S]*?)```/.exec(doc)![1]!;
  const path = join(dir, `silver-${++n}.conf`);
  writeFileSync(
    path,
    `${snippet}
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source.table = "changes"
cdc.unavailable-columns { listed-in = "_cdc_unavailable", columns = ["notes"] }
target.table = "orders"
`,
  );
  return runJob(path, join(dir, 'platform.conf'));
}

/** Python's repr of bytes (how the reader prints a binary value) as hex. */
function pyBytesHex(repr: unknown): string | null {
  if (repr === null || repr === undefined) return null;
  const body = String(repr).slice(2, -1);
  const out: number[] = [];
  const escapes: Record<string, number> = { n: 10, r: 13, t: 9, '\\': 92, "'": 39, '"': 34 };
  for (let i = 0; i < body.length; i++) {
    if (body[i] !== '\\') out.push(body.charCodeAt(i));
    else if (body[++i] === 'x') out.push(parseInt(body.slice(++i, ++i + 1), 16));
    else out.push(escapes[body[i]!]!);
  }
  return Buffer.from(out).toString('hex');
}
const md5 = (s: unknown) => (s === null || s === undefined ? null : createHash('md5').update(String(s)).digest('hex'));
/** A decimal's text without trailing zeros. */
const num = (v: unknown) =>
  v === null || v === undefined
    ? null
    : String(v)
        .replace(/(\.\d*?)0+$/, '$1')
        .replace(/\.$/, '');
/** The lake's timestamp text as PostgreSQL's (UTC, microseconds without trailing zeros). */
const ts = (v: unknown) =>
  v === null || v === undefined
    ? null
    : String(v)
        .replace(/\+00:00$/, '')
        .replace(/\.?0+$/, (m) => (m.startsWith('.') ? '' : m));

const QUERY = (table: string, millis: boolean) => `SELECT id, status, md5(notes), amount, free,
  to_char(${millis ? "date_trunc('milliseconds', ts)" : 'ts'}, 'YYYY-MM-DD HH24:MI:SS.US'), to_char(tz AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), d, encode(raw, 'hex'),
  CASE WHEN price3 = round(price3, 2) THEN price3 END, channel FROM ${table}`;
let hasChannel = false;
function pgState(): string[] {
  const rows = (table: string, millis: boolean, channel: boolean) =>
    pg
      .psql(channel ? QUERY(table, millis) : QUERY(table, millis).replace(', channel FROM', ', NULL FROM'))
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [i, status, notes, amount, free, t, tz, d, raw, price3, ch] = l.split('|');
        return [i, status, notes || null, num(amount), num(free), ts(t), ts(tz), d, raw || null, num(price3 || null), ch || null].join('|');
      });
  return [...rows(dflt, false, hasChannel), ...rows(full, false, false), ...rows(strs, true, false)].sort();
}
const silverState = (rows: Record<string, unknown>[]) =>
  rows
    .map((r) =>
      [
        r.id,
        r.status,
        md5(r.notes),
        num(r.amount),
        num(r.free),
        ts(r.ts),
        ts(r.tz),
        r.d,
        pyBytesHex(r.raw),
        num(r.price3),
        (r.channel as string | undefined) ?? null,
      ].join('|'),
    )
    .sort();

beforeAll(() => {
  dir = tempFiles({ 'platform.conf': platform() });
  pg = startCdcPostgres();
  // notes of row 1: ~22 kB of hex that compresses to more than PostgreSQL's 2 kB, stored out of line (TOASTed).
  const big = (seed: string) => `(SELECT string_agg(md5('${seed}' || i), '') FROM generate_series(1, 700) i)`;
  const columns =
    'id int PRIMARY KEY, status text, notes text, amount numeric(12,2), free numeric, ts timestamp(6), tz timestamptz, d date, raw bytea, price3 numeric(12,3)';
  // Row 2's price3 (1.005) fits no decimal(12,2); raw of row 1 is longer than one base64 line (76 characters).
  const rows = (
    base: number,
    notes: string,
  ) => `(${base + 1}, 'NEW', ${notes}, 120.50, 3.14159, '2026-07-05 08:00:00.123456', '2026-07-05 08:00:00+02', '2026-07-05', decode(repeat('00ff10', 40), 'hex'), 10.500),
  (${base + 2}, 'NEW', 'short', -7.25, -42, '1969-12-31 23:59:59.999999', NULL, '1900-01-01', NULL, 1.005)`;
  pg.psql(`
CREATE TABLE ${dflt} (${columns});
CREATE TABLE ${full} (${columns});
ALTER TABLE ${full} REPLICA IDENTITY FULL;
CREATE TABLE ${strs} (${columns});
INSERT INTO ${dflt} VALUES ${rows(0, big('a'))};
INSERT INTO ${full} VALUES ${rows(100, "'x'")};
INSERT INTO ${strs} VALUES ${rows(200, "'y'")};`);
  // One connector's snapshot at a time: two converters registering their first schemas at once can
  // collide in the local registry's in-memory store (a unique-key violation on its content table,
  // seen once in CI), which kills the connector's task for good.
  precise = debeziumSource(pg, dir, `dav_${id}_p`, [dflt, full], { avro: true });
  waitForTopics({ [precise.topic(dflt)]: 2, [precise.topic(full)]: 2 });
  strings = debeziumSource(pg, dir, `dav_${id}_s`, [strs], { avro: true, settings: { 'decimal.handling.mode': 'string', 'time.precision.mode': 'connect' } });
  waitForTopics({ [strings.topic(strs)]: 2 });
  // Streamed after the snapshot: an update leaving the TOASTed notes out, two updates in one
  // transaction, a delete (FULL: the whole row before) and its tombstone; then a column added in
  // PostgreSQL (the converter registers a second version of the subject), set and inserted.
  pg.psql(`
UPDATE ${dflt} SET status = 'PAID' WHERE id = 1;
BEGIN; UPDATE ${dflt} SET amount = 11.00 WHERE id = 2; UPDATE ${dflt} SET amount = 12.00 WHERE id = 2; COMMIT;
DELETE FROM ${full} WHERE id = 102;
UPDATE ${strs} SET status = 'SHIPPED', amount = 99.99 WHERE id = 201;`);
  pg.psql(`
ALTER TABLE ${dflt} ADD COLUMN channel text;
UPDATE ${dflt} SET channel = 'web' WHERE id = 1;
INSERT INTO ${dflt} VALUES (3, 'NEW', 'z', 30.00, 0.5, '2026-07-06 00:00:00', '2026-07-06 00:00:00Z', '2026-07-06', NULL, 3.000, 'app');`);
  hasChannel = true;
  // The delete's tombstone is the fourth record of the FULL table's topic.
  waitForTopics({ [precise.topic(dflt)]: 7, [precise.topic(full)]: 4, [strings.topic(strs)]: 3 });
}, LONG);

afterAll(() => {
  precise?.stop();
  strings?.stop();
  pg?.psql(`DROP TABLE IF EXISTS ${dflt}; DROP TABLE IF EXISTS ${full}; DROP TABLE IF EXISTS ${strs}`);
});

it(
  'a value that does not fit its declared column is a 65 naming topic, partition, offset and column, and nothing of its batch lands',
  async () => {
    const r = await bronze(`topics = ["${precise.topic(dflt)}"], value-schema { id = int, price3 = "decimal(12,2)" }`, 'changes_strict');
    expect(r.code, r.stderr).toBe(65);
    expect(r.status.error).toMatchObject({ code: 'SOURCE_BAD_VALUE', category: 'data' });
    expect(r.status.error.message).toMatch(new RegExp(`topic ${precise.topic(dflt)}, partition 0, offset \\d+, column price3`));
    expect(readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'changes_strict')).toEqual([]);
  },
  LONG,
);

it(
  "every event lands with PostgreSQL's values (two versions of the subject, each read with its own schema), and silver equals PostgreSQL",
  async () => {
    const versions = (await (await fetch(`${schemaRegistryUrl()}/subjects/${precise.topic(dflt)}-value/versions`)).json()) as number[];
    expect(versions).toHaveLength(2); // the column added in PostgreSQL is a new version
    const b = await bronze(`topics = [${topics().map((t) => `"${t}"`)}], bad-values = set-null, value-schema { ${COLUMNS}, channel = string }`);
    expect(b.code, b.stderr).toBe(0);
    const s = await silver();
    expect(s.code, s.stderr).toBe(0);
    const events = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'changes');
    const orders = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders');

    // Every record landed and decoded; price3 = 1.005 is NULL and counted in each event of its rows.
    expect(events).toHaveLength(7 + 4 + 3);
    const nulled = events.filter((e) => (e._kafka_undecoded as string[]).includes('price3'));
    expect(b.status.outputs[0].metrics).toMatchObject({ rowsWritten: 14, undecodable: 0, 'nulled.price3': nulled.length });
    expect(new Set(nulled.map((e) => e.id))).toEqual(new Set([2, 102, 202]));
    const of = (topic: string, op: string, i: number) => events.filter((e) => e._kafka_topic === topic && e.op === op && e.id === i);
    // The update that left the TOASTed notes out: NULL and listed, never the placeholder.
    expect(of(precise.topic(dflt), 'u', 1)[0]).toMatchObject({ status: 'PAID', notes: null, _cdc_unavailable: ['notes'] });
    // One transaction, one commit time: only the log position orders the two updates.
    const [first, second] = of(precise.topic(dflt), 'u', 2).sort((x, y) => Number(x._kafka_offset) - Number(y._kafka_offset));
    expect(first!._cdc_ts_ms).toBe(second!._cdc_ts_ms);
    expect(Number(first!._cdc_lsn)).toBeLessThan(Number(second!._cdc_lsn));
    // FULL: the delete's row is the whole row before; its tombstone is a NULL value, not undecodable.
    expect(of(precise.topic(full), 'd', 102)[0]).toMatchObject({ status: 'NEW', amount: '-7.25', notes: 'short' });
    expect(events.filter((e) => e._kafka_topic === precise.topic(full) && e._kafka_value === null)).toMatchObject([
      { op: null, id: null, _kafka_undecoded: [] },
    ]);
    // The snapshot's events carry the first version's schema id, the added column's the second's.
    expect(of(precise.topic(dflt), 'r', 1)[0]!.channel).toBeNull();
    expect(of(precise.topic(dflt), 'c', 3)[0]!.channel).toBe('app');
    expect(events.every((e) => e._kafka_value === null || Number(e._cdc_lsn) > 0)).toBe(true);

    expect(silverState(orders)).toEqual(pgState());
  },
  LONG,
);
