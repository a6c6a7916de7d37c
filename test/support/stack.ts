import { afterAll, beforeAll } from 'vitest';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isOutputMetric } from '../../src/core/metrics.js';
import { parseConnectionString } from '../../src/spark/connection.js';
import { SparkConnectClient } from '../../src/spark/client.js';
import type { PlatformConfig } from '../../src/core/config/platform.js';
import type { TenantContext } from '../../src/core/tenant.js';
import { bindTenant } from '../../src/runner/tenant-logic.js';
import { requireNeed } from './needs.js';

/** Helpers for integration tests against the project's own local stack. */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export function remote(): string {
  requireNeed('the shared Spark Connect server', 'spark', 'spark-cluster');
  return process.env.SPARK_REMOTE ?? 'sc://127.0.0.1:15002';
}

export function connect(): SparkConnectClient {
  const spec = parseConnectionString(remote());
  if (spec.kind !== 'remote') throw new Error('SPARK_REMOTE must be an sc:// address');
  return SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-tests' });
}

/**
 * A session for one run, bound to its tenant as the runner binds its own (src/runner/tenant-logic.ts):
 * the server judges its every plan against the tenant. The caller releases it.
 */
export async function runSession(platform: PlatformConfig, tenant: TenantContext): Promise<SparkConnectClient> {
  const client = connect();
  await bindTenant(client, platform, tenant);
  return client;
}

/** Release and close a session (after a run, also a failed one). */
export async function releaseSession(client: SparkConnectClient | undefined): Promise<void> {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
}

/**
 * One client for a test file's tests: connected before them, its session released after them;
 * `set` receives it (a file keeps it in its own variable).
 */
export function useClient(set: (client: SparkConnectClient) => void): void {
  let client: SparkConnectClient | undefined;
  beforeAll(() => {
    client = connect();
    set(client);
  });
  afterAll(async () => {
    await client?.releaseSession().catch(() => undefined);
    client?.close();
  });
}

/**
 * The Spark Connect server on the stack's standalone cluster (scripts/spark-connect start --cluster),
 * for a file's tests in the seeds' shape (tables on the object store, executors in JVMs of their
 * own): LAKEHOUSE_CLUSTER_REMOTE when set (a server someone else runs, e.g. the second server of a
 * parallel run), else started here on LAKEHOUSE_CLUSTER_PORT (default: the test server's port + 2;
 * its master on SPARK_MASTER_PORT or 7077) and stopped after the file unless LAKEHOUSE_KEEP_SPARK=1.
 */
export function useClusterRemote(set: (remote: string) => void): void {
  let started: string | undefined;
  beforeAll(() => {
    if (process.env.LAKEHOUSE_CLUSTER_REMOTE) return set(process.env.LAKEHOUSE_CLUSTER_REMOTE);
    const port = process.env.LAKEHOUSE_CLUSTER_PORT ?? String(Number(process.env.SPARK_CONNECT_PORT ?? 15002) + 2);
    const script = join(repoRoot, 'scripts/spark-connect');
    let running = true;
    try {
      execFileSync('bash', [script, 'status', '--port', port], { stdio: 'ignore' });
    } catch {
      running = false;
    }
    // With its History Server, as the spark-cluster need starts it (scripts/test-plan.mjs).
    const out = execFileSync('bash', [script, 'start', '--cluster', '--history', '--port', port], {
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 900_000,
    }).toString();
    if (!running) started = port;
    set(out.trim().split('\n').pop()!);
  }, 900_000);
  afterAll(() => {
    if (started && process.env.LAKEHOUSE_KEEP_SPARK !== '1')
      execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'stop', '--port', started], { stdio: 'inherit' });
  }, 120_000);
}

/**
 * The text of the shared server's log (`scripts/spark-connect log`), where the project's plugins
 * record what the platform sees of the tenants' work (the scheduler pool of each of their jobs): the
 * server must be this stack's own, on this machine.
 */
