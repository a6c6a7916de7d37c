/**
 * bench/tenants (driver): sixteen tenants' runs on one Spark Connect server, mixed templates, a few
 * large and many small runs (issue 28 item 3), in passes side by side in one bench run:
 *
 *   seq   the sixteen runs one after the other (the FAIR server of the stack)
 *   fair  the sixteen runs at once, on the stack's server (spark.scheduler.mode = FAIR: each tenant's
 *         work in its own scheduler pool, spark-plugins/…/SchedulerPools.java)
 *   fifo  the sixteen runs at once on a server started with spark.scheduler.mode = FIFO (what the
 *         pools replace: each job waits for every task of the jobs submitted before it)
 *
 * Each pass has a server of its own (started fresh, its own lake, metastore and event log), the same
 * inputs prepared the same way (not measured), one warm-up run, then the sixteen measured runs. After
 * each pass every run's tables are read by the second engines (bench/tenants_digest.py: PyIceberg,
 * delta-rs, pyarrow) and compared with what the same tenant's run of the first pass produced: the same
 * rows, every column but the run's own time stamps. It reports, per pass: every run's exit code and
 * time to finish (from the pass's start), the total wall (seq: the sum; at once: the last finish), the
 * server's peak RSS and CPU seconds (its process group, sampled from /proc), the runs' peak RSS, and
 * from the server's event log the pool of every job: the jobs of the tenants' operations outside their
 * tenant's pool are counted (0 expected), as are the jobs no operation tagged (analysis) and theirs.
 *
 *   tsx bench/tenants.ts --work <dir>     (bench/tenants builds the bundle and sets the environment)
 *
 * Environment: BENCH_PORT (the server's port: this driver starts and stops it), BENCH_TENANTS_PASSES
 * (default seq,fair,fifo; the first pass is the reference of the read-back), BENCH_TENANTS_LARGE (rows
 * of a large run, default 500000).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCommandPlan } from '../src/spark/plan/compile.js';
import { QUICKSTART_ORDERS } from '../test/support/shop-source.js';
import { declareStarted } from '../test/support/needs.js';
import { connect } from '../test/support/stack.js';
import { testCommand, testQuery } from '../test/support/sql.js';
import { cliNodeFlags } from './node-flags.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const say = (s: string) => process.stderr.write(`bench/tenants: ${s}\n`);
declareStarted('spark', 'py-tools');

const PORT = Number(process.env.BENCH_PORT ?? 15002);
const LARGE = Number(process.env.BENCH_TENANTS_LARGE ?? 500_000);
const PASSES = (process.env.BENCH_TENANTS_PASSES ?? 'seq,fair,fifo').split(',').map((s) => s.trim()) as Pass[];
type Pass = 'seq' | 'fair' | 'fifo';
const DAY = '2026-07-05';
/** Columns that hold the time of the run that wrote them (the bronze stamp; scd2's load time). */
const VOLATILE = ['_lake_ingested_at', '_loaded_at', 'loaded_at', '_published_at'];

/** What a tenant runs: its template's config, what it needs before, and whether it is a large run. */
interface Kind {
  readonly name: string;
  readonly large?: boolean;
  /** The job config (after `job { … }` and `tenant { … }`). */
  readonly config: (t: Tenant) => string;
  /** Inputs prepared before the pass (not measured). */
  readonly prepare: (t: Tenant, p: Prep) => Promise<void>;
}
interface Tenant {
  readonly id: string;
  readonly root: string;
  readonly db: string;
  readonly kind: Kind;
}
interface Prep {
  sql(text: string): Promise<void>;
  writeBronze(t: Tenant, select: string): Promise<void>;
  sqlite(t: Tenant, rows: number | 'quickstart'): void;
}

const jdbc = (format: 'parquet' | 'iceberg' | 'delta', large = false): Kind => ({
  name: `jdbc-snapshot-ingest ${format}${large ? ` ${LARGE} rows` : ''}`,
  large,
  config: (t) => `job { template = "jdbc-snapshot-ingest", schema-version = ${format === 'parquet' ? 1 : 2}, name = "bench-ingest" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders_cdc", url = "jdbc:sqlite:${t.db}", driver = "org.sqlite.JDBC" }
target { table = "orders_cdc", snapshot-date = "${DAY}"${format === 'parquet' ? '' : `, format = ${format}, catalog = "${format === 'delta' ? 'spark_catalog' : 'lake'}"`} }`,
  prepare: async (t, p) => p.sqlite(t, large ? LARGE : 'quickstart'),
});

