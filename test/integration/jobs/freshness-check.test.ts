import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { openLineageProblems } from '../../support/openlineage.js';
import { connect, deltaLastCommit, freshTenant, icebergSnapshotSummary, readDeltaWithDeltaRs, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * freshness-check on the local stack: Iceberg and Delta tables judged by their latest commit and by
 * an event-time column, the instants it reports read back with PyIceberg and delta-rs (the commit
 * times) and from the rows themselves (the event times); stale by a max-age shorter than the time
 * since the commit (no sleeping), with empty tables and one without a commit, in one 65 that names
 * each; the data-quality assertions of its lineage; a missing table 66; a column the table lacks
 * 78; and no commit of any checked table before and after.
 */
let dir: string;
let client: SparkConnectClient;
const tenant = freshTenant();
const ns = (layer: string) => `${tenant.id}_${layer}`;
const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));

/** The event times the bronze tables hold: three and five hours before the test started. */
const started = Date.now();
const EVENT_MS = [started - 3 * 3600_000, started - 5 * 3600_000];

const namespaces = new Set<string>();
/** A table at the tenant's layout location: created with its two rows in one statement (CTAS), or empty. */
async function table(layer: string, name: string, format: 'iceberg' | 'delta', rows: 'events' | 'none') {
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const id = `\`${catalog}\`.\`${ns(layer)}\`.\`${name}\``;
  if (!namespaces.has(`${catalog}.${layer}`)) await sql(`CREATE NAMESPACE IF NOT EXISTS \`${catalog}\`.\`${ns(layer)}\``);
  namespaces.add(`${catalog}.${layer}`);
  const shape = `USING ${format} LOCATION '${tenant.root}/${layer}/${name}'${format === 'iceberg' ? " TBLPROPERTIES ('format-version' = '2')" : ''}`;
  if (rows === 'none') await sql(`CREATE TABLE ${id} (id bigint, ts timestamp) ${shape}`);
  else
    await sql(
      `CREATE TABLE ${id} ${shape} AS SELECT * FROM VALUES ${EVENT_MS.map((ms, i) => `(CAST(${i + 1} AS bigint), timestamp_micros(${ms * 1000}))`).join(', ')} AS t(id, ts)`,
    );
}

const header = `
job    { template = "freshness-check", schema-version = 1, name = "it-freshness" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
`;

let lineageFile: string;
async function run(tables: string) {
  const name = `job-${Math.random().toString(36).slice(2)}`;
  writeFileSync(join(dir, `${name}.conf`), `${header}\ntables = [\n${tables}\n]\n`);
  writeFileSync(
    join(dir, `${name}.platform.conf`),
    `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
lineage { transports = [{ type = file, path = "${lineageFile}" }] }`,
  );
  return runJob(join(dir, `${name}.conf`), join(dir, `${name}.platform.conf`));
}

/** What a run must not change: the current snapshot (PyIceberg) and the latest version (delta-rs). */
function commits() {
  return {
    orders: icebergSnapshotSummary(ns('silver'), 'orders').snapshot_id,
    events: icebergSnapshotSummary(ns('bronze'), 'events').snapshot_id,
    ordersDelta: deltaLastCommit(`${tenant.root}/silver/orders_delta`).version,
    eventsDelta: deltaLastCommit(`${tenant.root}/bronze/events_delta`).version,
  };
}

let before: ReturnType<typeof commits>;
beforeAll(async () => {
  dir = tempFiles({});
  lineageFile = join(dir, 'lineage.jsonl');
  client = connect();
  await table('silver', 'orders', 'iceberg', 'events');
  await table('silver', 'orders_delta', 'delta', 'events');
  await table('bronze', 'events', 'iceberg', 'events');
  await table('bronze', 'events_delta', 'delta', 'events');
  await table('silver', 'never_written', 'iceberg', 'none');
  await table('silver', 'empty_delta', 'delta', 'none');
  before = commits();
}, 300_000);
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

const ORDERS = (maxAge: string) => `{ layer = silver, table = orders, max-age = "${maxAge}" }`;
const ORDERS_DELTA = (maxAge: string) => `{ layer = silver, table = orders_delta, catalog = spark_catalog, format = delta, max-age = "${maxAge}" }`;
const EVENTS = (maxAge: string) => `{ layer = bronze, table = events, event-time = ts, max-age = "${maxAge}" }`;
const EVENTS_DELTA = (maxAge: string) => `{ layer = bronze, table = events_delta, catalog = spark_catalog, event-time = ts, max-age = "${maxAge}" }`;

