import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { sqlCommand } from '../../../src/spark/plan/query.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { main } from '../../../src/app/main.js';
import { tempFiles } from '../../support/files.js';
import {
  connect,
  freshTenant,
  readDeltaTablesWithDeltaRs,
  readIcebergTablesWithPyIceberg,
  releaseSession,
  remote,
  runCli,
  runSession,
} from '../../support/stack.js';
import { platformSchema } from '../../../src/core/config/platform.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * `history <table>` and `rollback --run-id` (docs/history.md), over Iceberg and Delta silver of
 * cdc-silver-merge with incremental reads, which writes two tables per run (silver and its
 * tombstones) and records its read position in its commits. Each table's state after a rollback
 * is read back by PyIceberg or delta-rs and compared with the state the earlier run left; the rerun
 * after the rollback reprocesses what the undone run had consumed, and ends equal to the oracle.
 * A later run blocks a rollback (65) unless --cascade; a dry run changes no file and no current
 * commit; another tenant's table is refused (78); a run id nothing wrote is 66.
 */
const tenant = freshTenant();
const other = freshTenant();
let dir: string;
let client: SparkConnectClient;
const BRONZE = `lake.${tenant.id}_bronze.orders_cdc`;

type Ev = [id: number, ts: number, op: string, v: string];

async function sparkSql(text: string) {
  await client.execute(compileCommandPlan(sqlCommand({ text, reads: [], writes: [] } as never), { reveal: true }));
}

async function sparkRows(text: string): Promise<Record<string, unknown>[]> {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? arrowRows(r.table) : [];
}

async function append(events: Ev[]): Promise<void> {
  const values = events.map(([id, ts, op, v]) => `(${id}, ${ts}, '${op}', '${v}')`).join(', ');
  await sparkSql(`INSERT INTO ${BRONZE} SELECT id, ts, op, v, 'x', 'it', current_timestamp(), DATE'2026-03-01' FROM VALUES ${values} AS t(id, ts, op, v)`);
}

