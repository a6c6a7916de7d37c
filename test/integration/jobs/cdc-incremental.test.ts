import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../../src/jobs/template.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { sqlCommand } from '../../../src/spark/plan/query.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { tempFiles } from '../../support/files.js';
import {
  connect,
  deltaLastCommit,
  freshTenant,
  icebergSnapshotSummary,
  readDeltaWithDeltaRs,
  readIcebergWithPyIceberg,
  remote,
  runCli,
  runJob,
} from '../../support/stack.js';
import { type Outcome, pausePoint, runInProcess } from '../../support/in-process.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * cdc-silver-merge with `source.read = incremental` on an Iceberg bronze table: each run reads
 * exactly bronze's commits since the position silver recorded, and records its own in the same
 * commit as its MERGE (Iceberg snapshot summary, Delta commitInfo), read back by PyIceberg and
 * delta-rs. The status's `read` names the position; `late` counts only the new batch's late events
 * (a full read would count every applied event again).
 */
const tenant = freshTenant();
let dir: string;
let client: SparkConnectClient;
const BRONZE = `lake.${tenant.id}_bronze.orders_cdc`;
const KEY = `lakehouse-jobs.read.${BRONZE}`;

type Ev = [id: number, ts: number, op: string, v: string];

async function sparkSql(text: string) {
  await client.execute(compileCommandPlan(sqlCommand({ text, reads: [], writes: [] } as never), { reveal: true }));
}

async function sparkRows(text: string): Promise<Record<string, unknown>[]> {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? arrowRows(r.table) : [];
}

/** Append one commit of events to bronze; returns its snapshot id. */
async function append(events: Ev[]): Promise<string> {
  const values = events.map(([id, ts, op, v]) => `(${id}, ${ts}, '${op}', '${v}')`).join(', ');
  await sparkSql(`INSERT INTO ${BRONZE} SELECT id, ts, op, v, 'x', 'it', current_timestamp(), DATE'2026-03-01' FROM VALUES ${values} AS t(id, ts, op, v)`);
  return head();
}

async function head(): Promise<string> {
  const [r] = await sparkRows(`SELECT CAST(snapshot_id AS STRING) AS id FROM ${BRONZE}.refs WHERE name = 'main'`);
  return String(r!.id);
}

const config = (format: 'iceberg' | 'delta', table: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-incremental" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", format = iceberg, catalog = lake, read = incremental }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${table}", format = ${format}, catalog = "${format === 'iceberg' ? 'lake' : 'spark_catalog'}" }
`;

function run(table: string, opts: { beforeStep?: (s: Step) => Promise<void>; overrides?: string[] } = {}): Promise<Outcome> {
  return runInProcess(
    {
      configFile: join(dir, `${table}.conf`),
      envFile: join(dir, 'platform.conf'),
      overrides: opts.overrides ?? [],
      env: {},
      runId: `it-inc-${table}-${Math.random().toString(36).slice(2, 8)}`,
    },
    opts.beforeStep,
  );
}

const silverOut = (o: Outcome, table: string) => o.report.outputs.find((x) => x.table?.endsWith(`_silver.${table}`));

function read(format: 'iceberg' | 'delta', table: string) {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) })).sort((a, b) => a.id - b.id);
}

/** The position silver's latest commit carries, read by PyIceberg or delta-rs. */
function stampOf(format: 'iceberg' | 'delta', table: string): string | undefined {
  if (format === 'iceberg') return icebergSnapshotSummary(`${tenant.id}_silver`, table)[KEY];
  const meta = deltaLastCommit(`${tenant.root}/silver/${table}`).userMetadata;
  return (JSON.parse(String(meta)) as { 'lakehouse-jobs': Record<string, string> })['lakehouse-jobs'][`read.${BRONZE}`];
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  client = connect();
  await sparkSql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_bronze`);
  await sparkSql(
    `CREATE TABLE ${BRONZE} (id INT, ts INT, op STRING, v STRING, _lake_tenant STRING, _lake_source STRING, _lake_ingested_at TIMESTAMP, _snapshot_date DATE) USING iceberg LOCATION '${tenant.root}/bronze/orders_cdc' TBLPROPERTIES ('format-version' = '2')`,
  );
});