/** A day of CDC events in the tenant's bronze (parquet under bronze/orders_cdc): the quickstart's, or `n` generated ones. */
const bronze = (t: Tenant, n?: number) =>
  n === undefined
    ? `SELECT CAST(id AS BIGINT) AS id, customer, status, CAST(amount AS DECIMAL(12,2)) AS amount, CAST(ts AS TIMESTAMP) AS ts, op,
       '${t.id}' AS _lake_tenant, 'shop.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${DAY}' AS _snapshot_date
FROM VALUES ${QUICKSTART_ORDERS[DAY].map(([id, c, s, a, ts, op]) => `(${id}, '${c}', '${s}', ${a}, '${ts}', '${op}')`).join(', ')} AS v(id, customer, status, amount, ts, op)`
    : // n events over n·0.8 keys: inserts, then updates of a quarter of them, and deletes of a twentieth.
      `SELECT id, concat('customer-', CAST(id % 5000 AS STRING)) AS customer, CASE WHEN k < ${Math.round(n * 0.8)} THEN 'NEW' ELSE 'PAID' END AS status,
       CAST(id % 1000 AS DECIMAL(12,2)) AS amount, timestamp_seconds(1783238400 + k) AS ts,
       CASE WHEN k < ${Math.round(n * 0.8)} THEN 'c' WHEN k < ${Math.round(n * 0.95)} THEN 'u' ELSE 'd' END AS op,
       '${t.id}' AS _lake_tenant, 'shop.orders' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${DAY}' AS _snapshot_date
FROM (SELECT id AS k, CASE WHEN id < ${Math.round(n * 0.8)} THEN id ELSE (id * 7) % ${Math.round(n * 0.8)} END AS id FROM range(${n}) DISTRIBUTE BY k % 4)`;

const cdc = (format: 'iceberg' | 'delta', large = false): Kind => ({
  name: `cdc-silver-merge ${format}${large ? ` ${LARGE} events` : ''}`,
  large,
  config: (t) =>
    format === 'iceberg'
      ? `job { template = "cdc-silver-merge", schema-version = 1, name = "bench-merge" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders_cdc", where = "_snapshot_date = '${DAY}'" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }`
      : `job { template = "cdc-silver-merge", schema-version = 2, name = "bench-merge-delta" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders_cdc", snapshot-date = "${DAY}" }
cdc { primary-key = ["id"], sequence-by = ["ts"], delete-when = "op = 'd'" }
columns { exclude = ["op"] }
target { table = "orders_delta", format = delta, catalog = "spark_catalog" }`,
  prepare: (t, p) => p.writeBronze(t, bronze(t, large ? LARGE : undefined)),
});

/** A silver table `orders` of the quickstart's shape, `n` rows (default: the quickstart's day). */
const silver = async (t: Tenant, p: Prep, n?: number) => {
  await p.sql(`CREATE NAMESPACE IF NOT EXISTS lake.${t.id}_silver`);
  const rows =
    n === undefined
      ? `SELECT * FROM VALUES (1, 'alice', 'PAID', 10.00, TIMESTAMP'2026-07-05 09:00:00'), (2, 'bob', 'NEW', 25.50, TIMESTAMP'2026-07-05 08:30:00'),
           (4, 'dave', 'NEW', 99.99, TIMESTAMP'2026-07-05 11:00:00') AS v(id, customer, status, amount, ts)`
      : `SELECT id, concat('customer-', CAST(id % 5000 AS STRING)) AS customer, CASE WHEN id % 10 = 0 THEN 'CANCELLED' ELSE 'PAID' END AS status,
           id % 1000 + 0.5 AS amount, timestamp_seconds(1783238400 + id) AS ts FROM range(${n})`;
  await p.sql(
    `CREATE TABLE lake.${t.id}_silver.orders USING iceberg LOCATION '${t.root}/silver/orders' AS SELECT CAST(id AS BIGINT) AS id, customer, status, CAST(amount AS DECIMAL(12,2)) AS amount, ts FROM (${rows})`,
  );
};

