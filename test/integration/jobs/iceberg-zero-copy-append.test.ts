import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { MARKER } from '../../../src/jobs/ops/iceberg-zero-copy-append.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { asLakehouseError } from '../../../src/core/errors.js';
import { createLogger } from '../../../src/core/logger.js';
import { executePlan } from '../../../src/runner/executor.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, lakeHome, readIcebergWithPyIceberg, repoRoot, runJob, releaseSession, runSession } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * iceberg-zero-copy-append through the real CLI on the local stack (whose server runs the
 * project's plugin, spark-plugins/). Every result is read back with PyIceberg: the rows, the
 * snapshot summary's marker, and the file paths (the target references the source's files, none
 * is copied). Every refusal leaves the target at the same snapshot.
 */

const tenant = freshTenant();
const other = freshTenant();
const ns = `${tenant.id}_silver`;
let client: SparkConnectClient;
let dir: string;

const platform = () => `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
`;

async function sql(statement: string): Promise<void> {
  await client.execute(compileCommandPlan(testCommand(statement), { reveal: true }));
}

/** An Iceberg v2 table of the tenant's silver layer at its layout location (or `location`). */
async function createTable(table: string, columns: string, opts: { partitionedBy?: string; location?: string; props?: string } = {}): Promise<void> {
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${ns}`);
  await sql(
    `CREATE TABLE lake.${ns}.${table} (${columns}) USING iceberg ${opts.partitionedBy ? `PARTITIONED BY (${opts.partitionedBy})` : ''}
     LOCATION '${opts.location ?? `${tenant.root}/silver/${table}`}'
     TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read'${opts.props ?? ''})`,
  );
}

interface Files {
  snapshot_id: string | null;
  summary: Record<string, string>;
  location: string;
  data: string[];
  deletes: string[];
}

/** The table's current snapshot and live files, by PyIceberg. */
function files(table: string): Files {
  const out = execFileSync('bash', [join(repoRoot, 'scripts/py-tools'), 'python', join(repoRoot, 'test/support/iceberg_files.py'), lakeHome(), ns, table]);
  return JSON.parse(out.toString()) as Files;
}

function rows(table: string): { id: number; name: string }[] {
  return readIcebergWithPyIceberg(ns, table)
    .map((r) => ({ id: Number(r.id), name: String(r.name) }))
    .sort((a, b) => a.id - b.id);
}

async function run(source: string, target: string, extra: string[] = []) {
  const config = join(dir, `job-${source}-${target}.conf`);
  const text = `
job    { template = "iceberg-zero-copy-append", schema-version = 1, name = "it-zero-copy" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "${source}" }
target { table = "${target}", catalog = "lake" }
`;
  execFileSync('bash', ['-c', 'cat > "$1"', '_', config], { input: text });
  return runJob(config, join(dir, 'platform.conf'), ['--run-id', `it__${source}`, ...extra]);
}

/** Run, expect the refusal's exit code and config path, and the target at the same snapshot. */
async function refused(source: string, target: string, exitCode: number, path: string, message: RegExp) {
  const before = files(target);
  const { code, status, stderr } = await run(source, target);
  expect(code, stderr).toBe(exitCode);
  expect(status.error.path).toBe(path);
  expect(status.error.message).toMatch(message);
  expect(status.completedSteps).not.toContain('append');
  const after = files(target);
  expect(after.snapshot_id).toBe(before.snapshot_id);
  expect(after.data).toEqual(before.data);
  return status;
}

