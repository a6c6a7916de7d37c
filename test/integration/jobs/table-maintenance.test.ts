import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../../src/jobs/template.js';
import type { ExecutionReport } from '../../../src/runner/executor.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import {
  type Storage,
  connect,
  deltaLastCommit,
  freshTenant,
  lakeHome,
  objectStoreEnv,
  readDeltaWithDeltaRs,
  readIcebergWithPyIceberg,
  repoRoot,
  runJob,
} from '../../support/stack.js';
import { runInProcess } from '../../support/in-process.js';
import { fileExists, filesUnder, writeFileAt } from '../../support/storage.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'object-store', 'py-tools');

/**
 * table-maintenance on the local stack: many small files compacted (Iceberg and Delta), snapshots
 * expired, orphan files removed, VACUUM, on a local folder and on the object store (S3A); the file
 * counts and the rows read back with PyIceberg and delta-rs; a dry run changes nothing; hostile configs exit 78 naming the path and leave the table
 * as it was; a maintenance run interleaved with a cdc-silver-merge loses none of its commits and
 * none of its tombstones.
 *
 * Orphan files: Iceberg refuses `older_than` under 24 hours unless the server runs with
 * spark.testing (the local stack does not, and a session cannot set it). The schema keeps 24 hours
 * as a minimum, so these tests plant orphan files and date them three days back.
 */
let dir: string;
let client: SparkConnectClient;

const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));

interface Stats {
  files: number;
  paths: string[];
  snapshots?: string[];
  current?: string;
  version?: number;
}
function icebergStats(namespace: string, table: string): Stats {
  const out = execFileSync(
    'bash',
    [join(repoRoot, 'scripts/py-tools'), 'python', join(repoRoot, 'test/support/table_stats.py'), 'iceberg', lakeHome(), namespace, table],
    { env: { ...process.env, ...objectStoreEnvIfAny() } },
  );
  return JSON.parse(out.toString()) as Stats;
}
function deltaStats(path: string): Stats {
  const out = execFileSync(
    'bash',
    [join(repoRoot, 'scripts/py-tools'), 'python', join(repoRoot, 'test/support/table_stats.py'), 'delta', path.replace(/^file:\/\//, '')],
    { env: { ...process.env, ...objectStoreEnvIfAny() } },
  );
  return JSON.parse(out.toString()) as Stats;
}
const objectStoreEnvIfAny = () => {
  try {
    return objectStoreEnv();
  } catch {
    return {};
  }
};

/** A tenant (and a victim tenant) on a storage, and the helpers bound to them. */
function fixture(storage: Storage) {
  const tenant = freshTenant(storage);
  const victim = freshTenant(storage);
  const ns = `${tenant.id}_silver`;
  const icebergRows = (table: string) => readIcebergWithPyIceberg(ns, table).sort((a, b) => Number(a.id) - Number(b.id));
  const deltaRows = (table: string) => readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`).sort((a, b) => Number(a.id) - Number(b.id));
  /** Parquet files in a Delta table's folder: VACUUM deletes them from storage, not only from the log. */
  const parquetFiles = (table: string) => filesUnder(`${tenant.root}/silver/${table}`).filter((f) => /^\/[^/]+\.parquet$/.test(f));

  /** A table with `n` small files: one INSERT (one commit, one file) per row group. */
  async function smallFiles(table: string, format: 'iceberg' | 'delta', n: number) {
    const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
    await sql(`CREATE NAMESPACE IF NOT EXISTS \`${catalog}\`.\`${ns}\``);
    await sql(
      `CREATE TABLE \`${catalog}\`.\`${ns}\`.\`${table}\` (id bigint, ts bigint, v string) USING ${format} LOCATION '${tenant.root}/silver/${table}'${format === 'iceberg' ? " TBLPROPERTIES ('format-version' = '2')" : ''}`,
    );
    for (let i = 0; i < n; i++) await sql(`INSERT INTO \`${catalog}\`.\`${ns}\`.\`${table}\` VALUES (${i}, ${i}, 'v${i}')`);
  }

  /**
   * An orphan file in the table's data folder. On a local folder it is dated three days back (the
   * orphan check goes by age); an object's time is its upload's and cannot be set, so on S3 it is
   * young: a file of a job that has not committed yet looks like that, and must survive.
   */
  function plantOrphan(table: string): string {
    const file = `${tenant.root}/silver/${table}/data/orphan-${Math.random().toString(36).slice(2)}.parquet`;
    writeFileAt(file, 'not referenced by any snapshot', storage === 'file' ? 72 : 0);
    return file;
  }

  const header = (tenantId = tenant.id, root = tenant.root) => `
job    { template = "table-maintenance", schema-version = 1, name = "it-maintenance" }
tenant { id = "${tenantId}", storage-root = "${root}" }
`;

  /** `grants`: more keys of the tenant's platform entry (read-namespaces, read-roots). */
  const platform = (floor: number, grants = '') =>
    `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"]${grants} }, ${victim.id} { storage-roots = ["${victim.root}"] } }
maintenance { retention-floor-hours = ${floor} }`;

  async function run(config: string, opts: { floor?: number; set?: string[]; grants?: string } = {}) {
    const name = `job-${Math.random().toString(36).slice(2)}`;
    writeFileSync(join(dir, `${name}.conf`), config);
    writeFileSync(join(dir, `${name}.platform.conf`), platform(opts.floor ?? 0, opts.grants));
    return runJob(
      join(dir, `${name}.conf`),
      join(dir, `${name}.platform.conf`),
      (opts.set ?? []).flatMap((s) => ['--set', s]),
    );
  }
  return { tenant, victim, ns, icebergRows, deltaRows, parquetFiles, smallFiles, plantOrphan, header, platform, run };
}

