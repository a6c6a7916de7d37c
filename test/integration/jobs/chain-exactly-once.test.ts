import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { type KafkaRecord, createTopic, debeziumDecimal, kafkaBootstrap, recordKey, startProducer } from '../../support/kafka.js';
import { mulberry32 } from '../../support/random.js';
import { SparkConnectClient } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { freshTenant, readDeltaTablesWithDeltaRs, readIcebergTablesWithPyIceberg, remote, repoRoot, runCli, spawnCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'spark-install', 'kafka', 'py-tools');

/**
 * Issue 25's proof that the incremental layers apply every event exactly once, on Iceberg and on
 * Delta tables (the whole chain in one format; the same seed for both): a producer keeps
 * sending Debezium change events (inserts, updates that move an order to another day, deletes with
 * their Kafka tombstones, late events, exact replays, keys touched many times) while the chain
 * kafka-bronze-ingest → cdc-silver-merge (`source.read = incremental`) → gold-publish (incremental,
 * replace-range by day) runs round after round, as an orchestrator would run it every few minutes.
 * At seeded random points the runner is killed (SIGKILL, inside a step or right after one) and,
 * once, the Spark Connect server itself (`kill -9` of the process group of a server this file
 * started on its own port, then restarted); each time the chain recovers by rerunning the job with
 * the same run id, as an orchestrator's retry does (75 and 69 are retried; any other code fails the
 * test). At the end, the producer stopped and a clean round run, the tables are read by
 * PyIceberg or delta-rs: bronze holds every (topic, partition, offset) exactly once, silver equals the oracle
 * computed here from the events sent (per key the event with the highest (lsn, ts, offset), absent
 * if a delete), gold equals the aggregate of that oracle, and neither silver nor gold finds
 * anything new to read (their recorded positions are the heads of their sources).
 *
 * LAKEHOUSE_KILL_SEED=<n> replays a run's events and kill plan (the seed is printed); where a kill
 * lands inside a step still depends on the machine's timing.
 */