describe('freshness-check', () => {
  let freshAt: number;

  it('passes fresh Iceberg and Delta tables by commit and by event time, reporting the instants the tables hold', async () => {
    const r = await run([ORDERS('1h'), ORDERS_DELTA('1h'), EVENTS('4h'), EVENTS_DELTA('4 hours')].join('\n'));
    expect(r.code, r.stderr).toBe(0);
    freshAt = Date.parse(r.status.startedAt);
    const byTable = Object.fromEntries(r.status.outputs.map((o: any) => [o.table, o])); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(Object.keys(byTable).sort()).toEqual(
      [
        `lake.${ns('bronze')}.events`,
        `lake.${ns('silver')}.orders`,
        `spark_catalog.${ns('bronze')}.events_delta`,
        `spark_catalog.${ns('silver')}.orders_delta`,
      ].sort(),
    );
    for (const o of r.status.outputs) {
      expect(o).toMatchObject({ committed: false, expectations: [{ type: 'freshness', action: 'fail', outcome: 'passed', failedRows: 0 }] });
      expect(o.metrics.ageSeconds).toBe(o.expectations[0].observed.ageSeconds);
    }
    // The commit times are the tables' own, as a second engine reads them (milliseconds: what both keep).
    const latestMs = (t: string) => Date.parse(byTable[t].expectations[0].observed.latest);
    expect(latestMs(`lake.${ns('silver')}.orders`)).toBe(Number(icebergSnapshotSummary(ns('silver'), 'orders').timestamp_ms));
    // Delta's commit time is its log entry's (the file's modification time, as Delta reads it without
    // in-commit timestamps): the version delta-rs reads, the file's time from the file system.
    const version = Number(deltaLastCommit(`${tenant.root}/silver/orders_delta`).version);
    const log = join(tenant.root.replace(/^file:\/\//, ''), 'silver/orders_delta/_delta_log', `${String(version).padStart(20, '0')}.json`);
    expect(latestMs(`spark_catalog.${ns('silver')}.orders_delta`)).toBe(Math.floor(statSync(log).mtimeMs));
    expect(byTable[`lake.${ns('silver')}.orders`].metrics).toMatchObject({ maxAgeSeconds: 3600 });
    expect(byTable[`lake.${ns('silver')}.orders`].metrics.ageSeconds).toBeLessThan(600);
    // The event times are the newest value of the rows, as PyIceberg and delta-rs read them.
    const newest = (rows: Record<string, unknown>[]) =>
      Math.max(...rows.map((x) => Date.parse(`${String(x.ts).replace(' ', 'T')}${/Z|[+-]\d\d:\d\d$/.test(String(x.ts)) ? '' : 'Z'}`)));
    expect(newest(readIcebergWithPyIceberg(ns('bronze'), 'events'))).toBe(EVENT_MS[0]);
    expect(newest(readDeltaWithDeltaRs(`${tenant.root}/bronze/events_delta`))).toBe(EVENT_MS[0]);
    for (const t of [`lake.${ns('bronze')}.events`, `spark_catalog.${ns('bronze')}.events_delta`]) {
      expect(byTable[t].expectations[0]).toMatchObject({ name: 'freshness.ts', observed: { measure: 'event-time', maxAgeSeconds: 14_400 } });
      expect(latestMs(t)).toBe(EVENT_MS[0]);
      // Three hours (and the test's minutes) old by the run's clock, to the second.
      const clock = Date.parse(byTable[t].expectations[0].observed.checkedAt);
      expect(clock - freshAt).toBeGreaterThanOrEqual(0);
      expect(byTable[t].metrics.ageSeconds).toBe(Math.floor((clock - EVENT_MS[0]!) / 1000));
    }
  }, 180_000);

  it('fails (65) naming every stale table with its age and limit: commits older than max-age, old event times, an empty table, one with no commit', async () => {
    // Stale without sleeping: the tables were committed before the run above started, more than 2 s ago.
    const sinceCommit = (Date.now() - freshAt) / 1000;
    expect(sinceCommit).toBeGreaterThan(2);
    const r = await run(
      [
        ORDERS('2s'),
        ORDERS_DELTA('2s'),
        EVENTS('2h'),
        EVENTS_DELTA('6h'),
        `{ layer = silver, table = never_written, max-age = 1d }`,
        `{ layer = silver, table = empty_delta, catalog = spark_catalog, max-age = 1d }`,
      ].join('\n'),
    );
    expect(r.code, r.stderr).toBe(65);
    expect(r.status.error).toMatchObject({ code: 'STALE_TABLE', category: 'data' });
    const message: string = r.status.error.message;
    expect(message).toMatch(/^5 of 6 table\(s\) are stale: /);
    expect(message).toMatch(new RegExp(`lake\\.${ns('silver')}\\.orders: the latest commit \\(\\S+\\) is [\\dhms ]+ old, older than its limit of 2s`));
    expect(message).toMatch(
      new RegExp(`spark_catalog\\.${ns('silver')}\\.orders_delta: the latest commit \\(\\S+\\) is [\\dhms ]+ old, older than its limit of 2s`),
    );
    expect(message).toMatch(new RegExp(`lake\\.${ns('bronze')}\\.events: the newest ts \\(\\S+\\) is 3h \\d+m old, older than its limit of 2h`));
    expect(message).toContain(`lake.${ns('silver')}.never_written has no commit (limit 1d)`);
    expect(message).toContain(`spark_catalog.${ns('silver')}.empty_delta is empty: its latest commit (`);
    // Fresh by its own limit, so not named.
    expect(message).not.toContain('events_delta');
    // Every table's result is in the status, the fresh one's too.
    const outcomes = Object.fromEntries(r.status.outputs.map((o: any) => [o.table.split('.').at(-1), o.expectations[0].outcome])); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(outcomes).toEqual({
      orders: 'failed',
      orders_delta: 'failed',
      events: 'failed',
      events_delta: 'passed',
      never_written: 'failed',
      empty_delta: 'failed',
    });
    const never = r.status.outputs.find((o: any) => o.table.endsWith('never_written')); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(never.metrics).toEqual({ maxAgeSeconds: 86_400 });
    expect(never.expectations[0].observed).toMatchObject({ latest: null, ageSeconds: null });

    // Lineage: the FAIL event carries each check as a data-quality assertion on its input.
    const events = readFileSync(lineageFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const fail = events.at(-1);
    expect(fail.eventType).toBe('FAIL');
    expect(openLineageProblems(fail)).toEqual([]);
    expect(fail.outputs).toEqual([]);
    const assertions = Object.fromEntries(
      fail.inputs.map((i: any) => [i.name.split('/').at(-1), i.inputFacets?.dataQualityAssertions?.assertions]), // eslint-disable-line @typescript-eslint/no-explicit-any
    );
    expect(assertions).toEqual({
      orders: [{ assertion: 'freshness', success: false }],
      orders_delta: [{ assertion: 'freshness', success: false }],
      events: [{ assertion: 'freshness.ts', success: false, column: 'ts' }],
      events_delta: [{ assertion: 'freshness.ts', success: true, column: 'ts' }],
      never_written: [{ assertion: 'freshness', success: false }],
      empty_delta: [{ assertion: 'freshness', success: false }],
    });
  }, 180_000);

  it('ends with 66 naming a missing table and its config path, and 78 for an event-time column the table lacks', async () => {
    const missing = await run([ORDERS('1h'), `{ layer = gold, table = nowhere, max-age = 1h }`].join('\n'));
    expect(missing.code, missing.stderr).toBe(66);
    expect(missing.status.error.message).toBe(`tables[1]: table lake.${ns('gold')}.nowhere does not exist`);
    const column = await run(`{ layer = bronze, table = events, event-time = happened_at, max-age = 1h }`);
    expect(column.code, column.stderr).toBe(78);
    expect(column.status.error.issues).toEqual([{ path: 'tables[0].event-time', message: `lake.${ns('bronze')}.events has no column "happened_at"` }]);
  }, 180_000);

  it('committed nothing to any table it checked', () => {
    expect(commits()).toEqual(before);
  }, 60_000);
});
