/**
 * bench/passes (driver): walks the cases of bench/passes-cases.ts for two days on the server that
 * bench/passes started (event log on), preparing each day's inputs before the first case that needs
 * them, then counts every run from the server's event log (bench/passes-count.ts) and compares the
 * totals with the committed baseline (bench/passes-baseline.json).
 *
 *   tsx bench/passes.ts needs                 the seeds of the selected cases, one a line (bench/passes starts Kafka for "kafka")
 *   tsx bench/passes.ts run --work <dir>      run, count, print the summary; writes .cache/bench/passes-last.{json,md}
 *
 * Environment (set by bench/passes): BENCH_REMOTE (sc://…), LAKEHOUSE_LAKE_HOME, SPARK_REMOTE and
 * LAKEHOUSE_KAFKA_BOOTSTRAP (for the seeds); BENCH_PASSES_ONLY=<template,…>; BENCH_PASSES_WRITE_BASELINE=1;
 * BENCH_PASSES_STRICT=1 (exit 1 when a run is over its target).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCommandPlan } from '../src/spark/plan/compile.js';
import { createTopic, debeziumDecimal, produce } from '../test/support/kafka.js';
import { QUICKSTART_ORDERS, writeOrderEvents } from '../test/support/shop-source.js';
import { declareStarted } from '../test/support/needs.js';
import { connect } from '../test/support/stack.js';
import { DAYS, type Day, type PassCase, type Seed, selectCases } from './passes-cases.js';
import { type Baseline, caseOf, kept, overTarget, summary } from './passes-baseline.js';
import { countRuns, stepTables } from './passes-count.js';
import { testCommand } from '../test/support/sql.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const BASELINE = join(root, 'bench/passes-baseline.json');
const OUT = join(root, '.cache/bench');
const PLATFORM = 'configs/examples/platform-local.conf';
const say = (s: string) => process.stderr.write(`bench/passes: ${s}\n`);

const only = (process.env.BENCH_PASSES_ONLY ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const selected = selectCases(only);
// bench/passes (the script) started the server, and Kafka when a case needs it: the seeds' helpers check that.
declareStarted('spark', ...(process.env.LAKEHOUSE_KAFKA_BOOTSTRAP ? (['kafka'] as const) : []));

const TOPIC = 'acme.shop.orders';
const HISTORY_SOURCES: Record<Day, { table: string; rows: string }> = {
  '2026-07-05': { table: 'orders_2025', rows: "(1, 'PAID'), (2, 'SHIPPED')" },
  '2026-07-06': { table: 'orders_2025_h2', rows: "(3, 'NEW'), (4, 'PAID'), (5, 'SHIPPED')" },
};

/** Prepare one seed for a day (see Seed in passes-cases.ts). */
async function seed(s: Seed, day: Day, home: string): Promise<void> {
  switch (s) {
    case 'shop-db':
      writeOrderEvents(home, QUICKSTART_ORDERS[day]);
      return;
    case 'kafka': {
      if (day === DAYS[0]) createTopic(TOPIC, 1);
      // The day's events as Debezium writes them: before/after images, op, source time, the amount
      // a precise decimal (the example's value-schema: decimal(12,2)).
      const records = QUICKSTART_ORDERS[day].map(([id, customer, status, amount, ts, op]) => {
        const row = { id, customer, status, amount: debeziumDecimal(amount.toFixed(2), 2) };
        const ms = Date.parse(`${ts.replace(' ', 'T')}Z`);
        return {
          key: JSON.stringify({ id }),
          value: { before: op === 'c' ? null : row, after: op === 'd' ? null : row, op, ts_ms: ms, source: { ts_ms: ms } },
        };
      });
      produce(TOPIC, records);
      return;
    }
    case 'orders-2025': {
      const client = connect();
      const sql = (q: string) => client.execute(compileCommandPlan(testCommand(q), { reveal: true }));
      const { table, rows } = HISTORY_SOURCES[day];
      try {
        await sql('CREATE NAMESPACE IF NOT EXISTS lake.acme_silver');
        for (const t of [table, 'orders_history'])
          await sql(
            `CREATE TABLE IF NOT EXISTS lake.acme_silver.${t} (id BIGINT, status STRING) USING iceberg LOCATION 'file://${home}/acme/silver/${t}' TBLPROPERTIES ('format-version' = '2')`,
          );
        await sql(`INSERT INTO lake.acme_silver.${table} VALUES ${rows}`);
      } finally {
        client.close();
      }
      return;
    }
  }
}