beforeAll(async () => {
  dir = tempFiles({ 'platform.conf': platform() });
  client = connect();
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${ns}`);
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

/** One run in process on its own session, paused before its append until `gate` opens. */
async function runPaused(source: string, target: string, runId: string, gate: { arrive: () => Promise<void> }) {
  const cfg = tempFiles({
    'job.conf': `
job    { template = "iceberg-zero-copy-append", schema-version = 1, name = "it-zero-copy" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "${source}" }
target { table = "${target}", catalog = "lake" }`,
    'platform.conf': platform(),
  });
  const job = await loadJob({ configFile: join(cfg, 'job.conf'), envFile: join(cfg, 'platform.conf'), overrides: [], env: {}, runId });
  const session = await runSession(job.platform, job.tenant);
  try {
    const r = await executePlan(job.plan, {
      session,
      logger: createLogger('warn'),
      tags: ['it-zero-copy'],
      signal: new AbortController().signal,
      beforeStep: async (step) => {
        if (step.id === 'append') await gate.arrive();
      },
    });
    return { code: 0, outputs: r.outputs };
  } catch (e) {
    return { code: asLakehouseError(e).exitCode, message: asLakehouseError(e).message, outputs: [] };
  } finally {
    await releaseSession(session);
  }
}

/** A gate that opens when `n` runs have arrived at it. */
function barrier(n: number) {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    arrive: async () => {
      if (++arrived === n) open();
      await opened;
    },
  };
}

// Each test creates its tables and runs the CLI: minutes on a loaded 2-core machine.
describe('iceberg-zero-copy-append on the real stack', { timeout: 900_000 }, () => {
  it("appends the source's live files by reference, position deletes included; a rerun appends nothing", async () => {
    await createTable('src', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.src VALUES (1, 'one'), (2, 'two'), (3, 'three')`);
    await sql(`INSERT INTO lake.${ns}.src VALUES (4, 'four')`);
    await sql(`DELETE FROM lake.${ns}.src WHERE id = 2`); // merge-on-read: a position delete file
    await createTable('dst', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.dst VALUES (10, 'ten')`);
    const source = files('src');
    const before = files('dst');
    expect(source.deletes).toHaveLength(1);
    const listData = () => readdirSync(new URL(`${tenant.root}/silver/dst/data`)).sort();
    const targetDataDir = listData();

    const { code, status, stderr } = await run('src', 'dst');
    expect(code, stderr).toBe(0);
    const after = files('dst');
    expect(status.outputs).toEqual([
      expect.objectContaining({
        table: `lake.${ns}.dst`,
        format: 'iceberg',
        location: `${tenant.root}/silver/dst`,
        committed: true,
        snapshotId: after.snapshot_id,
        metrics: { dataFiles: source.data.length, deleteFiles: 1, records: 4 },
      }),
    ]);
    // PyIceberg: the source's live rows after the target's own, deletes applied.
    expect(rows('dst')).toEqual([
      { id: 1, name: 'one' },
      { id: 3, name: 'three' },
      { id: 4, name: 'four' },
      { id: 10, name: 'ten' },
    ]);
    // Zero copy: the target references exactly the source's files at their paths, nothing new is written under it.
    expect(after.data).toEqual([...before.data, ...source.data].sort());
    expect(after.deletes).toEqual(source.deletes);
    expect(listData()).toEqual(targetDataDir);
    // The marker: which source snapshot this commit holds, and the run.
    expect(after.summary).toMatchObject({
      [MARKER.sourceSnapshot]: source.snapshot_id,
      [MARKER.sourceTable]: `\`lake\`.\`${ns}\`.\`src\``,
      [MARKER.runId]: 'it__src',
      'lakehouse-jobs.run-id': 'it__src',
    });
    expect(after.summary[MARKER.sourceUuid]).toMatch(/^[0-9a-f-]{36}$/);

    // A rerun (the orchestrator retrying after success): exit 0, nothing appended, same snapshot.
    const rerun = await run('src', 'dst');
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.status.outputs[0]).toMatchObject({ committed: false, snapshotId: after.snapshot_id, metrics: { alreadyAppended: 1 } });
    expect(rerun.status.completedSteps).not.toContain('append');
    expect(files('dst').snapshot_id).toBe(after.snapshot_id);
    expect(rows('dst')).toHaveLength(4);
  });

  it('a source that took more appends after its append: the rerun adds only their files; an empty append adds nothing; any other change is 65', async () => {
    await createTable('grow_src', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.grow_src VALUES (1, 'one'), (2, 'two')`);
    await createTable('grow_dst', 'id BIGINT, name STRING');
    expect((await run('grow_src', 'grow_dst')).code).toBe(0);
    // An append of nothing (an INSERT whose query finds no row) is a new source snapshot without files.
    await sql(`INSERT INTO lake.${ns}.grow_src SELECT * FROM lake.${ns}.grow_src WHERE id < 0`);
    const empty = await run('grow_src', 'grow_dst');
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.status.outputs[0]).toMatchObject({ committed: false, metrics: { alreadyAppended: 1 } });
    await sql(`INSERT INTO lake.${ns}.grow_src VALUES (3, 'three')`);
    const more = await run('grow_src', 'grow_dst');
    expect(more.code, more.stderr).toBe(0);
    expect(more.status.outputs[0]).toMatchObject({ committed: true, metrics: { dataFiles: 1, records: 1 } });
    // PyIceberg: every source row once.
    expect(rows('grow_dst')).toEqual(rows('grow_src'));
    expect(files('grow_dst').data).toEqual(files('grow_src').data);
    // A delete in the source since: its files can no longer be told from what the target holds.
    await sql(`DELETE FROM lake.${ns}.grow_src WHERE id = 1`);
    await sql(`INSERT INTO lake.${ns}.grow_src VALUES (4, 'four')`);
    const before = files('grow_dst').snapshot_id;
    const status = await refused('grow_src', 'grow_dst', 65, 'source.table', /no append \(operation (?:delete|overwrite)\)/);
    expect(status.error.code).toBe('ZERO_COPY_SOURCE_CHANGED');
    expect(files('grow_dst').snapshot_id).toBe(before);
    expect(rows('grow_dst').map((r) => r.id)).toEqual([1, 2, 3]);
  });

  it('refuses schemas that look alike but differ by field id (65), target unchanged', async () => {
    await createTable('ids_src', 'id BIGINT, d STRING, name STRING');
    await sql(`ALTER TABLE lake.${ns}.ids_src DROP COLUMN d`);
    await sql(`ALTER TABLE lake.${ns}.ids_src ADD COLUMN d STRING`);
    await sql(`INSERT INTO lake.${ns}.ids_src VALUES (1, 'one', 'x')`);
    await createTable('ids_dst', 'id BIGINT, name STRING, d STRING');
    await sql(`INSERT INTO lake.${ns}.ids_dst VALUES (9, 'nine', 'y')`);
    const status = await refused('ids_src', 'ids_dst', 65, 'source.table', /field id/);
    expect(status.error.code).toBe('ZERO_COPY_SCHEMA_MISMATCH');
  });

  it("refuses a source whose field-id counter is ahead of the target's (a dropped column) (65)", async () => {
    await createTable('lcid_src', 'id BIGINT, name STRING, tmp STRING');
    await sql(`ALTER TABLE lake.${ns}.lcid_src DROP COLUMN tmp`);
    await sql(`INSERT INTO lake.${ns}.lcid_src VALUES (1, 'one')`);
    await createTable('lcid_dst', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.lcid_dst VALUES (9, 'nine')`);
    const status = await refused('lcid_src', 'lcid_dst', 65, 'source.table', /field ids up to 3.*only up to 2/);
    expect(status.error.code).toBe('ZERO_COPY_LAST_COLUMN_ID');
  });

  it('refuses a source with live equality deletes (65), target unchanged', async () => {
    await createTable('eq_src', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.eq_src VALUES (1, 'one'), (2, 'two')`);
    const sparkHome = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'spark-home'])
      .toString()
      .trim();
    const jars = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'jars'])
      .toString()
      .trim();
    execFileSync('java', ['-cp', `${sparkHome}/jars/*:${jars}/*`, join(repoRoot, 'test/support/IcebergEqualityDeletes.java'), lakeHome(), ns, 'eq_src', '2'], {
      stdio: 'pipe',
    });
    await createTable('eq_dst', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.eq_dst VALUES (2, 'the target own two')`);
    const status = await refused('eq_src', 'eq_dst', 65, 'source.table', /1 live equality delete file/);
    expect(status.error.code).toBe('ZERO_COPY_EQUALITY_DELETES');
    expect(status.error.hint).toMatch(/rewrite_data_files/);
  });

  it('refuses partition specs that differ (65 at target.table), target unchanged', async () => {
    await createTable('part_src', 'id BIGINT, name STRING', { partitionedBy: 'bucket(4, id)' });
    await sql(`INSERT INTO lake.${ns}.part_src VALUES (1, 'one'), (2, 'two')`);
    await createTable('part_dst', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.part_dst VALUES (9, 'nine')`);
    const status = await refused('part_src', 'part_dst', 65, 'target.table', /partitioned by \[bucket\[4\]\(id #1\)\], the target by nothing/);
    expect(status.error.code).toBe('ZERO_COPY_PARTITION_SPEC');
  });

  it('appends between tables with the same partition spec', async () => {
    await createTable('psame_src', 'id BIGINT, name STRING', { partitionedBy: 'bucket(4, id)' });
    await sql(`INSERT INTO lake.${ns}.psame_src VALUES (1, 'one'), (2, 'two'), (3, 'three')`);
    await createTable('psame_dst', 'id BIGINT, name STRING', { partitionedBy: 'bucket(4, id)' });
    const { code, stderr } = await run('psame_src', 'psame_dst');
    expect(code, stderr).toBe(0);
    expect(files('psame_dst').data).toEqual(files('psame_src').data);
    expect(rows('psame_dst').map((r) => r.id)).toEqual([1, 2, 3]);
    // Partition pruning in the target sees the partition tuples the source recorded. This test's
    // session caches Iceberg tables (the runner's does not): it loaded psame_dst before the run.
    await sql(`REFRESH TABLE lake.${ns}.psame_dst`);
    const only2 = await client.execute(compileRelationPlan(testQuery(`SELECT count(*) AS n FROM lake.${ns}.psame_dst WHERE id = 2`).rel, { reveal: true }));
    expect(Number(only2.table?.toArray()[0]?.n)).toBe(1);
  });

  it("refuses a source table whose files lie under another tenant's storage (78), target unchanged", async () => {
    // The attack: a table in this tenant's namespace that references another tenant's files,
    // here by importing them (add_files); appending it would adopt those files into our table.
    await client.execute(
      compileCommandPlan(
        testCommand(`INSERT OVERWRITE DIRECTORY '${other.root}/private/secrets' USING parquet SELECT CAST(7 AS BIGINT) AS id, 'secret' AS name`),
        { reveal: true },
      ),
    );
    await createTable('adopt_src', 'id BIGINT, name STRING');
    await sql(`CALL lake.system.add_files(table => '${ns}.adopt_src', source_table => '\`parquet\`.\`${other.root}/private/secrets\`')`);
    await createTable('adopt_dst', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.adopt_dst VALUES (9, 'nine')`);
    const status = await refused('adopt_src', 'adopt_dst', 78, 'source.table', /outside the tenant's storage roots/);
    expect(JSON.stringify(status)).not.toContain(other.root);
    expect(rows('adopt_dst')).toEqual([{ id: 9, name: 'nine' }]);

    // And a source table located in the other tenant's storage altogether.
    await createTable('elsewhere', 'id BIGINT, name STRING', { location: `${other.root}/silver/elsewhere` });
    await sql(`INSERT INTO lake.${ns}.elsewhere VALUES (8, 'eight')`);
    await refused('elsewhere', 'adopt_dst', 78, 'source.table', /outside the tenant's storage roots/);
  });

  it("refuses a target that is not at the tenant's layout (78), and missing tables (66)", async () => {
    await createTable('moved_dst', 'id BIGINT, name STRING', { location: `${tenant.root}/somewhere/else` });
    await sql(`INSERT INTO lake.${ns}.moved_dst VALUES (9, 'nine')`);
    await createTable('moved_src', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.moved_src VALUES (1, 'one')`);
    await refused('moved_src', 'moved_dst', 78, 'target.table', /not at .*tenant's layout/);
    const missing = await run('no_such_source', 'moved_dst');
    expect(missing.code).toBe(66);
    expect(missing.status.error.path).toBe('source.table');
    const noTarget = await run('moved_src', 'no_such_target');
    expect(noTarget.code).toBe(66);
    expect(noTarget.status.error.path).toBe('target.table');
  });

  it('skips (99) a source without data files', async () => {
    await createTable('empty_src', 'id BIGINT, name STRING');
    await createTable('empty_dst', 'id BIGINT, name STRING');
    const { code, status } = await run('empty_src', 'empty_dst');
    expect(code).toBe(99);
    expect(status.status).toBe('skipped');
    expect(files('empty_dst').snapshot_id).toBeNull();
  });

  it('two runs of the same append at once (an orchestrator retry beside the run it retries) append the files once', async () => {
    await createTable('race_src', 'id BIGINT, name STRING');
    await sql(`INSERT INTO lake.${ns}.race_src VALUES (1, 'one'), (2, 'two')`);
    for (const round of [1, 2, 3]) {
      const target = `race_dst${round}`;
      await createTable(target, 'id BIGINT, name STRING');
      await sql(`INSERT INTO lake.${ns}.${target} VALUES (10, 'ten')`);
      const gate = barrier(2);
      const runs = await Promise.all([runPaused('race_src', target, `it-race-${round}`, gate), runPaused('race_src', target, `it-race-${round}`, gate)]);
      // One appends; the other appends nothing (the marker) or stops with 75 and its rerun appends nothing.
      expect(runs.map((r) => r.code).sort(), JSON.stringify(runs)).toSatisfy((codes: number[]) => codes[0] === 0 && [0, 75].includes(codes[1]!));
      const rerun = await run('race_src', target);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(rerun.status.outputs[0]).toMatchObject({ committed: false, metrics: { alreadyAppended: 1 } });
      expect(rows(target), `round ${round}`).toEqual([
        { id: 1, name: 'one' },
        { id: 2, name: 'two' },
        { id: 10, name: 'ten' },
      ]);
    }
  });
});