// The hostile-config and concurrency suites run on a local folder; the maintenance actions on both.
const onFile = fixture('file');
const { tenant, victim, ns, icebergRows, smallFiles, header, platform, run } = onFile;

beforeAll(async () => {
  dir = tempFiles({});
  client = connect();
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

const icebergPolicy = `{
    layer = silver, table = "events"
    compact { strategy = binpack, min-input-files = 2 }
    rewrite-manifests = true
    expire-snapshots { older-than-hours = 0, retain-last = 2 }
    remove-orphan-files { older-than-hours = 48 }
  }`;
const deltaPolicy = `{
    layer = silver, table = "events_d", catalog = "spark_catalog", format = delta
    compact { strategy = zorder, zorder-by = ["id"] }
    vacuum { retain-hours = 0 }
  }`;

describe.each(['file', 's3'] as const)('table-maintenance on Iceberg and Delta (%s)', (storage) => {
  const f = storage === 'file' ? onFile : fixture('s3');
  const { tenant, ns, icebergRows, deltaRows, parquetFiles, smallFiles, plantOrphan, header, run } = f;
  /** Orphans planted on a local folder are old enough to go; on S3 they are young and stay. */
  const orphans = storage === 'file' ? 1 : 0;
  let icebergBefore: Record<string, unknown>[];
  let deltaBefore: Record<string, unknown>[];
  let orphan: string;
  /** Small files per table, as PyIceberg and delta-rs count them before maintenance. */
  let files: { iceberg: number; delta: number };

  it('a dry run measures and lists, and changes nothing', async () => {
    await smallFiles('events', 'iceberg', 5);
    await smallFiles('events_d', 'delta', 5);
    orphan = plantOrphan('events');
    icebergBefore = icebergRows('events');
    deltaBefore = deltaRows('events_d');
    const ice = icebergStats(ns, 'events');
    const del = deltaStats(`${tenant.root}/silver/events_d`);
    expect(ice.files).toBeGreaterThanOrEqual(5);
    expect(ice.snapshots).toHaveLength(5);
    expect(del.files).toBeGreaterThanOrEqual(5);
    files = { iceberg: ice.files, delta: del.files };

    const r = await run(`${header()}\ntables = [ ${icebergPolicy}, ${deltaPolicy} ]`, { set: ['dry-run=true'] });
    expect(r.code, r.stderr).toBe(0);
    const [i, d] = r.status.outputs;
    expect(i).toMatchObject({
      table: `lake.${ns}.events`,
      format: 'iceberg',
      committed: false,
      metrics: { filesBefore: files.iceberg, snapshotsBefore: 5, snapshotsExpirable: 3, orphanFiles: orphans },
    });
    expect(i.metrics.bytesBefore).toBeGreaterThan(0);
    expect(d).toMatchObject({
      table: `spark_catalog.${ns}.events_d`,
      format: 'delta',
      committed: false,
      metrics: { filesBefore: files.delta, vacuumFiles: 0 },
    });
    // Nothing was sent that changes a table: no compaction, expiry, removal or OPTIMIZE step ran.
    expect(r.status.completedSteps.filter((s: string) => /^(compact|rewrite|expire|remove|optimize|vacuum)-/.test(s))).toEqual([]);
    expect(icebergStats(ns, 'events')).toEqual(ice);
    expect(deltaStats(`${tenant.root}/silver/events_d`)).toEqual(del);
    expect(fileExists(orphan)).toBe(true);
    expect(icebergRows('events')).toEqual(icebergBefore);
  });

  it('Iceberg: compacts the small files into 1, rewrites manifests, expires snapshots, removes the old orphan (keeps a young one); rows identical', async () => {
    const r = await run(`${header()}\ntables = [ ${icebergPolicy} ]`);
    expect(r.code, r.stderr).toBe(0);
    const out = r.status.outputs[0];
    expect(out).toMatchObject({
      table: `lake.${ns}.events`,
      committed: true,
      metrics: { filesBefore: files.iceberg, filesAfter: 1, orphanFiles: orphans, snapshotsAfter: 2 },
    });
    expect(out.metrics.bytesAfter).toBeGreaterThan(0);
    const after = icebergStats(ns, 'events');
    expect(after.files).toBe(1);
    expect(after.snapshots).toHaveLength(2);
    expect(fileExists(orphan)).toBe(storage !== 'file');
    expect(icebergRows('events')).toEqual(icebergBefore);
    // The compacted files are gone from storage too (expired with the snapshots that held them).
    const data = filesUnder(`${tenant.root}/silver/events/data`).filter((p) => p.endsWith('.parquet') && !p.includes('/orphan-'));
    expect(data).toHaveLength(1);
    // A rerun with nothing to compact, rewrite, expire or remove commits nothing, and says so.
    const rerun = await run(`${header()}\ntables = [ ${icebergPolicy} ]`);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.status.outputs[0]).toMatchObject({ committed: false, metrics: { filesBefore: 1, filesAfter: 1, snapshotsBefore: 2, snapshotsAfter: 2 } });
    expect(icebergStats(ns, 'events')).toMatchObject({ current: after.current, snapshots: after.snapshots });
  });

  it('Delta: OPTIMIZE ZORDER BY compacts the small files into 1, VACUUM deletes them from storage; rows identical', async () => {
    expect(parquetFiles('events_d')).toHaveLength(files.delta);
    const r = await run(`${header()}\ntables = [ ${deltaPolicy} ]`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0]).toMatchObject({
      table: `spark_catalog.${ns}.events_d`,
      committed: true,
      metrics: { filesBefore: files.delta, filesAfter: 1, vacuumFiles: files.delta },
    });
    expect(deltaStats(`${tenant.root}/silver/events_d`).files).toBe(1);
    expect(parquetFiles('events_d')).toHaveLength(1);
    expect(deltaRows('events_d')).toEqual(deltaBefore);
    // A rerun with nothing written since: Delta's ZORDER would rewrite the one file again; it is not sent (delta-rs: no new version).
    const last = deltaLastCommit(`${tenant.root}/silver/events_d`);
    const rerun = await run(`${header()}\ntables = [ ${deltaPolicy} ]`);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.status.completedSteps).not.toContain('optimize-0');
    expect(rerun.status.outputs[0]).toMatchObject({ committed: false, metrics: { filesBefore: 1, filesAfter: 1, vacuumFiles: 0 } });
    expect(deltaLastCommit(`${tenant.root}/silver/events_d`).version).toBe(last.version);
  });
});

