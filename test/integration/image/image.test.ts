import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, readIcebergWithPyIceberg, remote, repoRoot } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'container', 'py-tools');

/**
 * The real container image, built with podman from a base made of Debian packages
 * (scripts/container), run the way orchestrators run it: `podman run --network host` against the
 * local Spark Connect server. The server (on the host) reads and writes the tenant's files; the
 * container only reads its config and writes its status, XCom and termination files, as uid 1000.
 */

const IMAGE = process.env.LAKEHOUSE_IMAGE ?? 'localhost/lakehouse-jobs:test';
const script = join(repoRoot, 'scripts/container');
const tenant = freshTenant();
let client: SparkConnectClient;
let dir: string;
const started: string[] = [];

const BRONZE = `
SELECT id, name, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
       '${tenant.id}' AS _lake_tenant, 'it.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at,
       CAST(d AS DATE) AS _snapshot_date
FROM VALUES
  (1, 'one',   '1.10', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (1, 'one*',  '1.20', '2026-07-05 09:00:00', 'u', '2026-07-05'),
  (2, 'two',   '2.00', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (3, 'three', '3.00', '2026-07-05 08:00:00', 'c', '2026-07-05'),
  (3, 'three', '3.00', '2026-07-05 10:00:00', 'd', '2026-07-05')
AS t(id, name, amount, ts, op, d)`;