/** One CLI run of a case, its debug log kept for the count. Exit 0 or 99 (skipped) only. */
function runJob(c: PassCase, day: Day, work: string, remote: string): [string, string] {
  const name = `${day} ${c.name}`;
  const file = name.replace(/[^A-Za-z0-9.-]+/g, '_');
  const log = join(work, 'logs', `${file}.log`);
  const fd = openSync(log, 'w');
  const started = Date.now();
  const r = spawnSync(
    'bash',
    [
      join(root, 'scripts/lakehouse-jobs'),
      '--config',
      `configs/examples/${c.config}`,
      '--env',
      PLATFORM,
      '--remote',
      remote,
      '--log-level',
      'debug',
      '--status-file',
      join(work, 'logs', `${file}.status.json`),
      ...c.args(day),
    ],
    { cwd: root, stdio: ['ignore', 'ignore', fd] },
  );
  closeSync(fd);
  if (r.status !== 0 && r.status !== 99) throw new Error(`${name} exited ${r.status ?? r.signal} (log: ${log})`);
  say(`${name}: exit ${r.status} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return [name, log];
}

function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: root }).toString().trim();
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'unknown';
  }
}

async function run(work: string): Promise<void> {
  const remote = process.env.BENCH_REMOTE;
  const home = process.env.LAKEHOUSE_LAKE_HOME;
  if (!remote || !home) throw new Error('BENCH_REMOTE and LAKEHOUSE_LAKE_HOME must be set (bench/passes sets them)');
  mkdirSync(join(work, 'logs'), { recursive: true });
  const runs: [string, string][] = [];
  const started = Date.now();
  for (const day of DAYS) {
    const seeded = new Set<Seed>();
    for (const c of selected) {
      for (const s of c.seeds ?? []) if (!seeded.has(s)) await seed(s, day, home).then(() => seeded.add(s));
      runs.push(runJob(c, day, work, remote));
    }
  }
  const result = countRuns(join(work, 'eventlog'), runs);
  const baseline = existsSync(BASELINE) ? (JSON.parse(readFileSync(BASELINE, 'utf8')) as Baseline) : undefined;
  const { table, regressions } = summary(result, baseline);
  const head = `bench/passes ${new Date().toISOString()}, commit ${commit()}, ${selected.length} cases × ${DAYS.length} days in ${((Date.now() - started) / 1000).toFixed(0)} s`;
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'passes-last.json'), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(OUT, 'passes-last.md'), `# ${head}\n\n## Totals\n\n${table}\n## Per step\n${stepTables(result)}`);
  process.stdout.write(`\n${head}\n\n${table}\n`);
  for (const line of regressions) process.stdout.write(`${line}\n`);
  if (!regressions.length) process.stdout.write(`no run has more jobs or scans than the baseline\n`);
  // The targets (jobs per run and per step, with why each job above one per write is needed).
  const targets = baseline?.targets;
  const over = targets ? result.flatMap((r) => overTarget(r.run, kept(r), targets[caseOf(r.run)])) : [];
  for (const line of over) process.stdout.write(`${line}\n`);
  process.stdout.write(targets ? (over.length ? '' : 'every run is within its target\n') : 'the baseline has no targets yet\n');
  process.stdout.write(`per-step tables: .cache/bench/passes-last.md\n`);
  if (process.env.BENCH_PASSES_WRITE_BASELINE === '1') {
    // Merged: a filtered run (BENCH_PASSES_ONLY) updates its own runs and keeps the others.
    const runsNow = Object.fromEntries(result.map((r) => [r.run, kept(r)]));
    const next: Baseline = {
      commit: commit(),
      date: new Date().toISOString().slice(0, 10),
      runs: { ...baseline?.runs, ...runsNow },
      ...(baseline?.targets ? { targets: baseline.targets } : {}),
    };
    writeFileSync(BASELINE, `${JSON.stringify(next, null, 2)}\n`);
    say(`baseline written: bench/passes-baseline.json (${Object.keys(runsNow).length} runs)`);
  }
  // BENCH_PASSES_STRICT=1: a run over its target fails the bench (after the baseline is written).
  if (process.env.BENCH_PASSES_STRICT === '1' && over.length) process.exitCode = 1;
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'needs') {
  for (const s of new Set(selected.flatMap((c) => c.seeds ?? []))) process.stdout.write(`${s}\n`);
} else if (command === 'run' && rest[0] === '--work' && rest[1]) {
  await run(rest[1]);
} else {
  throw new Error('usage: passes.ts needs | run --work <dir>');
}