export function serverLog(): string {
  const spec = parseConnectionString(remote());
  if (spec.kind !== 'remote') throw new Error('SPARK_REMOTE must be an sc:// address');
  const path = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'log', '--port', String(spec.port)])
    .toString()
    .trim();
  return readFileSync(path, 'utf8');
}

/** The local stack's lake (Iceberg JDBC catalog on SQLite + warehouse). */
export function lakeHome(): string {
  return execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'warehouse'])
    .toString()
    .trim();
}

/** The local stack's Iceberg REST catalog (scripts/iceberg-rest, port ICEBERG_REST_PORT): the Spark catalog "rest". */
export function icebergRestUri(): string {
  requireNeed('the REST catalog', 'iceberg-rest');
  return execFileSync('bash', [join(repoRoot, 'scripts/iceberg-rest'), 'uri'])
    .toString()
    .trim();
}

/** Where PyIceberg finds a catalog of the local stack: "lake" is the SQLite file, "rest" the REST server. */
function pyIcebergCatalog(catalog: string): string {
  if (catalog === 'rest') return icebergRestUri();
  if (catalog === 'lake') return lakeHome();
  throw new Error(`no PyIceberg reader for the catalog ${catalog}`);
}

/** Where a test's tenant keeps its files: a local folder, or the stack's object store (scripts/object-store). */
export type Storage = 'file' | 's3';

/**
 * A tenant nobody else uses, with a storage root of its own: a fresh temp directory, or a fresh
 * prefix of the object store's bucket `lake` (`s3a://lake/<id>`).
 */
export function freshTenant(storage: Storage = 'file'): { id: string; root: string } {
  const id = `it_${randomBytes(4).toString('hex')}`;
  if (storage === 's3') return { id, root: `s3a://lake/${id}` };
  const dir = mkdtempSync(join(tmpdir(), `lakehouse-${id}-`));
  return { id, root: `file://${dir}` };
}

let storeEnv: Record<string, string> | undefined;
/**
 * The object store as the readers reach it: its endpoint and the platform's key (the file
 * scripts/object-store wrote at its first start), for the Python readers' own S3 clients.
 */