const files = {
  'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1, name = "img-orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-04'" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }
`,
  'platform.conf': `
catalogs { lake { format = iceberg, default = true } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
`,
  // Two problems at once: a missing required key and an unknown one.
  'broken.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc" }
cdc    { sequence-by = "ts", primry-key = ["id"] }
target { table = "orders", catalog = "lake" }
`,
  // source.where is evaluated by Spark for each row: hashing a long string for each of 2M rows keeps
  // the job busy for minutes (config expressions may not use subqueries).
  'slow.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events", where = "sha2(repeat(CAST(id * 1 AS STRING), 20000), 512) <> ''" }
cdc    { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`,
};

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `podman run --rm --network host` of the image; mounts are host dir → container dir. */
function podmanRun(name: string, mounts: Record<string, string>, args: string[]): { child: ChildProcess; done: Promise<Run> } {
  const volumes = Object.entries(mounts).flatMap(([host, ctr]) => ['--volume', `${host}:${ctr}`]);
  started.push(name);
  const child = spawn('bash', [script, 'podman', 'run', '--rm', '--name', name, '--network', 'host', ...volumes, IMAGE, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const done = new Promise<Run>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done };
}

/** A directory the container's non-root user (uid 1000) may write. */
function writableDir(path: string): string {
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o777);
  return path;
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

beforeAll(async () => {
  const t0 = Date.now();
  for (const step of ['setup', 'base', 'build']) {
    const r = spawnSync('bash', [script, step], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 1_200_000, maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`scripts/container ${step} failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
    for (const line of r.stderr.split('\n')) if (line.startsWith('container: ')) console.log(line);
  }
  const size = execFileSync('bash', [script, 'size', IMAGE]).toString().trim();
  console.log(`image ${IMAGE}: ${size}; setup + base + build took ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  dir = tempFiles(files);
  chmodSync(dir, 0o777);
  // The container's user (uid 1000) reads the configs whatever the umask they were written with.
  for (const name of Object.keys(files)) chmodSync(join(dir, name), 0o644);
  client = connect();
  await client.execute(
    compileCommandPlan(testQuery(BRONZE).writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite', partitionBy: ['_snapshot_date'] }), {
      reveal: true,
    }),
  );
  const events = testQuery(`SELECT id, TIMESTAMP'2026-07-05 00:00:00' AS ts, 'x' AS v FROM range(2000000)`).writeFiles(
    `${tenant.root}/bronze/events`,
    'parquet',
    { mode: 'overwrite' },
  );
  await client.execute(compileCommandPlan(events, { reveal: true }));
}, 1_500_000);

afterAll(async () => {
  for (const name of started) spawnSync('bash', [script, 'podman', 'rm', '--force', '--ignore', name], { stdio: 'ignore' });
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('container image', () => {
  it('runs cdc-silver-merge: exit 0, status on stdout, in the status file and in the Airflow XCom file; table readable by PyIceberg', async () => {
    const xcom = writableDir(join(dir, 'xcom'));
    const t0 = Date.now();
    const { done } = podmanRun(`lakehouse-it-ok-${tenant.id}`, { [dir]: '/conf', [xcom]: '/airflow/xcom' }, [
      '--job',
      'cdc-silver-merge',
      '--config',
      '/conf/job.conf',
      '--env',
      '/conf/platform.conf',
      '--remote',
      remote(),
      '--set',
      `source.where="_snapshot_date = '2026-07-05'"`,
      '--run-id',
      'scheduled__2026-07-05T00:00:00+00:00',
      '--logical-date',
      '2026-07-05',
      '--status-file',
      '/conf/status.json',
    ]);
    const r = await done;
    console.log(`cdc-silver-merge in the container: ${Date.now() - t0} ms`);
    expect(r.code, r.stderr).toBe(0);
    const status = readJson(join(dir, 'status.json'));
    expect(JSON.parse(r.stdout)).toEqual(status);
    expect(readJson(join(xcom, 'return.json'))).toEqual(status);
    expect(status).toMatchObject({
      status: 'succeeded',
      exitCode: 0,
      runId: 'scheduled__2026-07-05T00:00:00+00:00',
      logicalDate: '2026-07-05',
      outputs: [{ table: `lake.${tenant.id}_silver.orders`, format: 'iceberg', metrics: { inserted: 2, deleted: 0 } }],
    });
    const rows = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders')
      .map((row) => ({ id: Number(row.id), name: row.name }))
      .sort((a, b) => a.id - b.id);
    expect(rows).toEqual([
      { id: 1, name: 'one*' },
      { id: 2, name: 'two' },
    ]);
  });

  it('a broken config exits 78 with a failed status listing every problem', async () => {
    const term = writableDir(join(dir, 'term-broken'));
    const { done } = podmanRun(`lakehouse-it-78-${tenant.id}`, { [dir]: '/conf', [term]: '/term' }, [
      '--config',
      '/conf/broken.conf',
      '--remote',
      remote(),
      '--status-file',
      '/conf/status-broken.json',
      '--termination-log',
      '/term/message',
    ]);
    const r = await done;
    expect(r.code, r.stderr).toBe(78);
    const status = readJson(join(dir, 'status-broken.json'));
    expect(JSON.parse(r.stdout)).toEqual(status);
    expect(status).toMatchObject({ status: 'failed', exitCode: 78, error: { category: 'config', retryable: false } });
    const paths = (status.error.issues as { path: string }[]).map((i) => i.path);
    // The misspelled required key is one problem, reported at the misspelling with its fix.
    expect(paths).toContain('cdc.primry-key');
    expect(paths).not.toContain('cdc.primary-key');
    const message = readFileSync(join(term, 'message'));
    expect(message.length).toBeLessThanOrEqual(4096);
    expect(JSON.parse(message.toString())).toMatchObject({ status: 'failed', exitCode: 78 });
  });

  it('podman stop during a long job: the Spark operation is interrupted, exit 143 and a cancelled status within 20 s', async () => {
    const term = writableDir(join(dir, 'term-stop'));
    const name = `lakehouse-it-stop-${tenant.id}`;
    const { child, done } = podmanRun(name, { [dir]: '/conf', [term]: '/term' }, [
      '--config',
      '/conf/slow.conf',
      '--remote',
      remote(),
      '--status-file',
      '/conf/status-stop.json',
      '--termination-log',
      '/term/message',
      '--run-id',
      'it_image_stop',
    ]);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const deadline = Date.now() + 90_000;
    while (!stderr.includes('"step":"check-batch"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(stderr, 'the first Spark step never started').toContain('"step":"check-batch"');
    await new Promise((r) => setTimeout(r, 2_000));
    const sentAt = Date.now();
    const stop = spawnSync('bash', [script, 'podman', 'stop', '-t', '20', name], { encoding: 'utf8', timeout: 60_000 });
    expect(stop.status, stop.stderr).toBe(0);
    const r = await done;
    const elapsedMs = Date.now() - sentAt;
    console.log(`podman stop -> container exit: ${elapsedMs} ms`);
    expect(r.code, r.stderr).toBe(143);
    expect(elapsedMs).toBeLessThan(20_000);
    const status = readJson(join(dir, 'status-stop.json'));
    expect(status).toMatchObject({ status: 'cancelled', exitCode: 143, error: { code: 'CANCELLED', retryable: true }, runId: 'it_image_stop' });
    // The server's answer to Interrupt: exactly the operation the run had in flight.
    // The server confirms it interrupted exactly the operation the run had in flight (the last one).
    expect(status.spark.operationIds.length).toBeGreaterThanOrEqual(1);
    expect(status.spark.interruptedOperationIds).toEqual([status.spark.operationIds.at(-1)]);
    expect(JSON.parse(readFileSync(join(term, 'message'), 'utf8'))).toMatchObject({ status: 'cancelled', exitCode: 143 });
    // The interrupted operation no longer holds the server.
    const q0 = Date.now();
    const { compileRelationPlan } = await import('../../../src/spark/plan/compile.js');
    expect((await client.execute(compileRelationPlan(testQuery('SELECT 1 AS one').rel, { reveal: true }))).rowCount).toBe(1);
    expect(Date.now() - q0).toBeLessThan(10_000);
  });

  it('ping: one round trip from a cold container (container start → first RPC)', async () => {
    const t0 = Date.now();
    const { done } = podmanRun(`lakehouse-it-ping-${tenant.id}`, {}, ['ping', '--remote', remote()]);
    const r = await done;
    console.log(`container start → first RPC (podman run … ping): ${Date.now() - t0} ms`);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ serverVersion: expect.stringMatching(/^4\./) });
  });

  it('holds node, its shared libraries, CA certificates, tini and the bundle, nothing else; runs as uid 1000', () => {
    const size = Number(execFileSync('bash', [script, 'podman', 'image', 'inspect', '--format', '{{.Size}}', IMAGE]).toString().trim());
    expect(size).toBeLessThanOrEqual(150e6);
    // The image has no shell and no ls: node itself lists the files (podman adds /etc/hosts and friends, /dev, /proc, /sys, /run).
    const list = `const fs = require('fs'), p = require('path'); const out = [];
      const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const f = p.join(d, e.name);
        if (['/proc', '/sys', '/dev', '/run'].includes(f)) continue; if (e.isDirectory()) walk(f); else out.push(f); } };
      walk('/'); console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), files: out }));`;
    const r = spawnSync('bash', [script, 'podman', 'run', '--rm', '--entrypoint', '/usr/local/bin/node', IMAGE, '-e', list], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const { uid, gid, files } = JSON.parse(r.stdout) as { uid: number; gid: number; files: string[] };
    expect({ uid, gid }).toEqual({ uid: 1000, gid: 1000 });
    const podmanAdds = new Set(['/etc/hosts', '/etc/hostname', '/etc/resolv.conf', '/etc/mtab', '/.containerenv', '/run/.containerenv']);
    const unexpected = files.filter(
      (f) =>
        !podmanAdds.has(f) &&
        !/^\/usr\/local\/bin\/(node|tini)$/.test(f) &&
        !/^(\/usr)?\/lib(64|\/x86_64-linux-gnu|\/aarch64-linux-gnu)?\/(ld-linux[^/]*|lib[^/]+\.so[.0-9]*)$/.test(f) &&
        !/^\/etc\/(passwd|group|ssl\/certs\/ca-certificates\.crt)$/.test(f) &&
        !/^\/app\/(package\.json|dist\/[^/]+\.(mjs|mjs\.map|js|js\.map|js\.v8cache|LEGAL\.txt))$/.test(f),
    );
    expect(unexpected).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['/usr/local/bin/node', '/usr/local/bin/tini', '/app/dist/cli.mjs', '/etc/ssl/certs/ca-certificates.crt']));
    expect(files.some((f) => /\/(sh|bash|npm)$/.test(f) || f.includes('node_modules'))).toBe(false);
  });

  it('--remote local in the image exits 64 and says a remote must be configured', async () => {
    const { done } = podmanRun(`lakehouse-it-local-${tenant.id}`, { [dir]: '/conf' }, ['--config', '/conf/job.conf', '--remote', 'local']);
    const r = await done;
    expect(r.code, r.stderr).toBe(64);
    const status = JSON.parse(r.stdout);
    expect(status).toMatchObject({ status: 'failed', exitCode: 64 });
    expect(status.error.message).toMatch(/container image.*SPARK_REMOTE/);
  });
});