afterAll(() => client?.close());

describe.each(['iceberg', 'delta'] as const)('cdc-silver-merge, source.read = incremental, %s silver', (format) => {
  const table = `orders_${format}`;
  const oracle = new Map<number, { ts: number; v: string }>();
  const apply = (events: Ev[]) => {
    for (const [id, ts, op, v] of events) {
      const cur = oracle.get(id);
      if (cur && cur.ts >= ts) continue;
      if (op === 'd') oracle.set(id, { ts, v: '__deleted__' });
      else oracle.set(id, { ts, v });
    }
  };
  const expected = () =>
    [...oracle.entries()]
      .filter(([, r]) => r.v !== '__deleted__')
      .map(([id, r]) => ({ id, ...r }))
      .sort((a, b) => a.id - b.id);
  let start: string;

  beforeAll(() => writeFileSync(join(dir, `${table}.conf`), config(format, table)));

  it('a first run reads everything and records the snapshot it read up to in its MERGE commit; a rerun finds nothing new (99)', async () => {
    // Bronze holds the other describe's events too: the oracle is bronze's whole history.
    const rows = await sparkRows(`SELECT id, ts, op, v FROM ${BRONZE}`);
    apply(rows.map((r) => [Number(r.id), Number(r.ts), String(r.op), String(r.v)]));
    const first: Ev[] = range(1, 20).map((k) => [k + (format === 'delta' ? 100 : 0), 1, 'c', `v1-${k}`]);
    start = await append(first);
    apply(first);
    const o = await run(table);
    expect(o.code, o.error?.message).toBe(0);
    expect(silverOut(o, table)?.read).toEqual({ source: BRONZE, mode: 'full', to: start, reason: 'first run' });
    expect(read(format, table)).toEqual(expected());
    expect(stampOf(format, table)).toBe(start);

    const again = await run(table);
    expect(again.code).toBe(0);
    expect(again.report.skipped).toBe(
      `nothing new in ${BRONZE} since snapshot ${start}, which ${format === 'iceberg' ? 'lake' : 'spark_catalog'}.${tenant.id}_silver.${table} already holds`,
    );
  });

  it('a later run reads only the new commits: the applied events are not read again (late counts only the new late ones)', async () => {
    const off = format === 'delta' ? 100 : 0;
    const b2: Ev[] = [
      [1 + off, 2, 'u', 'v2-1'],
      [2 + off, 2, 'd', 'del'],
      [21 + off, 1, 'c', 'v1-21'],
    ];
    const s2 = await append(b2);
    const b3: Ev[] = [
      [3 + off, 0, 'u', 'late-3'],
      [4 + off, 3, 'u', 'v3-4'],
    ];
    const s3 = await append(b3);
    apply([...b2, ...b3]);
    // The CLI, as an orchestrator runs it: the position in the status document, the stamp in the commit.
    const o = await runJob(join(dir, `${table}.conf`), join(dir, 'platform.conf'), ['--run-id', `it-inc-cli-${format}`]);
    expect(o.code, o.stderr).toBe(0);
    const out = (o.status.outputs as { table?: string; read?: unknown; metrics?: unknown }[]).find((x) => x.table?.endsWith(`_silver.${table}`));
    expect(out?.read).toEqual({ source: BRONZE, mode: 'incremental', from: start, to: s3 });
    expect(out?.metrics).toMatchObject({ inserted: 1, updated: 2, deleted: 1, late: 1 });
    expect(read(format, table)).toEqual(expected());
    expect(stampOf(format, table)).toBe(s3);
    expect(s2).not.toBe(s3);
    start = s3;
  });

  it('a compaction of bronze carries no new data (99); a batch of only late events still records its position', async () => {
    await sparkSql(`CALL lake.system.rewrite_data_files(table => '${tenant.id}_bronze.orders_cdc', options => map('min-input-files', '2'))`);
    const afterCompaction = await run(table);
    expect(afterCompaction.report.skipped).toMatch(/only rewrites \(compaction\) since/);

    const off = format === 'delta' ? 100 : 0;
    const late: Ev[] = [[5 + off, 0, 'u', 'late-5']];
    const s = await append(late);
    const o = await run(table);
    expect(o.code, o.error?.message).toBe(0);
    expect(o.steps).toContain('record-position');
    expect(o.steps).not.toContain('merge');
    expect(stampOf(format, table)).toBe(s);
    expect((await run(table)).report.skipped).toMatch(/^nothing new/);
    start = s;
  });

  // The order of the steps, concurrency and the lost position: proved once, on Iceberg silver (each run costs server time).
  if (format === 'iceberg') {
    it('a run that dies between its tombstones and its MERGE leaves the position; its rerun applies the batch once', async () => {
      const off = 0;
      const b: Ev[] = [
        [6 + off, 5, 'd', 'del'],
        [7 + off, 5, 'u', 'v5-7'],
      ];
      const s = await append(b);
      apply(b);
      const died = await run(table, {
        beforeStep: async (step) => {
          if (step.id === 'merge') throw new Error('killed before the merge');
        },
      });
      expect(died.code).not.toBe(0);
      expect(died.steps).toContain('record-tombstones');
      expect(stampOf(format, table)).toBe(start);
      const rerun = await run(table);
      expect(rerun.code, rerun.error?.message).toBe(0);
      expect(silverOut(rerun, table)?.read).toMatchObject({ mode: 'incremental', from: start, to: s });
      expect(read(format, table)).toEqual(expected());
      start = s;
    });

    it('concurrent runs (pause hook): a run that commits an older position after a newer one does not move it back', async () => {
      const off = 0;
      const bx: Ev[] = [[8 + off, 6, 'u', 'v6-8']];
      const sx = await append(bx);
      const pause = pausePoint();
      const x = run(table, { beforeStep: pause.hold('merge') });
      await Promise.race([pause.reached, x]);
      const by: Ev[] = [[9 + off, 6, 'u', 'v6-9']];
      const sy = await append(by);
      apply([...bx, ...by]);
      const y = await run(table);
      pause.release();
      const xo = await x;
      const codes = [xo.code, y.code];
      for (const c of codes) expect([0, 75], `exit codes ${codes.join(', ')}`).toContain(c);
      if (xo.code === 75) expect((await run(table)).code).toBe(0);
      if (y.code === 75) expect((await run(table)).code).toBe(0);
      expect(silverOut(y, table)?.read).toMatchObject({ from: start, to: sy });
      if (xo.code === 0) expect(silverOut(xo, table)?.read).toMatchObject({ from: start, to: sx });
      // Silver's position is the newest one, whichever run committed last.
      const next = await run(table);
      expect(next.report.skipped, JSON.stringify(next.report.outputs)).toMatch(/^nothing new/);
      expect(read(format, table)).toEqual(expected());
      start = sy;
    });

    it('a bronze commit that rewrote rows (not append-only) makes the run read all of bronze as of its newest snapshot', async () => {
      // Iceberg's incremental scan passes over overwrite snapshots: reading them as appends would miss rows.
      await sparkSql(`DELETE FROM ${BRONZE} WHERE id = 3 AND ts = 0`);
      const b: Ev[] = [[40, 8, 'c', 'v8-40']];
      const s = await append(b);
      apply(b);
      const o = await run(table);
      expect(o.code, o.error?.message).toBe(0);
      expect(silverOut(o, table)?.read).toMatchObject({ mode: 'full', from: start, to: s, reason: expect.stringContaining('changed or deleted rows') });
      expect(silverOut(o, table)?.metrics).toMatchObject({ inserted: 1, updated: 0, deleted: 0 });
      expect(read(format, table)).toEqual(expected());
      expect(stampOf(format, table)).toBe(s);
      start = s;
    });

    it('a consumed snapshot bronze no longer holds is 65 naming both; one run with source.read=full resumes', async () => {
      const b: Ev[] = [[10, 7, 'u', 'v7-10']];
      start = await append(b);
      apply(b);
      expect((await run(table)).code).toBe(0);
      const b2: Ev[] = [[11, 7, 'u', 'v7-11']];
      await append(b2);
      apply(b2);
      const now = new Date(Date.now() + 1000).toISOString().replace('T', ' ').replace('Z', '');
      await sparkSql(`CALL lake.system.expire_snapshots(table => '${tenant.id}_bronze.orders_cdc', older_than => TIMESTAMP '${now}', retain_last => 1)`);
      const lost = await run(table);
      expect(lost.code).toBe(65);
      expect(lost.error?.code).toBe('SOURCE_POSITION_LOST');
      expect(lost.error?.message).toContain(`snapshot ${start}`);
      expect(lost.error?.message).toContain(BRONZE);
      const full = await run(table, { overrides: ['source.read=full'] });
      expect(full.code, full.error?.message).toBe(0);
      expect(read(format, table)).toEqual(expected());
      const resumed = await run(table);
      expect(resumed.code, resumed.error?.message).toBe(0);
      expect(resumed.report.skipped).toMatch(/^nothing new/);
    });
  }
});