export function objectStoreEnv(): Record<string, string> {
  if (storeEnv) return storeEnv;
  const store = join(repoRoot, 'scripts/object-store');
  const endpoint = execFileSync('bash', [store, 'endpoint']).toString().trim();
  const keyFile = execFileSync('bash', [store, 'credentials']).toString().trim();
  const key = Object.fromEntries(
    readFileSync(keyFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  ) as Record<string, string>;
  storeEnv = {
    LAKEHOUSE_S3_ENDPOINT: endpoint,
    AWS_ACCESS_KEY_ID: key.AWS_ACCESS_KEY_ID!,
    AWS_SECRET_ACCESS_KEY: key.AWS_SECRET_ACCESS_KEY!,
    // pyarrow's AWS SDK asks for checksums by default (x-amz-checksum-mode), which S3Proxy 2.6 answers
    // with 501 NotImplemented: only where the request needs them, as S3 itself did before 2025.
    AWS_REQUEST_CHECKSUM_CALCULATION: 'when_required',
    AWS_RESPONSE_CHECKSUM_VALIDATION: 'when_required',
  };
  return storeEnv;
}

/** Does this test server reach the object store? (the need object-store starts it) */
export function objectStoreRunning(): boolean {
  try {
    execFileSync('bash', [join(repoRoot, 'scripts/object-store'), 'status'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A script of test/support run by the independent readers' Python (scripts/py-tools): its stdout. */
function pyTool(script: string, ...args: string[]): string {
  requireNeed('reading with the Python readers', 'py-tools');
  // A table may be on the object store (a catalog's table too): the readers get its endpoint and key
  // when it has been started.
  let s3: Record<string, string> = {};
  try {
    s3 = objectStoreEnv();
  } catch {
    // No object store on this machine: only local tables to read.
  }
  return execFileSync('bash', [join(repoRoot, 'scripts/py-tools'), 'python', join(repoRoot, 'test/support', script), ...args], {
    env: { ...process.env, ...s3 },
  }).toString();
}

/** The objects under an s3a:// location, listed by pyarrow's S3 client (paths relative to it, sorted). */
export function objectsUnder(uri: string): { path: string; size: number }[] {
  return jsonLines(pyTool('object_store.py', 'list', uri)) as { path: string; size: number }[];
}

/** Write one object from a local file, through pyarrow's S3 client. */
export function putObject(uri: string, localFile: string): void {
  pyTool('object_store.py', 'put', uri, localFile);
}

/** A directory marker (a zero-byte `<key>/` object), as S3A's mkdirs leaves them. */
export function objectStoreMkdir(uri: string): void {
  pyTool('object_store.py', 'mkdir', uri);
}

/** Delete every object under an s3a:// location. */
export function removeObjects(uri: string): void {
  pyTool('object_store.py', 'delete', uri);
}

const jsonLines = (text: string): Record<string, unknown>[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const deltaPath = (path: string) => path.replace(/^file:\/\//, '');

/** Rows of an Iceberg table read by PyIceberg, not by Spark (from the catalog "lake" unless named). */
export function readIcebergWithPyIceberg(namespace: string, table: string, catalog = 'lake'): Record<string, unknown>[] {
  return jsonLines(pyTool('read_iceberg.py', pyIcebergCatalog(catalog), namespace, table));
}

/**
 * Rows of several tables, read by PyIceberg in one process (a Python start is seconds on a loaded
 * machine): of one namespace, or `<namespace>.<table>` for a table of another.
 */
export function readIcebergTablesWithPyIceberg(namespace: string, tables: readonly string[], catalog = 'lake'): Record<string, Record<string, unknown>[]> {
  return JSON.parse(pyTool('read_iceberg.py', pyIcebergCatalog(catalog), namespace, tables.join(','))) as Record<string, Record<string, unknown>[]>;
}

/** Each table's partition spec (source column, transform) and properties, as PyIceberg reads its metadata. */
export function icebergShapesWithPyIceberg(
  namespace: string,
  tables: readonly string[],
  catalog = 'lake',
): Record<string, { spec: { column: string; transform: string }[]; properties: Record<string, string>; formatVersion: number }> {
  return JSON.parse(pyTool('read_iceberg.py', pyIcebergCatalog(catalog), namespace, tables.join(','), 'shape')) as never;
}

/** Rows a DuckDB query returns (the readers' DuckDB with httpfs, iceberg and delta loaded; s3:// reaches the object store). */
export function queryWithDuckDb(sql: string): Record<string, unknown>[] {
  return jsonLines(pyTool('read_duckdb.py', sql));
}

/** Rows of a Delta table read by delta-rs, not by Spark. */
export function readDeltaWithDeltaRs(path: string): Record<string, unknown>[] {
  return jsonLines(pyTool('read_delta.py', deltaPath(path)));
}

/** Rows of several Delta tables, read by delta-rs in one process, by the paths given. */
export function readDeltaTablesWithDeltaRs(paths: readonly string[]): Record<string, Record<string, unknown>[]> {
  const rows = JSON.parse(pyTool('read_delta.py', '--many', ...paths.map(deltaPath))) as Record<string, Record<string, unknown>[]>;
  return Object.fromEntries(paths.map((p) => [p, rows[deltaPath(p)] ?? []]));
}

/** Each Delta table's partition columns and configuration, as delta-rs reads its log, by the paths given. */
export function deltaShapesWithDeltaRs(paths: readonly string[]): Record<string, { partitionColumns: string[]; configuration: Record<string, string> }> {
  const found = JSON.parse(pyTool('read_delta.py', '--shape', ...paths.map(deltaPath))) as Record<
    string,
    { partitionColumns: string[]; configuration: Record<string, string> }
  >;
  return Object.fromEntries(paths.map((p) => [p, found[deltaPath(p)]!]));
}

/** The current snapshot's summary of an Iceberg table, read by PyIceberg. */
export function icebergSnapshotSummary(namespace: string, table: string, catalog = 'lake'): Record<string, string> {
  return JSON.parse(pyTool('read_iceberg.py', pyIcebergCatalog(catalog), namespace, table, 'summary')) as Record<string, string>;
}

/** Every commit of a Delta table's log (version, operation), oldest first, and its rows, read by delta-rs in one process. */
export function deltaLogWithDeltaRs(path: string): { commits: { version: number; operation: string }[]; rows: Record<string, unknown>[] } {
  return JSON.parse(pyTool('read_delta.py', '--log', deltaPath(path))) as never;
}

/** The latest commit info of a Delta table, read by delta-rs. */
export function deltaLastCommit(path: string): Record<string, unknown> {
  return JSON.parse(pyTool('read_delta.py', deltaPath(path), 'history')) as Record<string, unknown>;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI's node flags (scripts/build/node-flags, one a line), as the image's entrypoint runs it. */
const cliNodeFlags = readFileSync(join(repoRoot, 'scripts/build/node-flags'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));

/**
 * Start the CLI as a real child process, as an orchestrator would. In the integration tier, the
 * bundle the image ships (dist/cli.mjs, which the integration setup builds when it is not current,
 * and says so in LAKEHOUSE_TEST_CLI) with the image's node flags; in the unit tier, which builds
 * nothing, the sources through tsx.
 */
export function spawnCli(args: string[], env: Record<string, string> = {}): { child: ChildProcess; done: Promise<CliResult> } {
  const cli =
    process.env.LAKEHOUSE_TEST_CLI === 'bundle'
      ? [...cliNodeFlags, join(repoRoot, 'dist/cli.mjs')]
      : ['--import', `file://${repoRoot}node_modules/tsx/dist/loader.mjs`, join(repoRoot, 'src/cli.ts')];
  const child = spawn(process.execPath, [...cli, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const done = new Promise<CliResult>((resolve, reject) =>
    child.on('close', (code) => {
      // Every status a test gets is held to the documented metrics (src/core/metrics.ts).
      const undefinedMetrics = undocumentedMetrics(stdout);
      if (undefinedMetrics.length)
        reject(new Error(`status of ${args.join(' ')} has metrics that docs/contracts.md does not define: ${undefinedMetrics.join(', ')}`));
      else resolve({ code, stdout, stderr });
    }),
  );
  return { child, done };
}

/** The `outputs[].metrics` names of a status document on stdout that OUTPUT_METRICS lacks (none for other output). */
export function undocumentedMetrics(stdout: string): string[] {
  let status: { schema?: unknown; outputs?: { metrics?: Record<string, unknown> }[] };
  try {
    status = JSON.parse(stdout);
  } catch {
    return [];
  }
  return status?.schema === 'lakehouse-jobs/status/v1' ? outputMetricsUndefined(status.outputs ?? []) : [];
}

/** The metric names of these outputs that OUTPUT_METRICS lacks. */
export function outputMetricsUndefined(outputs: readonly { metrics?: Record<string, unknown> }[]): string[] {
  return [...new Set(outputs.flatMap((o) => Object.keys(o.metrics ?? {})).filter((m) => !isOutputMetric(m)))];
}

/** Run the CLI to its end. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return spawnCli(args, env).done;
}

/**
 * The CLI runs one job config with a platform config on the test server (`args` adds --set,
 * --logical-date, …); the status document it wrote to its --status-file comes back with the result.
 */
export async function runJob(config: string, platform: string, args: readonly string[] = [], on = remote()): Promise<CliResult & { status: any }> {
  const statusFile = join(mkdtempSync(join(tmpdir(), 'lakehouse-jobs-status-')), 'status.json');
  const r = await runCli(['--config', config, '--env', platform, '--remote', on, '--status-file', statusFile, ...args]);
  return { ...r, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}
