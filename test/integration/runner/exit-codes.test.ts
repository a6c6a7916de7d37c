import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { Query } from '../../../src/spark/plan/query.js';
import { SparkError } from '../../../src/spark/errors.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, remote, repoRoot, runCli, runJob } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'object-store', 'py-tools');

/**
 * Failures from the real server get their documented exit codes: bad source files 65 (naming the
 * file and column, with the fix), a missing JDBC source table 66, and the loser of two concurrent
 * commits 75 (retryable), for Iceberg and for Delta.
 */
let client: SparkConnectClient;
let second: SparkConnectClient;

beforeAll(() => {
  client = connect();
  second = connect();
});

afterAll(async () => {
  for (const c of [client, second]) {
    await c?.releaseSession().catch(() => undefined);
    c?.close();
  }
});

const localPath = (uri: string) => uri.replace(/^file:\/\//, '');

/** A cdc-silver-merge job of a fresh tenant whose bronze `events` the test fills. */
function cdcJob() {
  const tenant = freshTenant();
  const dir = tempFiles({
    'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`,
    'platform.conf': `catalogs { lake { format = iceberg, default = true } }`,
  });
  const bronze = `${tenant.root}/bronze/events`;
  const run = async () => {
    return runJob(join(dir, 'job.conf'), join(dir, 'platform.conf'));
  };
  return { tenant, bronze, run };
}

async function writeBronze(path: string, select: string) {
  await client.execute(compileCommandPlan(testQuery(select).writeFiles(path, 'parquet', { mode: 'append' }), { reveal: true }));
}

const EVENT = `SELECT 1L AS id, TIMESTAMP'2026-07-05 08:00:00' AS ts`;

describe('bad source files exit 65 with the file, the column and the fix', () => {
  it('a corrupt parquet file', async () => {
    const job = cdcJob();
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-05`, `${EVENT}, 'x' AS v`);
    const corrupt = `${localPath(job.bronze)}/_snapshot_date=2026-07-05/part-99999-corrupt.snappy.parquet`;
    writeFileSync(corrupt, Buffer.concat([Buffer.from('PAR1'), Buffer.alloc(256, 7)]));
    const r = await job.run();
    expect(r.code, r.stderr).toBe(65);
    expect(r.status.error).toMatchObject({ code: 'SOURCE_FILE_CORRUPT', category: 'data', retryable: false });
    expect(r.status.error.message).toContain('part-99999-corrupt.snappy.parquet');
    expect(r.status.error.hint).toMatch(/rerun the ingest/);
  });

  it('nanosecond timestamps (written by pyarrow)', async () => {
    const job = cdcJob();
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-04`, `${EVENT}, 'x' AS v`);
    const dir = `${localPath(job.bronze)}/_snapshot_date=2026-07-05`;
    execFileSync('bash', [
      join(repoRoot, 'scripts/py-tools'),
      'python',
      '-c',
      `
import os, sys, pyarrow as pa, pyarrow.parquet as pq
os.makedirs(sys.argv[1], exist_ok=True)
t = pa.table({"id": pa.array([1], pa.int64()), "ts": pa.array([1_000_000_000], pa.timestamp("ns")), "v": ["x"]})
pq.write_table(t, os.path.join(sys.argv[1], "nanos.parquet"), version="2.6", coerce_timestamps=None)
`,
      dir,
    ]);
    const r = await job.run();
    expect(r.code, r.stderr).toBe(65);
    expect(r.status.error).toMatchObject({ code: 'SOURCE_TYPE_UNSUPPORTED', category: 'data', retryable: false });
    // Spark names neither file nor column: the runner finds both.
    expect(r.status.error.message).toMatch(
      /^source file file:.*_snapshot_date=2026-07-05\/nanos\.parquet: column ts holds a Parquet type Spark cannot read \(nanosecond timestamps\)/,
    );
    expect(r.status.error.hint).toContain('coerce_timestamps="us"');
  });

  it('a column whose type differs between two bronze partitions', async () => {
    const job = cdcJob();
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-05`, `${EVENT}, 5 AS amount`);
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-06`, `SELECT 2L AS id, TIMESTAMP'2026-07-06 08:00:00' AS ts, 'five' AS amount`);
    const r = await job.run();
    expect(r.code, r.stderr).toBe(65);
    expect(r.status.error).toMatchObject({ code: 'SOURCE_TYPE_MISMATCH', category: 'data', retryable: false });
    // Schema merging (the template reads bronze with mergeSchema) names the column, not the file:
    // the runner finds the file.
    expect(r.status.error.message).toMatch(
      /^source file file:.*_snapshot_date=2026-07-0[56]\/part-[^ ]*\.parquet: column amount is (int|string) in this file, (string|int) in 1 other file of the source\. Fix: /,
    );
    expect(r.status.error.hint).toContain('cast');
    console.log('type clash:', r.status.error.message);
  });

  it('the same type clash read without schema merging names the file', async () => {
    const job = cdcJob();
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-05`, `${EVENT}, 5 AS amount`);
    await writeBronze(`${job.bronze}/_snapshot_date=2026-07-06`, `SELECT 2L AS id, TIMESTAMP'2026-07-06 08:00:00' AS ts, 'five' AS amount`);
    const e = await client.execute(compileRelationPlan(Query.read('parquet', { paths: [job.bronze] }).rel, { reveal: true })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SparkError);
    const err = e as SparkError;
    expect(err.exitCode).toBe(65);
    expect(err.code).toBe('SOURCE_TYPE_MISMATCH');
    expect(err.message).toMatch(/_snapshot_date=2026-07-0[56]\/part-.*\.parquet: column amount is/);
  });
});

describe('a missing JDBC source table exits 66', () => {
  it('SQLite: no such table', async () => {
    const t = freshTenant();
    const dbDir = tempFiles({});
    const db = join(dbDir, 'shop.db');
    execFileSync('python3', ['-c', 'import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE other (id INTEGER)")\ndb.commit()', db]);
    const dir = tempFiles({
      'job.conf': `
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders", url = "jdbc:sqlite:${db}", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-07-05" }
`,
    });
    const statusFile = join(dir, 'status.json');
    const r = await runCli(['--config', join(dir, 'job.conf'), '--remote', remote(), '--status-file', statusFile]);
    expect(r.code, r.stderr).toBe(66);
    expect(JSON.parse(readFileSync(statusFile, 'utf8')).error).toMatchObject({ code: 'SOURCE_TABLE_NOT_FOUND', category: 'input', retryable: false });
  });
});

describe('commit conflicts exit 75 (retryable)', () => {
  /**
   * Two sessions MERGE overlapping keys into the same table at once; with optimistic concurrency
   * one of them loses. The race is decided by the server, so the pair is repeated until one loses
   * (in practice the first time on this machine).
   */
  async function conflict(table: string): Promise<SparkError> {
    const failures: unknown[] = [];
    for (let round = 0; round < 6 && failures.length === 0; round++) {
      const merge = (c: SparkConnectClient, tag: string) =>
        c.execute(
          compileCommandPlan(
            testCommand(
              `MERGE INTO ${table} t USING (SELECT id, '${tag}${round}' AS v FROM range(0, 200)) s ON t.id = s.id ` +
                `WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *`,
            ),
            { reveal: true },
          ),
        );
      const results = await Promise.allSettled([merge(client, 'a'), merge(second, 'b')]);
      for (const r of results) if (r.status === 'rejected') failures.push(r.reason);
    }
    expect(failures.length).toBeGreaterThanOrEqual(1);
    for (const f of failures) expect(f).toBeInstanceOf(SparkError);
    return failures[0] as SparkError;
  }

  it('Iceberg: "Found conflicting files" of the loser is COMMIT_CONFLICT', async () => {
    const ns = `it_conflict_${Date.now()}`;
    const table = `lake.${ns}.t`;
    await client.execute(compileCommandPlan(testCommand(`CREATE NAMESPACE IF NOT EXISTS lake.${ns}`), { reveal: true }));
    await client.execute(
      compileCommandPlan(testCommand(`CREATE TABLE ${table} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('write.merge.mode' = 'copy-on-write')`), {
        reveal: true,
      }),
    );
    await client.execute(compileCommandPlan(testCommand(`INSERT INTO ${table} SELECT id, 'x' FROM range(200)`), { reveal: true }));
    const e = await conflict(table);
    console.log('iceberg conflict:', e.classes[0], e.message.slice(0, 120));
    expect(e).toMatchObject({ exitCode: 75, code: 'COMMIT_CONFLICT', retryable: true, category: 'transient' });
  });

  it('Delta: DELTA_CONCURRENT_* of the loser is COMMIT_CONFLICT', async () => {
    const t = freshTenant();
    const table = `delta.\`${t.root}/t\``;
    await client.execute(compileCommandPlan(testCommand(`CREATE TABLE ${table} (id BIGINT, v STRING) USING delta`), { reveal: true }));
    await client.execute(compileCommandPlan(testCommand(`INSERT INTO ${table} SELECT id, 'x' FROM range(200)`), { reveal: true }));
    const e = await conflict(table);
    console.log('delta conflict:', e.errorClass, e.classes[0]);
    expect(e).toMatchObject({ exitCode: 75, code: 'COMMIT_CONFLICT', retryable: true, category: 'transient' });
    expect(e.errorClass).toMatch(/^DELTA_CONCURRENT_/);
  });
});