const config = (format: 'iceberg' | 'delta', table: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-rollback" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", format = iceberg, catalog = lake, read = incremental }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${table}", format = ${format}, catalog = "${format === 'iceberg' ? 'lake' : 'spark_catalog'}" }
`;

/** Every file under the tenant's root, with its size and modification time. */
function listing(): string[] {
  const root = fileURLToPath(tenant.root);
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(`${p.slice(root.length)} ${statSync(p).size} ${statSync(p).mtimeMs}`);
    }
  };
  walk(root);
  return out.sort();
}

const platform = () => join(dir, 'platform.conf');
const platformConfig = () =>
  platformSchema.parse({
    catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
    tenants: { [tenant.id]: { 'storage-roots': [tenant.root] }, [other.id]: { 'storage-roots': [other.root] } },
  });

/**
 * A command line, run by the CLI's own main in this process (a child process costs seconds of
 * start on a loaded machine; one case below spawns the real CLI); its status read from --status-file.
 */
async function cli(args: string[], spawned = false) {
  const statusFile = join(dir, `status-${Math.random().toString(36).slice(2, 8)}.json`);
  const argv = [...args, '--env', platform(), '--remote', remote(), '--status-file', statusFile];
  let r: { code: number | null; stdout: string; stderr: string };
  if (spawned) r = await runCli(argv);
  else {
    const out = { stdout: '', stderr: '' };
    const code = await main(argv, { stdout: (t) => void (out.stdout += t), stderr: (t) => void (out.stderr += t), stdoutIsTTY: false, stderrIsTTY: false });
    r = { code, ...out };
  }
  return { ...r, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}
const ledger = (args: string[], spawned = false) => cli(args, spawned);

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] }, ${other.id} { storage-roots = ["${other.root}"] } }`,
  });
  client = connect();
  await client.config.set({ 'spark.sql.catalog.lake.cache-enabled': 'false' });
  await sparkSql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_bronze`);
  await sparkSql(
    `CREATE TABLE ${BRONZE} (id INT, ts INT, op STRING, v STRING, _lake_tenant STRING, _lake_source STRING, _lake_ingested_at TIMESTAMP, _snapshot_date DATE) USING iceberg LOCATION '${tenant.root}/bronze/orders_cdc' TBLPROPERTIES ('format-version' = '2')`,
  );
});

afterAll(() => client?.close());

describe.each(['iceberg', 'delta'] as const)('history and rollback of cdc-silver-merge runs, %s silver', (format) => {
  const table = `orders_${format}`;
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const silver = `${catalog}.${tenant.id}_silver.${table}`;
  const tombstones = `${silver}__cdc_tombstones`;
  const off = format === 'delta' ? 100 : 0;
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
  /** The keys the oracle holds deleted: each has its tombstone. */
  const deleted = () =>
    [...oracle.entries()]
      .filter(([, r]) => r.v === '__deleted__')
      .map(([id]) => id)
      .sort((a, b) => a - b);
  const runIds = { r1: `it-rb-${format}-1`, r2: `it-rb-${format}-2`, r3: `it-rb-${format}-3`, r4: `it-rb-${format}-4` };
  const conf = () => join(dir, `${table}.conf`);
  // As a job config names it (the default catalog's layer), or as a status document does.
  const named = format === 'iceberg' ? `silver.${table}` : silver;

  /** Silver and its tombstones, as the second engine reads them. */
  function state(): { silver: { id: number; ts: number; v: string }[]; tombstones: { id: number; ts: number }[] } {
    const names = [table, `${table}__cdc_tombstones`];
    const raw =
      format === 'iceberg'
        ? readIcebergTablesWithPyIceberg(`${tenant.id}_silver`, names)
        : Object.fromEntries(
            Object.entries(readDeltaTablesWithDeltaRs(names.map((n) => `${tenant.root}/silver/${n}`))).map(([p, r]) => [p.split('/').pop()!, r]),
          );
    return {
      silver: (raw[table] ?? []).map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) })).sort((a, b) => a.id - b.id),
      tombstones: (raw[`${table}__cdc_tombstones`] ?? []).map((r) => ({ id: Number(r.id), ts: Number(r.ts) })).sort((a, b) => a.id - b.id),
    };
  }

  /** The current commit of each table the job writes. */
  async function current(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const t of [silver, tombstones]) {
      const [r] =
        format === 'iceberg'
          ? await sparkRows(`SELECT CAST(snapshot_id AS STRING) AS c FROM ${t}.refs WHERE name = 'main'`)
          : await sparkRows(`DESCRIBE HISTORY ${t} LIMIT 1`);
      out[t] = String(r?.c ?? r?.version);
    }
    return out;
  }

  const run = async (id: string) => {
    const r = await cli(['--config', conf(), '--run-id', id]);
    expect(r.code, r.stderr).toBe(0);
    return r.status;
  };

  let afterFirst: ReturnType<typeof state>;

  beforeAll(() => writeFileSync(conf(), config(format, table)));

  it('history lists the runs that wrote silver, newest first, with their stamps and counts', async () => {
    // Bronze holds the other format's events too: the oracle is bronze's whole history.
    apply((await sparkRows(`SELECT id, ts, op, v FROM ${BRONZE}`)).map((r) => [Number(r.id), Number(r.ts), String(r.op), String(r.v)]));
    const first: Ev[] = [1, 2, 3, 4, 5].map((k) => [k + off, 1, 'c', `v1-${k}`]);
    await append(first);
    apply(first);
    await run(runIds.r1);
    afterFirst = state();
    expect(afterFirst.silver).toEqual(expected());

    // An update, a delete (a tombstone) and an insert: the run to undo.
    const second: Ev[] = [
      [1 + off, 2, 'u', 'v2-1'],
      [2 + off, 2, 'd', 'del'],
      [6 + off, 1, 'c', 'v1-6'],
    ];
    await append(second);
    apply(second);
    const s2 = await run(runIds.r2);
    const afterSecond = state();
    expect(afterSecond.silver).toEqual(expected());
    expect(afterSecond.tombstones.map((t) => t.id)).toEqual(deleted());

    const h = await ledger(['history', named, '--tenant', tenant.id]);
    expect(h.code, h.stderr).toBe(0);
    expect(h.status.command).toBe('history');
    const ours = h.status.history.commits.filter((c: any) => c.writer === 'lakehouse-jobs');
    // Newest first: the second run's commits before the first's.
    expect(ours[0].runId).toBe(runIds.r2);
    expect(ours.map((c: any) => c.runId)).toEqual(expect.arrayContaining([runIds.r1, runIds.r2]));
    expect(ours.findIndex((c: any) => c.runId === runIds.r1)).toBeGreaterThan(ours.findIndex((c: any) => c.runId === runIds.r2));
    const merge2 = ours.find((c: any) => c.runId === runIds.r2 && c.read);
    expect(merge2).toMatchObject({ template: 'cdc-silver-merge', job: 'cdc-silver-merge/v2/it-rollback', tenant: tenant.id, current: true });
    expect(merge2.configHash).toMatch(/^[0-9a-f]{16}$/);
    expect(merge2.attempt).toBeTruthy();
    expect(merge2.read[BRONZE]).toBe(s2.outputs.find((o: any) => o.table === silver).read.to);
    // The counts the commit recorded: Iceberg's summary, Delta's operationMetrics.
    if (format === 'iceberg') expect(merge2.counts.addedRecords).toBeGreaterThan(0);
    else expect(merge2.counts).toMatchObject({ numTargetRowsInserted: 1, numTargetRowsUpdated: 1, numTargetRowsDeleted: 1 });
    // A commit made by something else is listed too, said to be so, and blocks a rollback of the run under it.
    const before = await current();
    if (format === 'iceberg') await sparkSql(`INSERT INTO ${silver} SELECT * FROM ${silver} WHERE false`);
    else await sparkSql(`ALTER TABLE ${silver} SET TBLPROPERTIES ('it.note' = 'by hand')`);
    const byHand = await ledger(['history', named, '--tenant', tenant.id]);
    const operation = format === 'iceberg' ? 'append' : 'SET TBLPROPERTIES';
    expect(byHand.status.history.commits[0]).toMatchObject({ writer: 'other', operation, current: true });
    expect(byHand.status.history.commits[0].runId).toBeUndefined();
    const blocked = await ledger(['rollback', '--run-id', runIds.r2, '--config', conf()]);
    expect(blocked.code, blocked.stderr).toBe(65);
    expect(blocked.status.rollback.blockedBy).toEqual([expect.objectContaining({ table: silver, operation })]);
    expect(blocked.status.rollback.blockedBy[0].runId).toBeUndefined();
    // Undone by hand (a RESTORE blocks nothing: its state is one the lineage holds), so the runs' commits are what follows.
    if (format === 'iceberg') await sparkSql(`CALL lake.system.rollback_to_snapshot('${tenant.id}_silver.${table}', ${before[silver]})`);
    else await sparkSql(`RESTORE TABLE ${silver} TO VERSION AS OF ${before[silver]}`);
    expect(await current()).toMatchObject(format === 'iceberg' ? before : { [tombstones]: before[tombstones] });
  }, 600_000);

  it('a dry run says what it would do and changes no file and no current commit', async () => {
    const before = { files: listing(), commits: await current() };
    const d = await ledger(['rollback', '--run-id', runIds.r2, '--config', conf(), '--dry-run']);
    expect(d.code, d.stderr).toBe(0);
    expect(d.status.command).toBe('rollback');
    const rows = d.status.rollback.tables;
    expect(rows.find((t: any) => t.table === silver)).toMatchObject({
      state: 'would-roll-back',
      mode: format === 'iceberg' ? 'rollback_to_snapshot' : 'restore',
    });
    expect(rows.find((t: any) => t.table === tombstones)).toMatchObject({ state: 'would-roll-back' });
    expect({ files: listing(), commits: await current() }).toEqual(before);
  }, 300_000);

  it('rolling back the second run restores both tables to the first run’s state; the rerun reprocesses what it had read', async () => {
    const before = await current();
    const r = await ledger(['rollback', '--run-id', runIds.r2, '--config', conf()]);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.status.rollback.tables;
    // Newest-written first: silver (it carries the read position) before its tombstones.
    expect(rows.map((t: any) => t.table).slice(0, 2)).toEqual([silver, tombstones]);
    for (const t of rows.filter((x: any) => x.table === silver || x.table === tombstones)) {
      expect(t.state).toBe('rolled-back');
      expect(t.from).toBe(before[t.table]);
    }
    expect(state()).toEqual(afterFirst);
    // Delta's RESTORE is a commit of its own, stamped with the rollback.
    if (format === 'delta') {
      const h = await ledger(['history', named, '--tenant', tenant.id]);
      expect(h.status.history.commits[0]).toMatchObject({ operation: 'RESTORE', rollbackOf: runIds.r2, runId: r.status.runId });
      expect(h.status.history.commits.filter((c: any) => c.runId === runIds.r2).every((c: any) => c.current === false)).toBe(true);
    }
    // The same rollback again finds nothing left to do.
    const again = await ledger(['rollback', '--run-id', runIds.r2, '--config', conf()]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.status.rollback.tables.find((t: any) => t.table === silver).state).toBe('already-rolled-back');

    // Nothing new in bronze, but the position went back with silver: the rerun reads the undone batch again.
    const s = await run(runIds.r3);
    expect(s.outputs.find((o: any) => o.table === silver).metrics).toMatchObject({ inserted: 1, updated: 1, deleted: 1 });
    const rerun = state();
    expect(rerun.silver).toEqual(expected());
    expect(rerun.tombstones.map((t) => t.id)).toEqual(deleted());
  }, 600_000);

  it('a later run blocks the rollback (65, naming it); --cascade rolls both back', async () => {
    const third: Ev[] = [
      [3 + off, 3, 'u', 'v3-3'],
      [7 + off, 1, 'c', 'v1-7'],
    ];
    await append(third);
    apply(third);
    await run(runIds.r4);
    const before = { files: listing(), commits: await current() };
    const blocked = await ledger(['rollback', '--run-id', runIds.r3, '--config', conf()]);
    expect(blocked.code, blocked.stderr).toBe(65);
    expect(blocked.status.error.code).toBe('ROLLBACK_BLOCKED');
    expect(blocked.status.error.message).toContain(runIds.r4);
    expect(blocked.status.rollback.blockedBy.map((b: any) => b.runId)).toContain(runIds.r4);
    expect({ files: listing(), commits: await current() }).toEqual(before);

    const cascade = await ledger(['rollback', '--run-id', runIds.r3, '--config', conf(), '--cascade']);
    expect(cascade.code, cascade.stderr).toBe(0);
    expect(cascade.status.rollback.runs.sort()).toEqual([runIds.r3, runIds.r4].sort());
    expect(state()).toEqual(afterFirst);
  }, 600_000);

  it('a run id nothing wrote is 66; another tenant’s table is refused (78)', async () => {
    const none = await ledger(['rollback', '--run-id', 'no-such-run', '--config', conf()]);
    expect(none.code, none.stderr).toBe(66);
    const foreign = await ledger(['rollback', '--run-id', runIds.r1, '--tenant', other.id, '--table', silver]);
    expect(foreign.code, foreign.stderr).toBe(78);
    expect(foreign.status.error.code).toBe('TENANT_POLICY');
    // The real CLI process, as an orchestrator starts it.
    const h = await ledger(['history', silver, '--tenant', other.id], true);
    expect(h.code, h.stderr).toBe(78);
    // The server's wall, too: a session bound to the other tenant cannot roll this tenant's table back.
    const before = await current();
    const session = await runSession(platformConfig(), tenantContext(other.id, other.root));
    try {
      const undo =
        format === 'iceberg'
          ? `CALL lake.system.rollback_to_snapshot(table => '${tenant.id}_silver.${table}', snapshot_id => ${before[silver]})`
          : `RESTORE TABLE ${silver} TO VERSION AS OF 0`;
      await expect(session.execute(compileCommandPlan(sqlCommand({ text: undo, reads: [], writes: [] } as never), { reveal: true }))).rejects.toThrow(
        /refused by the tenant policy|outside the tenant/,
      );
    } finally {
      await releaseSession(session);
    }
    expect(await current()).toEqual(before);
  }, 300_000);
});