const SEED = Number(process.env.LAKEHOUSE_KILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
const ROUNDS = 2;
const TIMEOUT = 1_500_000;
const JOBS = ['bronze', 'silver', 'gold'] as const;
type Job = (typeof JOBS)[number];
type Format = 'iceberg' | 'delta';
/**
 * Steps each job starts in a round with new data, at least: a kill's step is drawn among all but the
 * last (so that the run is still there when it lands, however fast the machine). Counted from the
 * runs' lines (each says how many steps it started), one below the fewest seen: Delta's silver reads
 * each table's commits with a step of its own.
 */
const STEPS: Record<Format, Record<Job, number>> = { iceberg: { bronze: 5, silver: 11, gold: 9 }, delta: { bronze: 5, silver: 13, gold: 9 } };
/** The line after which a kill inside bronze's stream is timed: its micro-batches commit from here. */
const STREAMING = 'streaming query started';

const OWN_PORT = String(Number(process.env.SPARK_CONNECT_PORT ?? '15002') + 1);
const OWN = `sc://127.0.0.1:${OWN_PORT}`;

const configs = (format: Format, tenant: { id: string; root: string }, topic: string): Record<string, string> => {
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  return {
    'platform.conf': `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local { bootstrap-servers = "${kafkaBootstrap()}", tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } } }
`,
    'bronze.conf': `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "proof-bronze" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source {
  topics = ["${topic}"], value-format = debezium-json, max-offsets-per-trigger = 40
  value-schema { id = bigint, customer = string, order_date = date, amount = "decimal(12,2)" }
}
target { table = "orders_events", format = ${format}, catalog = "${catalog}" }
`,
    // The documented Kafka-to-silver chain (docs/templates/kafka-bronze-ingest.md), read incrementally.
    // A Delta silver that gold reads incrementally is created with its change data feed (gold-publish.md).
    'silver.conf': `
job    { template = "cdc-silver-merge", schema-version = 2, name = "proof-silver" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_events", format = ${format}, catalog = "${catalog}", where = "op IS NOT NULL", read = incremental }
cdc    { primary-key = ["id"], sequence-by = ["_cdc_lsn", "_cdc_ts_ms", "_kafka_offset"], delete-when = "op = 'd'" }
columns { exclude = ["op", "_cdc_unavailable", "_kafka_undecoded", "_kafka_key", "_kafka_value", "_kafka_topic",
                     "_kafka_partition", "_kafka_timestamp", "_kafka_timestamp_type", "_kafka_headers"] }
target { table = "orders", format = ${format}, catalog = "${catalog}"${format === 'delta' ? ', table-properties { delta.enableChangeDataFeed = true }' : ''} }
`,
    'gold.conf': `
job    { template = "gold-publish", schema-version = 1, name = "proof-gold" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "SELECT order_date AS sale_date, customer, count(*) AS orders, CAST(sum(amount) AS DECIMAL(14,2)) AS revenue FROM silver.orders GROUP BY order_date, customer" }
target { table = "daily_sales", catalog = "${catalog}", grain = ["sale_date", "customer"], mode = replace-range, range-column = "sale_date" }
source { table = "silver.orders", date-column = "order_date", read = incremental }
`,
  };
};

// --- the events ----------------------------------------------------------------------------------

interface Row {
  id: number;
  customer: string;
  day: number; // days since 1970 (Debezium's io.debezium.time.Date)
  cents: number;
}

/** One record the producer sent, with what the oracle needs of it (a Kafka tombstone has no op). */
interface Sent {
  kind: 'change' | 'late' | 'replay' | 'tombstone';
  id: number;
  op: 'c' | 'u' | 'd' | null;
  lsn: number;
  ts: number;
  row: Row | null;
  record: KafkaRecord;
}

// Orders fall on 40 days from 2026-07-01 (days since 1970): updates move orders between gold's days,
// and a round's changes touch some days and leave others, so gold's choice of the days to recompute
// is what is proved (with a handful of days every round would touch them all).
const FIRST_DAY = 20635;
const DAYS = 40;
const KEYS = 24;

/** The seeded event source: each call gives the next change (a delete is followed by its tombstone). */
function eventSource(seed: number): () => Sent[] {
  const r = mulberry32(seed);
  const int = (n: number) => Math.floor(r() * n);
  const alive = new Map<number, Row>();
  const lastLsn = new Map<number, number>();
  const changes: Sent[] = [];
  let lsn = 0;
  const randomRow = (id: number): Row => ({ id, customer: `c${int(3)}`, day: FIRST_DAY + int(DAYS), cents: 100 + int(99_900) });
  const wire = (row: Row) => ({ id: row.id, customer: row.customer, order_date: row.day, amount: debeziumDecimal((row.cents / 100).toFixed(2), 2) });
  const event = (kind: Sent['kind'], id: number, op: 'c' | 'u' | 'd', at: number, before: Row | null, after: Row | null): Sent => {
    const ts = 1_780_000_000_000 + at;
    const value = { before: before && wire(before), after: after && wire(after), op, ts_ms: ts, source: { ts_ms: ts, lsn: at } };
    return { kind, id, op, lsn: at, ts, row: op === 'd' ? before : after, record: { key: JSON.stringify({ id }), partition: id % 2, value } };
  };
  return () => {
    const x = r();
    if (x < 0.08 && changes.length) {
      // Redelivered as it was (a connector restarted after a crash sends some events again).
      const again = changes[int(changes.length)]!;
      return [{ ...again, kind: 'replay' }];
    }
    if (x < 0.2 && lastLsn.size) {
      // An event older than the key's latest: ignored wherever it lands.
      const ids = [...lastLsn.keys()];
      const id = ids[int(ids.length)]!;
      const e = event('late', id, r() < 0.3 ? 'd' : 'u', lastLsn.get(id)! - 1 - int(5), randomRow(id), randomRow(id));
      changes.push(e);
      return [e];
    }
    const id = 1 + int(KEYS);
    lsn += 10;
    lastLsn.set(id, lsn);
    const before = alive.get(id) ?? null;
    let e: Sent;
    if (!before) {
      const row = randomRow(id);
      alive.set(id, row);
      e = event('change', id, 'c', lsn, null, row);
    } else if (r() < 0.2) {
      alive.delete(id);
      e = event('change', id, 'd', lsn, before, null);
    } else {
      // An update: a new amount, sometimes another customer or day.
      const row = {
        ...before,
        cents: 100 + int(99_900),
        ...(r() < 0.4 ? { day: FIRST_DAY + int(DAYS) } : {}),
        ...(r() < 0.2 ? { customer: `c${int(3)}` } : {}),
      };
      alive.set(id, row);
      e = event('change', id, 'u', lsn, before, row);
    }
    changes.push(e);
    if (e.op !== 'd') return [e];
    const tombstone: Sent = {
      kind: 'tombstone',
      id,
      op: null,
      lsn: 0,
      ts: 0,
      row: null,
      record: { key: JSON.stringify({ id }), partition: id % 2, value: null },
    };
    return [e, tombstone];
  };
}

const isoDay = (day: number) => new Date(day * 86_400_000).toISOString().slice(0, 10);
const money = (cents: number) => (cents / 100).toFixed(2);

interface SilverRow {
  id: number;
  customer: string;
  order_date: string;
  amount: string;
  _cdc_lsn: number;
  _cdc_ts_ms: number;
  _kafka_offset: number;
}
interface GoldRow {
  sale_date: string;
  customer: string;
  orders: number;
  revenue: string;
}

/** Silver as it must be: per key the event with the highest (lsn, ts, offset), absent when that is a delete. */
function oracle(sent: readonly Sent[], offsets: readonly number[]): SilverRow[] {
  const latest = new Map<number, { e: Sent; offset: number }>();
  sent.forEach((e, i) => {
    if (e.op === null) return;
    const cur = latest.get(e.id);
    const newer = !cur || e.lsn > cur.e.lsn || (e.lsn === cur.e.lsn && (e.ts > cur.e.ts || (e.ts === cur.e.ts && offsets[i]! > cur.offset)));
    if (newer) latest.set(e.id, { e, offset: offsets[i]! });
  });
  return [...latest.values()]
    .filter(({ e }) => e.op !== 'd')
    .map(({ e, offset }) => ({
      id: e.id,
      customer: e.row!.customer,
      order_date: isoDay(e.row!.day),
      amount: money(e.row!.cents),
      _cdc_lsn: e.lsn,
      _cdc_ts_ms: e.ts,
      _kafka_offset: offset,
    }))
    .sort((a, b) => a.id - b.id);
}

/** Gold as it must be: the transform's aggregate over the oracle's silver. */
function goldOf(silver: readonly SilverRow[]): GoldRow[] {
  const by = new Map<string, { sale_date: string; customer: string; orders: number; cents: number }>();
  for (const r of silver) {
    const k = `${r.order_date}|${r.customer}`;
    const g = by.get(k) ?? { sale_date: r.order_date, customer: r.customer, orders: 0, cents: 0 };
    g.orders += 1;
    g.cents += Math.round(Number(r.amount) * 100);
    by.set(k, g);
  }
  return sortGold([...by.values()].map(({ cents, ...g }) => ({ ...g, revenue: money(cents) })));
}

const sortGold = (rows: GoldRow[]) => rows.sort((a, b) => a.sale_date.localeCompare(b.sale_date) || a.customer.localeCompare(b.customer));

// --- the runs, the kills -------------------------------------------------------------------------

/**
 * Where a kill lands: inside the n-th step the run starts (a short delay after its line: the step's
 * operation is on the server by then, a fast machine may already be in the next step), right after
 * the n-th step is done, or inside bronze's stream (a delay after it started).
 */
interface Kill {
  target: 'runner' | 'server';
  job: Job;
  step: number;
  after: boolean;
  stream: boolean;
  delayMs: number;
}

interface Attempt {
  code: number | null;
  /** Where the kill landed, when it did. */
  landed?: string;
  stdout: string;
  stderr: string;
}

const cacheDir = () => process.env.LAKEHOUSE_CACHE ?? join(repoRoot, '.cache');
const ownPid = () => Number(readFileSync(join(cacheDir(), 'spark', `run-${OWN_PORT}`, 'server.pid'), 'utf8').trim());

/** scripts/spark-connect on this file's own port, without blocking the producer: its last line. */
function ownServer(...args: string[]): Promise<string> {
  // spark-submit reads SPARK_REMOTE as --remote and refuses to start a server.
  const { SPARK_REMOTE: _ignored, ...env } = process.env;
  const child = spawn('bash', [join(repoRoot, 'scripts/spark-connect'), ...args, '--port', OWN_PORT], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  return new Promise((resolve, reject) =>
    child.on('close', (code) =>
      code === 0 ? resolve(out.trim().split('\n').pop() ?? '') : reject(new Error(`spark-connect ${args.join(' ')} exited ${code}`)),
    ),
  );
}
const startOwn = () => ownServer('start', '--conf', 'spark.driver.memory=1500m');

/** A session on `address` for `use`, released after it. */
async function onServer<T>(address: string, use: (sql: (text: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<T> {
  const spec = parseConnectionString(address);
  if (spec.kind !== 'remote') throw new Error(`not an sc:// address: ${address}`);
  const client = SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-tests' });
  const sql = async (text: string) => {
    const r = /^\s*(CREATE|ALTER)\b/i.test(text)
      ? await client.execute(compileCommandPlan(testCommand(text), { reveal: true }))
      : await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
    return r.table ? arrowRows(r.table) : [];
  };
  try {
    return await use(sql);
  } finally {
    await client.releaseSession().catch(() => undefined);
    client.close();
  }
}

/**
 * On the local stack the names of spark_catalog (the Delta tables) live in each server's own
 * metastore (an embedded Derby database per server), so the server of this file's own does not know
 * the Delta tables the chain created on the shared server (Iceberg's catalog `lake` is one for
 * both). They are registered there by their locations, as one metastore shared by a platform's
 * servers holds them; what a table holds is its log at that location, for every server.
 */
async function registerDeltaTables(tenant: { id: string }): Promise<string[]> {
  const tables = await onServer(remote(), async (sql) => {
    const found: { name: string; location: string }[] = [];
    for (const layer of ['bronze', 'silver', 'gold']) {
      const ns = `spark_catalog.${tenant.id}_${layer}`;
      if (!(await sql(`SHOW NAMESPACES IN spark_catalog LIKE '${tenant.id}_${layer}'`)).length) continue;
      for (const t of await sql(`SHOW TABLES IN ${ns}`)) {
        const name = `${ns}.${String(t.tableName)}`;
        const [detail] = await sql(`DESCRIBE DETAIL ${name}`);
        found.push({ name, location: String(detail!.location) });
      }
    }
    return found;
  });
  await onServer(OWN, async (sql) => {
    for (const { name, location } of tables) {
      await sql(`CREATE NAMESPACE IF NOT EXISTS ${name.split('.').slice(0, 2).join('.')}`);
      await sql(`CREATE TABLE IF NOT EXISTS ${name} USING delta LOCATION '${location}'`);
    }
  });
  return tables.map((t) => t.name);
}

/** One run of a job through the CLI (its configs in `dir`), as an orchestrator starts it, killed where `kill` says. */
function attempt(dir: string, job: Job, runId: string, on: string, kill?: Kill): Promise<Attempt> {
  const args = ['--config', join(dir, `${job}.conf`), '--env', join(dir, 'platform.conf'), '--remote', on, '--run-id', runId];
  const { child, done } = spawnCli([...args, '--log-level', 'info', '--log-format', 'json', '--retry-budget', on === OWN ? '5' : '120']);
  const started: string[] = [];
  const finished: string[] = [];
  let landed: string | undefined;
  let pending = '';
  const fire = (point: string) => {
    if (landed !== undefined || child.exitCode !== null) return;
    // Where the run was when the kill landed (a delay may reach past the step it was counted from).
    const at = started.at(-1) === finished.at(-1) ? `after ${finished.at(-1)}` : `in ${started.at(-1)}`;
    landed = `${at} (${point})`;
    if (kill!.target === 'runner') child.kill('SIGKILL');
    else process.kill(-ownPid(), 'SIGKILL'); // the server leads its own process group
  };
  child.stderr!.on('data', (b: Buffer) => {
    pending += b.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      if (landed !== undefined || !line.startsWith('{')) continue;
      const l = JSON.parse(line) as { step?: string; msg?: string; durationMs?: number };
      if (!l.step) continue;
      if (kill?.stream && l.msg === STREAMING) {
        setTimeout(() => fire(`${kill.delayMs} ms into the stream`), kill.delayMs);
        continue;
      }
      if (l.durationMs !== undefined && l.msg === `${l.step} done`) {
        finished.push(l.step);
        if (kill?.after && finished.length === kill.step) fire(`step ${kill.step} done`);
      } else if (!started.includes(l.step) && !/ not needed/.test(l.msg ?? '')) {
        started.push(l.step);
        if (kill && !kill.after && !kill.stream && started.length === kill.step) {
          const step = l.step;
          setTimeout(() => fire(`${kill.delayMs} ms into ${step}`), kill.delayMs);
        }
      }
    }
  });
  const t0 = Date.now();
  return done.then((r) => {
    log(
      `  ${job} ${runId} on ${on === OWN ? 'its own server' : 'the shared server'}: exit ${r.code} in ${((Date.now() - t0) / 1000).toFixed(1)} s, ${started.length} steps started${landed ? `, killed ${landed}` : ''}`,
    );
    return { code: r.code, stdout: r.stdout, stderr: r.stderr, ...(landed ? { landed } : {}) };
  });
}

/** The chain's three tables as a second engine reads them: PyIceberg, or delta-rs (one process each). */
function readBack(format: Format, tenant: { id: string; root: string }): Record<'bronze' | 'silver' | 'gold', Record<string, unknown>[]> {
  if (format === 'iceberg') {
    const t = readIcebergTablesWithPyIceberg(`${tenant.id}_bronze`, ['orders_events', `${tenant.id}_silver.orders`, `${tenant.id}_gold.daily_sales`]);
    return { bronze: t.orders_events!, silver: t[`${tenant.id}_silver.orders`]!, gold: t[`${tenant.id}_gold.daily_sales`]! };
  }
  const [bronze, silver, gold] = ['bronze/orders_events', 'silver/orders', 'gold/daily_sales'].map((p) => `${tenant.root}/${p}`) as [string, string, string];
  const t = readDeltaTablesWithDeltaRs([bronze, silver, gold]);
  return { bronze: t[bronze]!, silver: t[silver]!, gold: t[gold]! };
}

const tail = (s: string) => s.split('\n').slice(-25).join('\n');
const log = (line: string) => console.log(`chain-exactly-once: ${line}`);

/** Rerun a job until it ends, as an orchestrator retries: 75 and 69 again, 0 and 99 are the end, anything else a failure. */
async function settle(dir: string, job: Job, runId: string, on: string): Promise<Attempt> {
  for (let n = 1; n <= 6; n++) {
    const a = await attempt(dir, job, runId, on);
    if (a.code === 0 || a.code === 99) return a;
    if (a.code !== 75 && a.code !== 69) throw new Error(`${job} (${runId}) exited ${a.code}, which an orchestrator does not retry:\n${tail(a.stderr)}`);
    log(`${job} ${runId}: exit ${a.code} (retryable), retried`);
  }
  throw new Error(`${job} (${runId}) did not end after 6 attempts`);
}

/** The server this file kills, (re)started in the background: the chain runs on the shared server meanwhile. */
let ownUp: Promise<string> | undefined;
let ownRunning = false;
const bringUpOwn = () => {
  ownUp = startOwn().then((address) => {
    ownRunning = true;
    return address;
  });
  ownUp.catch(() => undefined);
};

beforeAll(() => bringUpOwn());

afterAll(async () => {
  await ownUp?.catch(() => undefined);
  if (ownRunning) await ownServer('stop');
}, 300_000);

describe.each(['iceberg', 'delta'] as const)(
  'producer → kafka-bronze-ingest → cdc-silver-merge → gold-publish, %s tables, killed at random points',
  (format) => {
    const tenant = freshTenant();
    const TOPIC = `${tenant.id}.orders`;
    let dir: string;

    beforeAll(() => {
      dir = tempFiles(configs(format, tenant, TOPIC));
      createTopic(TOPIC, 2);
    });

    it(
      'ends with every offset in bronze once, silver equal to the oracle and gold to its aggregate, every position caught up',
      async () => {
        log(`seed ${SEED} (LAKEHOUSE_KILL_SEED=${SEED} replays it)`);
        const next = eventSource(SEED);
        const draw = mulberry32(SEED ^ 0x5eed);
        const int = (n: number) => Math.floor(draw() * n);

        // The kill plan: each job's runner once, in a random round (bronze's inside its stream, where
        // its micro-batches commit), and the server once, in round 2 (its server starts beside round
        // 1), at a random step of silver's merge: the job with the most commits in a run (tombstones,
        // the MERGE, the position alone, the repair of resurrected rows, expiry), so the one where a
        // server dying between two of them could skip or double-apply a batch. (The server killed
        // mid-stream is kafka-bronze-ingest.test.ts's; the run on the server of this file's own is the
        // first on a fresh server, half a minute or more on a loaded machine, so one.) A kill that
        // finds its run ended before its point (a run with less to do) waits for the job's next run.
        const plan = new Map<string, Kill>();
        const point = (target: Kill['target'], job: Job): Kill =>
          job === 'bronze'
            ? { target, job, step: 0, after: false, stream: true, delayMs: int(400) }
            : { target, job, step: 1 + int(STEPS[format][job] - 1), after: draw() < 0.5, stream: false, delayMs: int(300) };
        plan.set('2/silver', point('server', 'silver'));
        for (const job of JOBS) {
          let round = 1 + int(ROUNDS);
          while (plan.has(`${round}/${job}`)) round = (round % ROUNDS) + 1;
          plan.set(`${round}/${job}`, point('runner', job));
        }
        log(
          `kill plan: ${[...plan.entries()].map(([slot, k]) => `${slot} ${k.target} ${k.stream ? 'in the stream' : `${k.after ? 'after' : 'inside'} step ${k.step}`}${k.after ? '' : ` +${k.delayMs} ms`}`).join('; ')}`,
        );

        // The producer: a change every second (a delete with its tombstone), from now until the last round is over.
        const producer = startProducer(TOPIC);
        const sent: Sent[] = [];
        const tick = () => {
          const events = next();
          sent.push(...events);
          producer.send(events.map((e) => e.record));
        };
        tick();
        const timer = setInterval(tick, 1000);
        await producer.acked(1);

        // Kills planned and not landed yet, the server's first.
        const queue: Kill[] = [];
        const kills: string[] = [];
        const runJob = async (round: number, job: Job) => {
          const runId = `proof-${round}-${job}`;
          const slot = plan.get(`${round}/${job}`);
          if (slot) queue.push(slot);
          queue.sort((a, b) => Number(b.target === 'server') - Number(a.target === 'server'));
          const kill = queue.find((k) => k.job === job);
          if (!kill) return settle(dir, job, runId, remote());
          if (kill.target === 'server') {
            await ownUp;
            if (format === 'delta') log(`registered on its own server: ${(await registerDeltaTables(tenant)).join(', ')}`);
          }
          const on = kill.target === 'server' ? OWN : remote();
          const a = await attempt(dir, job, runId, on, kill);
          // A runner that exited by itself just before its SIGKILL arrived was not killed.
          if (!a.landed || (kill.target === 'runner' && a.code !== null)) {
            // The run ended before the kill's point: the kill waits for the next run.
            if (a.code !== 0 && a.code !== 99) throw new Error(`${job} (${runId}) exited ${a.code}:\n${tail(a.stderr)}`);
            return a;
          }
          queue.splice(queue.indexOf(kill), 1);
          const what = `round ${round} ${job}: ${kill.target} killed ${a.landed}${kill.target === 'server' ? `, the run exited ${a.code}` : ''}`;
          kills.push(what);
          log(what);
          // SIGKILL: no exit code, no status, no cleanup; the orchestrator retries at once.
          if (kill.target === 'runner') return settle(dir, job, runId, remote());
          // The server died under the run: the run ends retryable (or had just finished), never otherwise.
          expect([0, 99, 69, 75], tail(a.stderr)).toContain(a.code);
          ownRunning = false;
          // It is restarted, and the retry does not wait for it: it reruns on the shared server, as a
          // retry against another server of the platform would. The lake, the only state a run
          // leaves, is the same (the catalog "lake", the tables, the stream's checkpoint); a first
          // run on a freshly started server costs this file a minute on a loaded machine.
          bringUpOwn();
          return settle(dir, job, runId, remote());
        };

        let round = 0;
        while (round < ROUNDS || (queue.length > 0 && round < ROUNDS + 3)) {
          round++;
          const t0 = Date.now();
          const codes: string[] = [];
          for (const job of JOBS) {
            const t1 = Date.now();
            const code = (await runJob(round, job)).code;
            codes.push(`${job} ${code} (${((Date.now() - t1) / 1000).toFixed(1)} s)`);
          }
          log(`round ${round} in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${codes.join(', ')}; ${sent.length} records sent`);
        }
        expect(queue, 'every planned kill landed').toEqual([]);
        expect(kills.filter((k) => k.includes(' server killed '))).toHaveLength(1);

        // The producer stops; a clean round takes what it sent last; then nothing is new anywhere.
        clearInterval(timer);
        const offsets = await producer.stop();
        const t2 = Date.now();
        for (const job of JOBS) expect([0, 99]).toContain((await settle(dir, job, `proof-final-${job}`, remote())).code);
        log(`final round in ${((Date.now() - t2) / 1000).toFixed(1)} s`);
        // The positions the chain recorded are the heads of its sources.
        for (const job of ['silver', 'gold'] as const) {
          const idle = await attempt(dir, job, `proof-idle-${job}`, remote());
          expect(idle.code, `${job} found something new after the final round:\n${tail(idle.stderr)}`).toBe(99);
        }
        // The killed server is back.
        await ownUp;
        const ping = await runCli(['ping', '--remote', OWN]);
        expect(JSON.parse(ping.stdout), ping.stderr).toMatchObject({ ok: true });

        const count = (kind: Sent['kind']) => sent.filter((e) => e.kind === kind).length;
        log(`${sent.length} records: ${count('change')} changes, ${count('late')} late, ${count('replay')} replays, ${count('tombstone')} tombstones`);
        const t = readBack(format, tenant);
        // Bronze: every (topic, partition, offset) exactly once.
        expect(t.bronze.map(recordKey).sort()).toEqual(offsets.map(recordKey).sort());
        // Silver: the oracle, down to which copy of an event won (its offset).
        const expected = oracle(
          sent,
          offsets.map((o) => o.offset),
        );
        const silver = t.silver
          .map((r): SilverRow => ({
            id: Number(r.id),
            customer: String(r.customer),
            order_date: String(r.order_date),
            amount: String(r.amount),
            _cdc_lsn: Number(r._cdc_lsn),
            _cdc_ts_ms: Number(r._cdc_ts_ms),
            _kafka_offset: Number(r._kafka_offset),
          }))
          .sort((a, b) => a.id - b.id);
        expect(silver).toEqual(expected);
        // Gold: the aggregate of the oracle, every day.
        const gold = sortGold(
          t.gold.map((r) => ({
            sale_date: String(r.sale_date),
            customer: String(r.customer),
            orders: Number(r.orders),
            revenue: String(r.revenue),
          })),
        );
        expect(gold).toEqual(goldOf(expected));
        log(`silver ${silver.length} orders, gold ${gold.length} rows; kills: ${kills.join('; ')}`);
      },
      TIMEOUT,
    );
  },
);