/**
 * Object storage that fails: the stack's Spark settings ask the bucket "stale-key" with a key the
 * store does not know and "unreachable" at an address nothing listens on (scripts/stack/spark-connect.conf);
 * "nobucket" exists nowhere. Each run exits with the documented code within the retry budget, names
 * the tenant's root, and prints no key.
 */
describe('object storage failures', () => {
  const cases = [
    ['stale-key', 77, 'OBJECT_STORE_AUTH', 'permission'],
    ['nobucket', 66, 'OBJECT_STORE_BUCKET_MISSING', 'input'],
    ['unreachable', 69, 'OBJECT_STORE_UNAVAILABLE', 'unavailable'],
  ] as const;
  it.each(cases)('a root in bucket %s exits %i (%s), naming the root', async (bucket, exitCode, code, category) => {
    const id = freshTenant().id;
    const root = `s3a://${bucket}/${id}`;
    const dir = tempFiles({
      'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${id}", storage-root = "${root}" }
source { table = "events" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`,
      'platform.conf': `catalogs { lake { format = iceberg, default = true } }\ntenants { ${id} { storage-roots = ["${root}"] } }`,
    });
    const r = await runJob(join(dir, 'job.conf'), join(dir, 'platform.conf'));
    expect(r.code, r.stderr).toBe(exitCode);
    expect(r.status.error).toMatchObject({ code, category, retryable: exitCode === 69 });
    expect(r.status.error.message).toContain(root);
    expect(r.status.durationMs).toBeLessThan(120_000);
    const key = readFileSync(
      execFileSync('bash', [join(repoRoot, 'scripts/object-store'), 'credentials'])
        .toString()
        .trim(),
      'utf8',
    );
    for (const secret of key
      .split('\n')
      .map((l) => l.split('=')[1])
      .filter(Boolean)) {
      expect(r.stdout).not.toContain(secret);
      expect(r.stderr).not.toContain(secret);
    }
  });
});