/**
 * A Delta bronze table, as kafka-bronze-ingest creates it (change data feed on): each run reads the
 * versions after the one silver recorded through the change feed, and records the version with the
 * table's id (a recreated table restarts its versions) in its MERGE's commit, read back by delta-rs.
 */
describe('cdc-silver-merge, source.read = incremental, Delta bronze', () => {
  const DBRONZE = `spark_catalog.${tenant.id}_bronze.orders_cdc_delta`;
  const bronzePath = () => `${tenant.root}/bronze/orders_cdc_delta`;
  const table = 'orders_from_delta';
  const dkey = `read.${DBRONZE}`;
  const oracle = new Map<number, { ts: number; v: string }>();
  const apply = (events: Ev[]) => {
    for (const [id, ts, op, v] of events) {
      const cur = oracle.get(id);
      if (cur && cur.ts >= ts) continue;
      oracle.set(id, { ts, v: op === 'd' ? '__deleted__' : v });
    }
  };
  const expected = () =>
    [...oracle.entries()]
      .filter(([, r]) => r.v !== '__deleted__')
      .map(([id, r]) => ({ id, ...r }))
      .sort((a, b) => a.id - b.id);
  const deltaConfig = (t: string, bronzeTable: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-incremental-delta" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "${bronzeTable}", format = delta, catalog = spark_catalog, read = incremental }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${t}", format = delta, catalog = spark_catalog }
`;
  const createBronze = (name: string, cdf: boolean) =>
    sparkSql(
      `CREATE TABLE spark_catalog.${tenant.id}_bronze.${name} (id INT, ts INT, op STRING, v STRING, _lake_tenant STRING, _lake_source STRING, _lake_ingested_at TIMESTAMP, _snapshot_date DATE) USING delta LOCATION '${tenant.root}/bronze/${name}'${cdf ? ` TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')` : ''}`,
    );
  async function dappend(events: Ev[]): Promise<string> {
    const values = events.map(([id, ts, op, v]) => `(${id}, ${ts}, '${op}', '${v}')`).join(', ');
    await sparkSql(`INSERT INTO ${DBRONZE} SELECT id, ts, op, v, 'x', 'it', current_timestamp(), DATE'2026-03-01' FROM VALUES ${values} AS t(id, ts, op, v)`);
    return dhead();
  }
  async function dhead(): Promise<string> {
    const [r] = await sparkRows(`DESCRIBE HISTORY ${DBRONZE} LIMIT 1`);
    return String(r!.version);
  }
  const tableId = async () => String((await sparkRows(`DESCRIBE DETAIL ${DBRONZE}`))[0]!.id);
  const stamps = () => {
    const meta = deltaLastCommit(`${tenant.root}/silver/${table}`).userMetadata;
    return (JSON.parse(String(meta)) as { 'lakehouse-jobs': Record<string, string> })['lakehouse-jobs'];
  };
  const readSilver = () =>
    readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`)
      .map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) }))
      .sort((a, b) => a.id - b.id);
  let start: string;

  beforeAll(async () => {
    writeFileSync(join(dir, `${table}.conf`), deltaConfig(table, 'orders_cdc_delta'));
    await sparkSql(`CREATE NAMESPACE IF NOT EXISTS spark_catalog.${tenant.id}_bronze`);
    await createBronze('orders_cdc_delta', true);
  });

  it('a first run reads everything as of the newest version and records it with the table id; a rerun finds nothing new (99)', async () => {
    const first: Ev[] = range(1, 10).map((k) => [k, 1, 'c', `v1-${k}`]);
    start = await dappend(first);
    apply(first);
    const o = await run(table);
    expect(o.code, o.error?.message).toBe(0);
    expect(silverOut(o, table)?.read).toEqual({ source: DBRONZE, mode: 'full', to: start, reason: 'first run' });
    expect(readSilver()).toEqual(expected());
    expect(stamps()).toMatchObject({ [dkey]: start, [`${dkey}#table-id`]: await tableId() });
    const again = await run(table);
    expect(again.code).toBe(0);
    expect(again.report.skipped).toBe(`nothing new in ${DBRONZE} since version ${start}, which spark_catalog.${tenant.id}_silver.${table} already holds`);
  });

  it('a later run reads only the new versions through the change feed; diff predicts the same read', async () => {
    const b2: Ev[] = [
      [1, 2, 'u', 'v2-1'],
      [2, 2, 'd', 'del'],
      [11, 1, 'c', 'v1-11'],
    ];
    await dappend(b2);
    const b3: Ev[] = [
      [3, 0, 'u', 'late-3'],
      [4, 3, 'u', 'v3-4'],
    ];
    const s3 = await dappend(b3);
    apply([...b2, ...b3]);
    const d = await runCli([
      'diff',
      '--config',
      join(dir, `${table}.conf`),
      '--env',
      join(dir, 'platform.conf'),
      '--remote',
      remote(),
      '--status-file',
      join(dir, 'diff.json'),
    ]);
    expect(d.code, d.stderr).toBe(0);
    const predicted = (
      JSON.parse(readFileSync(join(dir, 'diff.json'), 'utf8')) as { outputs: { table?: string; read?: unknown; metrics?: unknown }[] }
    ).outputs.find((x) => x.table?.endsWith(`_silver.${table}`));
    expect(predicted?.read).toEqual({ source: DBRONZE, mode: 'incremental', from: start, to: s3 });
    const o = await run(table);
    expect(o.code, o.error?.message).toBe(0);
    expect(silverOut(o, table)?.read).toEqual({ source: DBRONZE, mode: 'incremental', from: start, to: s3 });
    expect(silverOut(o, table)?.metrics).toMatchObject({ inserted: 1, updated: 2, deleted: 1, late: 1 });
    expect(predicted?.metrics).toEqual(silverOut(o, table)?.metrics);
    expect(readSilver()).toEqual(expected());
    expect(stamps()[dkey]).toBe(s3);
    start = s3;
  });

  it('an OPTIMIZE of bronze carries no new data (99); rows a bronze UPDATE rewrote are read as their new values', async () => {
    await sparkSql(`OPTIMIZE ${DBRONZE}`);
    const afterOptimize = await run(table);
    expect(afterOptimize.code, afterOptimize.error?.message).toBe(0);
    expect(afterOptimize.report.skipped).toMatch(/only rewrites \(compaction\) and maintenance since/);
    // An UPDATE of bronze: the change feed has the old rows (update_preimage, passed over) and the new ones.
    await sparkSql(`UPDATE ${DBRONZE} SET ts = 9, v = 'v9-5' WHERE id = 5`);
    const s = await dhead();
    apply([[5, 9, 'u', 'v9-5']]);
    const o = await run(table);
    expect(o.code, o.error?.message).toBe(0);
    expect(silverOut(o, table)?.read).toEqual({ source: DBRONZE, mode: 'incremental', from: start, to: s });
    expect(silverOut(o, table)?.metrics).toMatchObject({ inserted: 0, updated: 1, deleted: 0 });
    expect(readSilver()).toEqual(expected());
    start = s;
  });

  it('files removed after the position and vacuumed are 65 naming both; source.read=full resumes', async () => {
    const b: Ev[] = [[12, 4, 'c', 'v4-12']];
    await dappend(b);
    apply(b);
    await sparkSql(`OPTIMIZE ${DBRONZE}`);
    await sparkSql(`SET spark.databricks.delta.retentionDurationCheck.enabled = false`);
    await sparkSql(`VACUUM ${DBRONZE} RETAIN 0 HOURS`);
    const lost = await run(table);
    expect(lost.code, lost.error?.message).toBe(65);
    expect(lost.error?.code).toBe('SOURCE_POSITION_LOST');
    expect(lost.error?.message).toContain(`up to version ${start}`);
    expect(lost.error?.message).toContain(DBRONZE);
    expect(lost.error?.message).toContain('VACUUM');
    const full = await run(table, { overrides: ['source.read=full'] });
    expect(full.code, full.error?.message).toBe(0);
    expect(readSilver()).toEqual(expected());
    expect((await run(table)).report.skipped).toMatch(/^nothing new/);
    start = await dhead();
  });

  it('a bronze table dropped and recreated is 65 naming both tables; source.read=full resumes', async () => {
    const oldId = await tableId();
    await sparkSql(`DROP TABLE ${DBRONZE}`);
    rmSync(new URL(bronzePath()), { recursive: true, force: true });
    await createBronze('orders_cdc_delta', true);
    const b: Ev[] = [[13, 5, 'c', 'v5-13']];
    await dappend(b);
    apply(b);
    const lost = await run(table);
    expect(lost.code, lost.error?.message).toBe(65);
    expect(lost.error?.code).toBe('SOURCE_POSITION_LOST');
    expect(lost.error?.message).toContain(`id ${oldId}`);
    expect(lost.error?.message).toContain(`id ${await tableId()}`);
    expect(lost.error?.message).toContain('dropped and recreated');
    const full = await run(table, { overrides: ['source.read=full'] });
    expect(full.code, full.error?.message).toBe(0);
    expect(readSilver()).toEqual(expected());
  });

  it('a Delta bronze without its change data feed is 78 at source.read, saying how to enable it', async () => {
    await createBronze('orders_cdc_plain', false);
    writeFileSync(join(dir, 'plain.conf'), deltaConfig('orders_plain', 'orders_cdc_plain'));
    await sparkSql(`INSERT INTO spark_catalog.${tenant.id}_bronze.orders_cdc_plain SELECT 1, 1, 'c', 'a', 'x', 'it', current_timestamp(), DATE'2026-03-01'`);
    const o = await run('plain');
    expect(o.code).toBe(78);
    expect(o.error?.message).toContain(`source.read: spark_catalog.${tenant.id}_bronze.orders_cdc_plain is a Delta table without its change data feed`);
    expect(o.error?.message).toContain(`'delta.enableChangeDataFeed' = 'true'`);
  });
});