const scd2: Kind = {
  name: 'scd2-dim-load',
  config: (t) => `job { template = "scd2-dim-load", schema-version = 1, name = "bench-dim" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
source { table = "orders", catalog = "lake" }
dimension { natural-key = ["id"], tracked-columns = ["status"], exclude-columns = ["ts"], effective-at = "${DAY}T23:00:00Z" }
target { table = "dim_order_status", catalog = "lake" }`,
  prepare: (t, p) => silver(t, p),
};

const gold = (large = false): Kind => ({
  name: `gold-publish${large ? ` over ${4 * LARGE} rows` : ''}`,
  large,
  config: (t) => `job { template = "gold-publish", schema-version = 1, name = "bench-gold" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
transform { sql = """SELECT :logical_date AS sale_date, customer, count(*) AS orders, CAST(sum(amount) AS DECIMAL(18,2)) AS revenue
  FROM silver.orders WHERE status <> 'CANCELLED' GROUP BY customer""" }
target { table = "daily_customer_sales", grain = ["sale_date", "customer"], mode = replace-range, range-column = "sale_date", range-days = 1 }
expectations = [
  { name = "customer_present", type = not-null, columns = ["customer"], action = fail }
  { name = "revenue_positive", type = expression, expr = "revenue > 0", action = quarantine }
]`,
  prepare: (t, p) => silver(t, p, large ? 4 * LARGE : undefined),
});

const maintenance: Kind = {
  name: 'table-maintenance',
  config: (t) => `job { template = "table-maintenance", schema-version = 1, name = "bench-maintenance" }
tenant { id = "${t.id}", storage-root = "${t.root}" }
tables = [
  { layer = silver, table = "orders", compact { strategy = sort, sort-by = ["id"], min-input-files = 2 }, rewrite-manifests = true,
    expire-snapshots { older-than-hours = 0, retain-last = 2 } }
  { layer = silver, table = "orders_d", catalog = "spark_catalog", format = delta, compact { strategy = zorder, zorder-by = ["id"] }, vacuum { retain-hours = 0 } }
]`,
  prepare: async (t, p) => {
    await silver(t, p);
    await p.sql(`CREATE NAMESPACE IF NOT EXISTS spark_catalog.${t.id}_silver`);
    await p.sql(
      `CREATE TABLE spark_catalog.${t.id}_silver.orders_d (id BIGINT, customer STRING, status STRING) USING delta LOCATION '${t.root}/silver/orders_d'`,
    );
    for (let i = 5; i < 9; i++) {
      await p.sql(`INSERT INTO lake.${t.id}_silver.orders VALUES (${i}, 'c${i}', 'NEW', ${i}.00, TIMESTAMP'2026-07-05 12:00:00')`);
      await p.sql(`INSERT INTO spark_catalog.${t.id}_silver.orders_d VALUES (${i}, 'c${i}', 'NEW')`);
    }
  },
};

/**
 * The sixteen tenants: three large runs (a CDC merge of LARGE events, an ingest of LARGE rows from
 * SQLite, gold over 4·LARGE rows) among thirteen small ones (the quickstart's sizes). Spark's FAIR
 * scheduler breaks ties between pools by name: the large tenants are not the first names.
 */
const KINDS: readonly Kind[] = [
  jdbc('parquet'),
  cdc('iceberg'),
  scd2,
  cdc('iceberg', true),
  gold(),
  jdbc('iceberg'),
  maintenance,
  jdbc('delta'),
  jdbc('iceberg', true),
  cdc('delta'),
  scd2,
  gold(),
  gold(true),
  jdbc('parquet'),
  maintenance,
  cdc('iceberg'),
];