// The strategies rewrite files whatever the storage: on a local folder only.
describe('table-maintenance compaction strategies', () => {
  it('Iceberg sort and zorder strategies rewrite the files sorted; rows identical', async () => {
    await smallFiles('sorted', 'iceberg', 3);
    const before = icebergRows('sorted');
    const sort = await run(
      `${header()}\ntables = [ { layer = silver, table = "sorted", compact { strategy = sort, sort-by = [{ column = "ts", direction = desc, nulls = last }, "id"], rewrite-all = true, target-file-size-mb = 64 } } ]`,
    );
    expect(sort.code, sort.stderr).toBe(0);
    expect(sort.status.outputs[0].metrics).toMatchObject({ filesBefore: 3, filesAfter: 1 });
    const zorder = await run(
      `${header()}\ntables = [ { layer = silver, table = "sorted", compact { strategy = zorder, zorder-by = ["id", "ts"], rewrite-all = true } } ]`,
    );
    expect(zorder.code, zorder.stderr).toBe(0);
    expect(icebergStats(ns, 'sorted').files).toBe(1);
    expect(icebergRows('sorted')).toEqual(before);
  });
});

describe('hostile configs: 78 with the path, the table unchanged', () => {
  it('a retention below the platform floor', async () => {
    await smallFiles('guarded', 'iceberg', 2);
    const before = icebergStats(ns, 'guarded');
    const r = await run(
      `${header()}\ntables = [ { layer = silver, table = "guarded", compact {}, expire-snapshots { older-than-hours = 1, retain-last = 1 } }, { layer = silver, table = "events_d", catalog = "spark_catalog", vacuum { retain-hours = 0 } } ]`,
      { floor: 24 },
    );
    expect(r.code).toBe(78);
    expect(r.status.error.issues.map((i: { path: string }) => i.path)).toEqual([
      'tables[0].expire-snapshots.older-than-hours',
      'tables[1].vacuum.retain-hours',
    ]);
    expect(r.status.error.message).toContain('retention floor of 24 hours');
    expect(icebergStats(ns, 'guarded')).toEqual(before);
  });

  it("another tenant's table: a table of the tenant's namespace at the victim's storage is refused, the victim's files untouched", async () => {
    // A table registered by name in the attacker's namespace, its files at the victim's root.
    await sql(`CREATE NAMESPACE IF NOT EXISTS \`lake\`.\`${ns}\``);
    await sql(`CREATE TABLE \`lake\`.\`${ns}\`.\`borrowed\` (id bigint) USING iceberg LOCATION '${victim.root}/silver/orders'`);
    for (let i = 0; i < 2; i++) await sql(`INSERT INTO \`lake\`.\`${ns}\`.\`borrowed\` VALUES (${i})`);
    const victimOrphan = join(victim.root.replace(/^file:\/\//, ''), 'silver', 'orders', 'data', 'keep-me.parquet');
    writeFileSync(victimOrphan, 'the victim’s file');
    const old = new Date(Date.now() - 72 * 3_600_000);
    utimesSync(victimOrphan, old, old);
    const before = icebergStats(ns, 'borrowed');
    const r = await run(
      `${header()}\ntables = [ { layer = silver, table = "borrowed", compact { rewrite-all = true }, expire-snapshots { older-than-hours = 0, retain-last = 1 }, remove-orphan-files { older-than-hours = 48 } } ]`,
    );
    expect(r.code).toBe(78);
    expect(r.status.error.path ?? r.status.error.issues[0].path).toBe('tables[0].table');
    expect(r.status.error.message).toContain(`${tenant.root}/silver/borrowed`);
    expect(icebergStats(ns, 'borrowed')).toEqual(before);
    expect(existsSync(victimOrphan)).toBe(true);
  });

  it("the victim's id with the attacker's storage root: refused by the platform's tenants", async () => {
    const r = await run(`${header(victim.id, tenant.root)}\ntables = [ { layer = silver, table = "events", compact {} } ]`);
    expect(r.code).toBe(78);
    expect(r.status.error.issues[0].path).toBe('tenant.storage-root');
  });

  it('a sort column the table lacks, and a Delta action on an Iceberg table', async () => {
    const before = icebergStats(ns, 'guarded');
    const r1 = await run(`${header()}\ntables = [ { layer = silver, table = "guarded", compact { strategy = sort, sort-by = ["nope"] } } ]`);
    expect(r1.code).toBe(78);
    expect(r1.status.error.issues[0].path).toBe('tables[0].compact.sort-by[0]');
    const r2 = await run(`${header()}\ntables = [ { layer = silver, table = "guarded", vacuum { retain-hours = 200 } } ]`);
    expect(r2.code).toBe(78);
    expect(r2.status.error.issues[0].path).toBe('tables[0].vacuum');
    expect(icebergStats(ns, 'guarded')).toEqual(before);
  });

  it("a granted table's files adopted by zero-copy append: expiring the adopter's snapshots is refused, the shared table keeps its files", async () => {
    // A shared reference table the platform grants the tenant for reading, at its own root.
    const shared = freshTenant();
    const sharedNs = `${shared.id}_ref`;
    const grants = `, read-namespaces = ["lake.${sharedNs}"], read-roots = ["${shared.root}"]`;
    const sharedData = () => readdirSync(join(shared.root.replace(/^file:\/\//, ''), 'ref', 'data')).filter((f) => f.endsWith('.parquet'));
    await sql(`CREATE NAMESPACE IF NOT EXISTS \`lake\`.\`${sharedNs}\``);
    await sql(
      `CREATE TABLE \`lake\`.\`${sharedNs}\`.\`ref\` (id bigint, v string) USING iceberg LOCATION '${shared.root}/ref' TBLPROPERTIES ('format-version' = '2')`,
    );
    await sql(`INSERT INTO \`lake\`.\`${sharedNs}\`.\`ref\` VALUES (1, 'shared one'), (2, 'shared two')`);
    await sql(`CREATE NAMESPACE IF NOT EXISTS \`lake\`.\`${ns}\``);
    await sql(
      `CREATE TABLE \`lake\`.\`${ns}\`.\`adopter\` (id bigint, v string) USING iceberg LOCATION '${tenant.root}/silver/adopter' TBLPROPERTIES ('format-version' = '2')`,
    );
    // The tenant appends the shared table's files to its own table by reference (what the grant allows) …
    const append = `
job    { template = "iceberg-zero-copy-append", schema-version = 1, name = "it-adopt" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { namespace = "${sharedNs}", table = "ref" }
target { table = "adopter", catalog = "lake" }
`;
    const files = sharedData();
    expect(files.length).toBeGreaterThan(0);
    const adopted = await run(append, { grants });
    expect(adopted.code, adopted.stderr).toBe(0);
    expect(adopted.status.outputs[0]).toMatchObject({ committed: true, metrics: { dataFiles: files.length } });
    // … then replaces its own table's rows (any write of its own: a full refresh, a delete) …
    await sql(`DELETE FROM \`lake\`.\`${ns}\`.\`adopter\``);
    await sql(`INSERT INTO \`lake\`.\`${ns}\`.\`adopter\` VALUES (9, 'own')`);
    const before = icebergStats(ns, 'adopter');
    // … and expires the snapshots that held the shared file: expire_snapshots would delete it from the shared table.
    const r = await run(
      `${header()}\ntables = [ { layer = silver, table = "adopter", compact { rewrite-all = true }, expire-snapshots { older-than-hours = 0, retain-last = 1 } } ]`,
      { grants },
    );
    expect(r.code, r.stderr).toBe(78);
    expect(r.status.error.issues[0].path).toBe('tables[0].expire-snapshots');
    expect(r.status.error.message).toContain(`references ${files.length} file(s) outside its location`);
    // No path of the shared table in what the tenant sees.
    expect(JSON.stringify(r.status)).not.toContain(shared.root);
    expect(r.status.completedSteps.filter((s: string) => /^(compact|expire)-/.test(s))).toEqual([]);
    expect(icebergStats(ns, 'adopter')).toEqual(before);
    expect(sharedData()).toEqual(files);
    expect(
      readIcebergWithPyIceberg(sharedNs, 'ref')
        .map((row) => String(row.v))
        .sort(),
    ).toEqual(['shared one', 'shared two']);
    // Its other actions still run without the expiry.
    const compact = await run(`${header()}\ntables = [ { layer = silver, table = "adopter", compact { rewrite-all = true } } ]`, { grants });
    expect(compact.code, compact.stderr).toBe(0);
    expect(sharedData()).toEqual(files);
  });

  it('a table that does not exist: 66, nothing created', async () => {
    const r = await run(`${header()}\ntables = [ { layer = gold, table = "missing", compact {} } ]`);
    expect(r.code).toBe(66);
  });
});

// ---------------------------------------------------------------------------------------------
// With cdc-silver-merge: tombstones kept, no commit lost, the snapshots a merge made kept.

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const DAY0 = '2026-04-01'; // keys 1..20 inserted at sequence 1
const A = '2026-04-02'; // deletes 1..5, updates 6..10 at sequence 10
const LATE = '2026-04-03'; // late upserts of the deleted keys: must stay deleted
const batches: Record<string, [number, number, string, string][]> = {
  [DAY0]: range(1, 20).map((k) => [k, 1, 'c', `v1-${k}`]),
  [A]: [
    ...range(1, 5).map((k): [number, number, string, string] => [k, 10, 'd', `del-${k}`]),
    ...range(6, 10).map((k): [number, number, string, string] => [k, 10, 'u', `upd-${k}`]),
  ],
  [LATE]: range(1, 5).map((k) => [k, 5, 'u', `late-${k}`]),
};
const oracle = [...range(6, 10).map((k) => ({ id: k, ts: 10, v: `upd-${k}` })), ...range(11, 20).map((k) => ({ id: k, ts: 1, v: `v1-${k}` }))];

/** One job run in this process (the shared in-process runner), with a hook before each step. */
async function inProcess(
  config: string,
  floor: number,
  set: string[],
  beforeStep?: (s: Step) => Promise<void>,
): Promise<{ code: number; report: ExecutionReport }> {
  const name = `inproc-${Math.random().toString(36).slice(2)}`;
  writeFileSync(join(dir, `${name}.conf`), config);
  writeFileSync(join(dir, `${name}.platform.conf`), platform(floor));
  const o = await runInProcess(
    { configFile: join(dir, `${name}.conf`), envFile: join(dir, `${name}.platform.conf`), overrides: set, env: {}, runId: `it-maint-${name}` },
    beforeStep,
  );
  return { code: o.code, report: o.report };
}

const mergeConfig = (format: 'iceberg' | 'delta', table: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-maint-merge" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${table}", format = ${format}, catalog = "${format === 'iceberg' ? 'lake' : 'spark_catalog'}" }
`;
const merge = (format: 'iceberg' | 'delta', table: string, date: string, beforeStep?: (s: Step) => Promise<void>) =>
  inProcess(mergeConfig(format, table), 1, [`source.where="_snapshot_date = DATE'${date}'"`], beforeStep);

const maintenanceConfig = (format: 'iceberg' | 'delta', table: string) =>
  `${header()}\ntables = [ ${[table, `${table}__cdc_tombstones`]
    .map((t) =>
      format === 'iceberg'
        ? `{ layer = silver, table = "${t}", compact { rewrite-all = true }, rewrite-manifests = true, expire-snapshots { older-than-hours = 1, retain-last = 1 }, remove-orphan-files { older-than-hours = 48 } }`
        : `{ layer = silver, table = "${t}", catalog = "spark_catalog", compact {}, vacuum { retain-hours = 1 } }`,
    )
    .join(', ')} ]`;
const maintain = (format: 'iceberg' | 'delta', table: string, beforeStep?: (s: Step) => Promise<void>) =>
  inProcess(maintenanceConfig(format, table), 1, [], beforeStep);

function silverRows(format: 'iceberg' | 'delta', table: string) {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(ns, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) })).sort((a, b) => a.id - b.id);
}
function tombstones(format: 'iceberg' | 'delta', table: string) {
  const name = `${table}__cdc_tombstones`;
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(ns, name) : readDeltaWithDeltaRs(`${tenant.root}/silver/${name}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts) })).sort((a, b) => a.id - b.id);
}

