import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { type DebeziumSource, debeziumSource, startCdcPostgres } from '../../support/debezium.js';
import { debeziumDecimal, kafkaBootstrap, produce, waitForRecords } from '../../support/kafka.js';
import type { Postgres } from '../../support/postgres.js';
import { freshTenant, readIcebergWithPyIceberg, repoRoot, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'kafka-connect', 'postgres', 'py-tools');

/**
 * Changes as Debezium streams them, through kafka-bronze-ingest and cdc-silver-merge configured as
 * docs/templates/kafka-bronze-ingest.md ("Kafka to silver") says, silver compared with PostgreSQL
 * (read by PyIceberg) after each round: a REPLICA IDENTITY DEFAULT table with a TOASTed column
 * that later updates leave out (Debezium's placeholder never reaches silver, the value stays), two
 * updates of one row in one transaction (one commit time: the log position orders them) and a
 * redelivered older event (a connector restart sends events again: it must not win), a column
 * added in PostgreSQL (declared, it reaches silver under add-columns), and a REPLICA IDENTITY FULL
 * table whose delete carries the whole row and is followed by a tombstone.
 */

const tenant = freshTenant();
const LONG = 1_500_000;
const id = tenant.id.replace(/^it_/, '');
const dflt = `chg_${id}`;
const full = `chgf_${id}`;
let dir: string;
let pg: Postgres;
let cdc: DebeziumSource;

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.cdc { bootstrap-servers = "${kafkaBootstrap()}", default = true, tenants { ${tenant.id} { topic-prefixes = ["chg_${id}."] } } }
`;

const COLUMNS = 'id = int, status = string, notes = string, amount = "decimal(12,2)"';
let n = 0;
async function bronze(columns: string) {
  const path = join(dir, `bronze-${++n}.conf`);
  writeFileSync(
    path,
    `job { template = "kafka-bronze-ingest", schema-version = 1, name = "it-dbz-changes" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { topics = ["${cdc.topic(dflt)}", "${cdc.topic(full)}"], value-format = debezium-json, value-schema { ${columns} } }
target { table = "changes", format = iceberg }
`,
  );
  return runJob(path, join(dir, 'platform.conf'));
}

/** The documented snippet, as written, on this test's bronze table (the tables' ids do not overlap). */
function silverConfig(): string {
  const doc = readFileSync(join(repoRoot, 'docs/templates/kafka-bronze-ingest.md'), 'utf8');
  const snippet = /## Kafka to silver[\s\S]*?```hocon\n([\s\S]*?)```/.exec(doc)![1]!;
  return `${snippet}
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source.table = "changes"
cdc.unavailable-columns { listed-in = "_cdc_unavailable", columns = ["notes"] }
target.table = "orders"
`;
}
async function silver() {
  const path = join(dir, `silver-${++n}.conf`);
  writeFileSync(path, silverConfig());
  return runJob(path, join(dir, 'platform.conf'));
}

const md5 = (s: unknown) => (s === null || s === undefined ? null : createHash('md5').update(String(s)).digest('hex'));
const num = (v: unknown) => (v === null || v === undefined ? null : Number(v).toFixed(2));
function pgState(): string[] {
  const rows = (table: string, channel: boolean) =>
    pg
      .psql(`SELECT id, status, md5(notes), amount${channel ? ', channel' : ', NULL'} FROM ${table} ORDER BY id`)
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [i, status, notes, amount, ch] = l.split('|');
        return `${i}|${status}|${notes || null}|${num(amount)}|${ch || null}`;
      });
  return [...rows(dflt, hasChannel), ...rows(full, false)].sort();
}
const silverState = () =>
  readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders')
    .map((r) => `${String(r.id)}|${String(r.status)}|${md5(r.notes)}|${num(r.amount)}|${(r.channel as string | undefined) ?? null}`)
    .sort();
let hasChannel = false;

beforeAll(() => {
  dir = tempFiles({ 'platform.conf': platform() });
  pg = startCdcPostgres();
  // notes: ~22 kB of hex that compresses to more than PostgreSQL's 2 kB: stored out of line (TOASTed).
  const big = (seed: string) => `(SELECT string_agg(md5('${seed}' || i), '') FROM generate_series(1, 700) i)`;
  pg.psql(`
CREATE TABLE ${dflt} (id int PRIMARY KEY, status text, notes text, amount numeric(12,2));
CREATE TABLE ${full} (id int PRIMARY KEY, status text, notes text, amount numeric(12,2));
ALTER TABLE ${full} REPLICA IDENTITY FULL;
INSERT INTO ${dflt} VALUES (1, 'NEW', ${big('a')}, 10.00), (2, 'NEW', 'short', 20.00);
INSERT INTO ${full} VALUES (101, 'NEW', ${big('b')}, 10.00), (102, 'NEW', 'short', 20.00);`);
  cdc = debeziumSource(pg, dir, `chg_${id}`, [dflt, full]);
  waitForRecords(cdc.topic(dflt), 2);
  waitForRecords(cdc.topic(full), 2);
}, LONG);

afterAll(() => {
  cdc?.stop();
  pg?.psql(`DROP TABLE IF EXISTS ${dflt}; DROP TABLE IF EXISTS ${full}`);
});

it(
  'silver equals PostgreSQL after the snapshot, after TOAST-skipping updates, same-transaction updates, a delete with its tombstone, a redelivered event and an added column',
  async () => {
    // Round 1: the snapshot (op r).
    expect((await bronze(COLUMNS)).code).toBe(0);
    const s1 = await silver();
    expect(s1.code, s1.stderr).toBe(0);
    expect(silverState()).toEqual(pgState());

    // Round 2: an update that leaves the TOASTed notes out, two updates in one transaction, a delete.
    pg.psql(`
UPDATE ${dflt} SET status = 'PAID' WHERE id = 1;
UPDATE ${full} SET status = 'PAID' WHERE id = 101;
BEGIN; UPDATE ${dflt} SET amount = 11.00 WHERE id = 2; UPDATE ${dflt} SET amount = 12.00 WHERE id = 2; COMMIT;
DELETE FROM ${full} WHERE id = 102;`);
    waitForRecords(cdc.topic(dflt), 5);
    waitForRecords(cdc.topic(full), 5); // the delete and its tombstone
    expect((await bronze(COLUMNS)).code).toBe(0);
    const events = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'changes');
    const skipped = events.find((e) => e._kafka_topic === cdc.topic(dflt) && e.id === 1 && e.op === 'u')!;
    expect(skipped).toMatchObject({ status: 'PAID', notes: null, _cdc_unavailable: ['notes'] }); // never the placeholder
    const [first, second] = events
      .filter((e) => e._kafka_topic === cdc.topic(dflt) && e.id === 2 && e.op === 'u')
      .sort((a, b) => Number(a._kafka_offset) - Number(b._kafka_offset));
    expect(first!._cdc_ts_ms).toBe(second!._cdc_ts_ms); // one commit: only the log position tells them apart
    expect(Number(first!._cdc_lsn)).toBeLessThan(Number(second!._cdc_lsn));
    const deleted = events.find((e) => e._kafka_topic === cdc.topic(full) && e.op === 'd')!;
    expect(deleted).toMatchObject({ id: 102, status: 'NEW', notes: 'short' }); // FULL: the whole row before
    expect(events.filter((e) => e._kafka_topic === cdc.topic(full) && e._kafka_value === null)).toHaveLength(1);
    const s2 = await silver();
    expect(s2.code, s2.stderr).toBe(0);
    expect(silverState()).toEqual(pgState());

    // Round 3: the first of the two same-transaction updates again (as a restarted connector sends
    // it, later in the topic), a column added in PostgreSQL and declared, a TOAST-skipping update.
    produce(cdc.topic(dflt), [
      {
        key: JSON.stringify({ id: 2 }),
        value: {
          before: null,
          after: { id: 2, status: 'NEW', notes: 'short', amount: debeziumDecimal('11.00', 2) },
          op: 'u',
          source: { ts_ms: first!._cdc_ts_ms, lsn: first!._cdc_lsn },
        },
      },
    ]);
    pg.psql(`
ALTER TABLE ${dflt} ADD COLUMN channel text;
UPDATE ${dflt} SET channel = 'web' WHERE id = 1;
INSERT INTO ${dflt} VALUES (3, 'NEW', 'x', 30.00, 'app');`);
    hasChannel = true;
    waitForRecords(cdc.topic(dflt), 8);
    expect((await bronze(`${COLUMNS}, channel = string`)).code).toBe(0);
    const s3 = await silver();
    expect(s3.code, s3.stderr).toBe(0);
    expect(s3.status.outputs[0].metrics.late).toBeGreaterThanOrEqual(1); // the redelivered event
    expect(silverState()).toEqual(pgState());
  },
  LONG,
);