interface RunResult {
  tenant: string;
  kind: string;
  large: boolean;
  code: number | null;
  /** From the pass's start to the run's exit, s. */
  finishS: number;
  /** The run's own wall time, s. */
  wallS: number;
  rssMb: number;
  outputs: { table?: string; format: string; location?: string }[];
}
interface PassResult {
  pass: Pass;
  startedAt: string;
  load: [number, number];
  totalS: number;
  serverPeakRssMb: number;
  serverCpuS: number;
  runs: RunResult[];
  digests: Record<string, Record<string, { rows: number; digest: string; columns: Record<string, string> }>>;
  pools: { tenantJobs: number; outsidePool: number; untaggedJobs: number; untaggedPools: Record<string, number> };
}

const load = (): number => Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);

function sh(args: string[], env: Record<string, string> = {}): string {
  return execFileSync('bash', args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 })
    .toString()
    .trim();
}

/** The server's processes: its session (scripts/spark-connect starts it with setsid). */
function sessionProcesses(sid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[3]) === sid) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}
function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}
function cpuS(sid: number): number {
  let ticks = 0;
  for (const p of sessionProcesses(sid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone
    }
  }
  return ticks / 100;
}

function startServer(pass: Pass, work: string): { remote: string; sid: number; eventLog: string; lake: string } {
  const dir = join(work, pass);
  const lake = join(dir, 'lake');
  const eventLog = join(dir, 'eventlog');
  mkdirSync(join(lake, 'sources'), { recursive: true });
  mkdirSync(eventLog, { recursive: true });
  const env = { LAKEHOUSE_LAKE_HOME: lake };
  const remote = sh(
    [
      'scripts/spark-connect',
      'start',
      '--port',
      String(PORT),
      '--conf',
      `spark.scheduler.mode=${pass === 'fifo' ? 'FIFO' : 'FAIR'}`,
      '--conf',
      'spark.eventLog.enabled=true',
      '--conf',
      `spark.eventLog.dir=file://${eventLog}`,
      '--conf',
      'spark.eventLog.compress=false',
      '--conf',
      'spark.eventLog.rolling.enabled=false',
      '--conf',
      `spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName=${dir}/metastore_db;create=true`,
      '--conf',
      `spark.sql.warehouse.dir=${dir}/spark-warehouse`,
    ],
    env,
  )
    .split('\n')
    .pop()!;
  const sid = Number(readFileSync(join(root, `.cache/spark/run-${PORT}/server.pid`), 'utf8').trim());
  return { remote, sid, eventLog, lake };
}

function stopServer(): void {
  sh(['scripts/spark-connect', 'stop', '--port', String(PORT)]);
}

function platformConfig(tenants: readonly Tenant[]): string {
  return `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc { inline-urls = allow }
maintenance { retention-floor-hours = 0 }
tenants {
${tenants.map((t) => `  ${t.id} { storage-roots = ["${t.root}"] }`).join('\n')}
}`;
}