/** Run X paused before `pauseAt` while Y runs to its end; a run that lost a commit race (75) is rerun, as an orchestrator would. */
async function interleave(
  x: (hook: (s: Step) => Promise<void>) => Promise<{ code: number; report: ExecutionReport }>,
  y: () => Promise<{ code: number }>,
  pauseAt: string,
  rerunX: () => Promise<{ code: number }>,
  rerunY: () => Promise<{ code: number }>,
) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let arrived!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  const first = x(async (s) => {
    if (s.id !== pauseAt) return;
    arrived();
    await gate;
  });
  await Promise.race([reached, first]);
  const second = await y();
  release();
  const firstOutcome = await first;
  const codes = [firstOutcome.code, second.code];
  for (const c of codes) expect([0, 75], `exit codes ${codes.join(', ')}`).toContain(c);
  if (firstOutcome.code === 75) expect((await rerunX()).code).toBe(0);
  if (second.code === 75) expect((await rerunY()).code).toBe(0);
  return { reached: firstOutcome.report.completedSteps.includes(pauseAt) || firstOutcome.report.failedStep === pauseAt, codes };
}

describe.each(['iceberg', 'delta'] as const)('with cdc-silver-merge on %s', (format) => {
  beforeAll(async () => {
    const rowsSql = (rows: [number, number, string, string][]) => rows.map(([id, ts, op, v]) => `(${id}, ${ts}, '${op}', '${v}')`).join(', ');
    if (format === 'iceberg')
      for (const [date, rows] of Object.entries(batches)) {
        const q = testQuery(
          `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM VALUES ${rowsSql(rows)} AS t(id, ts, op, v)`,
        );
        await client.execute(
          compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), {
            reveal: true,
          }),
        );
      }
  });

  it('maintenance paused before compacting while a merge commits: the merge, its snapshot and its tombstones survive; late events stay late', async () => {
    const table = `m1_${format}`;
    expect((await merge(format, table, DAY0)).code).toBe(0);
    let mergeSnapshot: string | undefined;
    const pause = format === 'iceberg' ? 'compact-0' : 'optimize-0';
    const r = await interleave(
      (hook) => maintain(format, table, hook),
      async () => {
        const m = await merge(format, table, A);
        mergeSnapshot = m.report.outputs[0]?.snapshotId;
        return m;
      },
      pause,
      () => maintain(format, table),
      () => merge(format, table, A),
    );
    expect(r.reached).toBe(true);
    expect(silverRows(format, table)).toEqual(oracle);
    expect(tombstones(format, table)).toEqual(range(1, 5).map((id) => ({ id, ts: 10 })));
    // The merge's snapshot is younger than the retention: expire_snapshots kept it.
    if (format === 'iceberg') expect(icebergStats(ns, table).snapshots).toContain(mergeSnapshot);
    // The tombstones still guard the deleted keys: late upserts change nothing.
    const late = await merge(format, table, LATE);
    expect(late.code).toBe(0);
    expect(late.report.outputs[0]?.metrics).toMatchObject({ inserted: 0, updated: 0, late: 5 });
    expect(silverRows(format, table)).toEqual(oracle);
  });

  it('a merge paused before its MERGE while maintenance runs: its commit is not lost', async () => {
    const table = `m2_${format}`;
    expect((await merge(format, table, DAY0)).code).toBe(0);
    const r = await interleave(
      (hook) => merge(format, table, A, hook),
      () => maintain(format, table),
      'merge',
      () => merge(format, table, A),
      () => maintain(format, table),
    );
    expect(r.reached).toBe(true);
    expect(silverRows(format, table)).toEqual(oracle);
    expect(tombstones(format, table)).toEqual(range(1, 5).map((id) => ({ id, ts: 10 })));
  });
});