async function prepare(tenants: readonly Tenant[], remote: string): Promise<void> {
  process.env.SPARK_REMOTE = remote;
  const client = connect();
  const prep: Prep = {
    sql: async (text) => void (await client.execute(compileCommandPlan(testCommand(text), { reveal: true }))),
    writeBronze: async (t, select) =>
      void (await client.execute(
        compileCommandPlan(testQuery(select).writeFiles(`${t.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite', partitionBy: ['_snapshot_date'] }), {
          reveal: true,
        }),
      )),
    sqlite: (t, rows) => {
      const events = rows === 'quickstart' ? JSON.stringify(QUICKSTART_ORDERS[DAY]) : String(rows);
      execFileSync('python3', [
        '-c',
        `import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("CREATE TABLE orders_cdc (id INTEGER, customer TEXT, status TEXT, amount DECIMAL(12,2), ts TEXT, op TEXT)")
arg = sys.argv[2]
rows = json.loads(arg) if arg.startswith("[") else ((i, "customer-%d" % (i % 5000), "NEW", (i % 1000) + 0.5, "2026-07-05 %02d:%02d:%02d" % (i // 3600 % 24, i // 60 % 60, i % 60), "c") for i in range(int(arg)))
con.executemany("INSERT INTO orders_cdc VALUES (?, ?, ?, ?, ?, ?)", rows)
con.commit()`,
        t.db,
        events,
      ]);
    },
  };
  try {
    for (const t of tenants) await t.kind.prepare(t, prep);
  } finally {
    await client.releaseSession().catch(() => undefined);
    client.close();
  }
}

/** One CLI run (the bundle as the image runs it), its peak RSS from GNU time. */
function startRun(t: Tenant, dir: string, remote: string, runId: string): { child: ChildProcess; done: Promise<Omit<RunResult, 'finishS'>> } {
  const config = join(dir, `${t.id}.conf`);
  const status = join(dir, `${t.id}.status.json`);
  const rss = join(dir, `${t.id}.rss`);
  const log = openSync(join(dir, `${t.id}.log`), 'w');
  const started = Date.now();
  const child = spawn(
    '/usr/bin/time',
    [
      '-o',
      rss,
      '-f',
      '%M',
      process.execPath,
      ...cliNodeFlags(root),
      join(root, 'dist/cli.mjs'),
      '--config',
      config,
      '--env',
      join(dir, 'platform.conf'),
      '--remote',
      remote,
      '--tenant',
      t.id,
      '--run-id',
      runId,
      '--logical-date',
      DAY,
      '--status-file',
      status,
    ],
    { cwd: root, stdio: ['ignore', 'ignore', log] },
  );
  const done = new Promise<Omit<RunResult, 'finishS'>>((resolve) =>
    child.on('close', (code) => {
      closeSync(log);
      const wallS = (Date.now() - started) / 1000;
      let outputs: RunResult['outputs'] = [];
      try {
        outputs = (JSON.parse(readFileSync(status, 'utf8')) as { outputs: RunResult['outputs'] }).outputs;
      } catch {
        // no status: the exit code says why
      }
      let rssMb = 0;
      try {
        rssMb = Number(readFileSync(rss, 'utf8').trim().split('\n').pop()) / 1024;
      } catch {
        // GNU time wrote nothing
      }
      resolve({ tenant: t.id, kind: t.kind.name, large: !!t.kind.large, code, wallS, rssMb, outputs });
    }),
  );
  return { child, done };
}

/** Each output's rows, read by a second engine. */
function digests(lake: string, runs: readonly RunResult[]): PassResult['digests'] {
  const out: PassResult['digests'] = {};
  for (const r of runs) {
    const specs = r.outputs
      .filter((o) => !o.table?.endsWith('__quarantine'))
      .map((o) => {
        if (o.format === 'iceberg') return `iceberg:${o.table!.split('.').slice(1).join('.')}`;
        return `${o.format === 'delta' ? 'delta' : 'parquet'}:${o.location}`;
      });
    if (!specs.length) continue;
    const text = sh(['scripts/py-tools', 'python', 'bench/tenants_digest.py', lake, '--volatile', VOLATILE.join(','), ...specs]);
    // Keyed by what the spec names inside the tenant's lake, so that passes on other lakes compare.
    out[r.tenant] = Object.fromEntries(Object.entries(JSON.parse(text) as PassResult['digests'][string]).map(([k, v]) => [k.replace(lake, '<lake>'), v]));
  }
  return out;
}

/** From the server's event log: every job's pool against the tenant of its operation. */
function pools(eventLog: string, tenants: ReadonlySet<string>): PassResult['pools'] {
  const file = readdirSync(eventLog).map((f) => join(eventLog, f))[0]!;
  const sessionTenant = new Map<string, string>();
  const result: PassResult['pools'] = { tenantJobs: 0, outsidePool: 0, untaggedJobs: 0, untaggedPools: {} };
  // Jobs carry the operation's tag (…_Session_<id>_Operation_<id>); a session's tenant is the one its run stamped.
  const events = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return undefined;
      }
    });
  for (const e of events) {
    if (e?.Event !== 'SparkListenerJobStart') continue;
    const props = (e.Properties ?? {}) as Record<string, string>;
    const tenant = props['spark.sql.iceberg.snapshot-property.lakehouse-jobs.tenant'];
    const session = /_Session_([0-9a-f-]{36})_Operation_/.exec(props['spark.job.tags'] ?? '')?.[1];
    if (session && tenant && tenants.has(tenant)) sessionTenant.set(session, tenant);
  }
  for (const e of events) {
    if (e?.Event !== 'SparkListenerJobStart') continue;
    const props = (e.Properties ?? {}) as Record<string, string>;
    const pool = props['spark.scheduler.pool'] ?? 'default';
    const session = /_Session_([0-9a-f-]{36})_Operation_/.exec(props['spark.job.tags'] ?? '')?.[1];
    if (!session) {
      result.untaggedJobs++;
      result.untaggedPools[pool] = (result.untaggedPools[pool] ?? 0) + 1;
      continue;
    }
    const tenant = sessionTenant.get(session);
    if (!tenant) continue;
    result.tenantJobs++;
    if (pool !== `tenant:${tenant}`) result.outsidePool++;
  }
  return result;
}

async function runPass(pass: Pass, work: string, tenantsOf: (lake: string) => Tenant[]): Promise<PassResult> {
  const dir = join(work, pass);
  say(`${pass}: starting a server (spark.scheduler.mode=${pass === 'fifo' ? 'FIFO' : 'FAIR'})`);
  const server = startServer(pass, work);
  try {
    const tenants = tenantsOf(server.lake);
    writeFileSync(join(dir, 'platform.conf'), platformConfig([...tenants, warmup(server.lake)]));
    for (const t of [...tenants, warmup(server.lake)]) writeFileSync(join(dir, `${t.id}.conf`), t.kind.config(t));
    const prepStart = Date.now();
    await prepare([...tenants, warmup(server.lake)], server.remote);
    say(`${pass}: inputs prepared in ${((Date.now() - prepStart) / 1000).toFixed(0)} s`);
    const w = await startRun(warmup(server.lake), dir, server.remote, `bench-${pass}-warmup`).done;
    if (w.code !== 0) throw new Error(`${pass}: the warm-up run exited ${w.code} (log: ${dir}/${warmup(server.lake).id}.log)`);

    let peakKb = 0;
    const sampler = setInterval(() => {
      peakKb = Math.max(
        peakKb,
        sessionProcesses(server.sid).reduce((n, p) => n + rssKb(p), 0),
      );
    }, 250);
    const cpu0 = cpuS(server.sid);
    const load0 = load();
    const t0 = Date.now();
    const startedAt = new Date(t0).toISOString();
    const runs: RunResult[] = [];
    const finish = (r: Omit<RunResult, 'finishS'>): RunResult => {
      const res = { ...r, finishS: (Date.now() - t0) / 1000 };
      say(`${pass}: ${r.tenant} (${r.kind}) exit ${r.code} after ${res.finishS.toFixed(1)} s (its own ${r.wallS.toFixed(1)} s)`);
      return res;
    };
    if (pass === 'seq') {
      for (const t of tenants) runs.push(finish(await startRun(t, dir, server.remote, `bench-${pass}-${t.id}`).done));
    } else {
      runs.push(...(await Promise.all(tenants.map((t) => startRun(t, dir, server.remote, `bench-${pass}-${t.id}`).done.then(finish)))));
    }
    const totalS = (Date.now() - t0) / 1000;
    const serverCpuS = cpuS(server.sid) - cpu0;
    clearInterval(sampler);
    const load1 = load();
    say(`${pass}: ${runs.length} runs in ${totalS.toFixed(1)} s, server peak RSS ${(peakKb / 1024).toFixed(0)} MB, server CPU ${serverCpuS.toFixed(1)} s`);
    const result: PassResult = {
      pass,
      startedAt,
      load: [load0, load1],
      totalS,
      serverPeakRssMb: peakKb / 1024,
      serverCpuS,
      runs,
      digests: digests(server.lake, runs),
      pools: pools(server.eventLog, new Set(tenants.map((t) => t.id))),
    };
    return result;
  } finally {
    stopServer();
  }
}

/** A run before the measured ones, on every server alike (its first queries load classes and JIT). */
const warmup = (lake: string): Tenant => ({ id: 'warmup', root: `file://${lake}/warmup`, db: join(lake, 'sources/warmup.db'), kind: cdc('iceberg') });

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN;
};

function report(results: readonly PassResult[], commit: string): string {
  const ref = results[0]!;
  const lines: string[] = [];
  lines.push(`bench/tenants at ${commit}, ${results.length} passes, large = ${LARGE}`, '');
  lines.push(
    "| pass | load (start → end) | total wall | Σ runs' own wall | small runs: median / max finish | large runs: finish | server peak RSS | server CPU | runs' peak RSS | failed | tables ≠ " +
      ref.pass +
      " | jobs outside their tenant's pool |",
  );
  lines.push('|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const small = r.runs.filter((x) => !x.large).map((x) => x.finishS);
    const large = r.runs.filter((x) => x.large).map((x) => `${x.finishS.toFixed(0)}`);
    const failed = r.runs.filter((x) => x.code !== 0).length;
    const differ = diffs(ref, r).length;
    lines.push(
      `| ${r.pass} | ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)} | ${r.totalS.toFixed(1)} s | ${r.runs.reduce((n, x) => n + x.wallS, 0).toFixed(1)} s | ${median(small).toFixed(1)} / ${Math.max(...small).toFixed(1)} s | ${large.join(', ')} s | ${r.serverPeakRssMb.toFixed(0)} MB | ${r.serverCpuS.toFixed(1)} s | ${Math.max(...r.runs.map((x) => x.rssMb)).toFixed(0)} MB | ${failed} | ${differ} | ${r.pools.outsidePool} of ${r.pools.tenantJobs} (untagged: ${Object.entries(r.pools.untaggedPools).reduce((n, [p, c]) => n + (p.startsWith('tenant:') ? c : 0), 0)} of ${r.pools.untaggedJobs} in a tenant's pool) |`,
    );
  }
  lines.push('', '| tenant | run | ' + results.map((r) => `${r.pass}: finish (own wall)`).join(' | ') + ' |');
  lines.push('|---|---|' + results.map(() => '---:|').join(''));
  for (const t of ref.runs) {
    lines.push(
      `| ${t.tenant} | ${t.kind} | ` +
        results
          .map((r) => {
            const x = r.runs.find((y) => y.tenant === t.tenant)!;
            return `${x.finishS.toFixed(1)} (${x.wallS.toFixed(1)})${x.code === 0 ? '' : ` exit ${x.code}`}`;
          })
          .join(' | ') +
        ' |',
    );
  }
  for (const r of results.slice(1)) for (const d of diffs(ref, r)) lines.push(`DIFFERS ${r.pass}: ${d}`);
  return lines.join('\n');
}

/** Tables of `r` whose rows differ from the reference pass's (with the columns that differ). */
function diffs(ref: PassResult, r: PassResult): string[] {
  const out: string[] = [];
  for (const [tenant, tables] of Object.entries(ref.digests)) {
    for (const [table, d] of Object.entries(tables)) {
      const other = r.digests[tenant]?.[table];
      if (!other) out.push(`${tenant} ${table}: not read`);
      else if (other.digest !== d.digest || other.rows !== d.rows)
        out.push(
          `${tenant} ${table}: ${other.rows} rows against ${d.rows}; columns ${Object.keys(d.columns)
            .filter((c) => other.columns[c] !== d.columns[c])
            .join(', ')}`,
        );
    }
  }
  return out;
}

async function main(): Promise<void> {
  const work = process.argv[process.argv.indexOf('--work') + 1]!;
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
  const tenantsOf = (lake: string): Tenant[] =>
    KINDS.map((kind, i) => {
      const id = `t${String(i + 1).padStart(2, '0')}`;
      return { id, root: `file://${lake}/${id}`, db: join(lake, `sources/${id}.db`), kind };
    });
  const results: PassResult[] = [];
  for (const pass of PASSES) results.push(await runPass(pass, work, tenantsOf));
  const text = report(results, commit);
  mkdirSync(join(root, '.cache/bench'), { recursive: true });
  writeFileSync(join(root, '.cache/bench/tenants-last.json'), JSON.stringify({ commit, large: LARGE, results }, null, 2));
  writeFileSync(join(root, '.cache/bench/tenants-last.md'), text + '\n');
  process.stdout.write(text + '\n');
  const failed = results.some((r) => r.runs.some((x) => x.code !== 0) || r.pools.outsidePool > 0 || diffs(results[0]!, r).length > 0);
  if (failed) process.exitCode = 1;
}

await main();
