/**
 * bench/noop-rerun (driver): issue 28 item 1, a no-op rerun of the quickstart's merge end to end
 * (process start to exit, warm server). After scripts/quickstart, each contender reruns day 2's
 * cdc-silver-merge exactly as the quickstart runs it (scripts/lakehouse-jobs's node flags, the
 * platform's `remote = "local"`, so the reuse of the local server counts), interleaved with the
 * others, order flipped every round, warm-up rounds thrown away. Per run: wall time, the Spark
 * server's CPU (its process group's utime + stime from /proc), and the run's status must say
 * nothing was committed. Medians, ratios against the first contender after ours.
 *
 *   tsx bench/noop-rerun.ts <label>=<dist dir> …     e.g. ours=dist main=.cache/bench/main-dist
 *
 * Environment: BENCH_ROUNDS (10), BENCH_WARMUP (2), SPARK_CONNECT_PORT, LAKEHOUSE_CACHE and
 * LAKEHOUSE_LAKE_HOME as for the quickstart. Results: .cache/bench/noop-rerun-last.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliNodeFlags } from './node-flags.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const DAY = '2026-07-06';
const PORT = process.env.SPARK_CONNECT_PORT ?? '15002';
const CACHE = process.env.LAKEHOUSE_CACHE ?? '.cache';
const contenders = process.argv.slice(2).map((a) => {
  const [label, dist] = a.split('=');
  if (!label || !dist) throw new Error('usage: noop-rerun.ts <label>=<dist dir> …');
  return { label, cli: join(dist, 'cli.mjs') };
});
if (contenders.length < 2) throw new Error('noop-rerun.ts needs two contenders, side by side');

const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);
/** CPU seconds (user + system) of every process in the server's process group (the JVM and its children). */
function serverCpuS(): number {
  const pid = Number(readFileSync(join(CACHE, `spark/run-${PORT}/server.pid`), 'utf8').trim());
  let ticks = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Fields after the name: state ppid pgrp session … utime (14th overall) stime (15th).
      if (Number(f[1]) === pid || Number(f[2]) === pid || Number(p) === pid) ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // A process that ended meanwhile.
    }
  }
  return ticks / TICK;
}

interface Sample {
  wallS: number;
  serverCpuS: number;
}

function runOnce(cli: string, statusFile: string): Sample {
  const args = [
    ...cliNodeFlags(),
    cli,
    '--job',
    'cdc-silver-merge',
    '--config',
    'configs/examples/cdc-silver-merge.v1.conf',
    '--env',
    'configs/examples/platform-local.conf',
    '--set',
    'tenant.id=acme',
    '--set',
    `source.where="_snapshot_date = '${DAY}'"`,
    '--logical-date',
    DAY,
    '--log-level',
    'warn',
    '--status-file',
    statusFile,
  ];
  const cpu0 = serverCpuS();
  const t0 = performance.now();
  const r = spawnSync('node', args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const wallS = (performance.now() - t0) / 1000;
  const cpu = serverCpuS() - cpu0;
  if (r.status !== 0) throw new Error(`${cli} exited ${r.status}: ${r.stderr}`);
  const status = JSON.parse(readFileSync(statusFile, 'utf8')) as { outputs: { committed: boolean; metrics: Record<string, number> }[] };
  const out = status.outputs[0];
  if (!out || out.committed || out.metrics.inserted || out.metrics.updated || out.metrics.deleted)
    throw new Error(`${cli}: not a no-op rerun: ${JSON.stringify(status.outputs)}`);
  return { wallS, serverCpuS: cpu };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const dir = join(tmpdir(), `noop-rerun-${process.pid}`);
mkdirSync(dir, { recursive: true });
const samples: Record<string, Sample[]> = Object.fromEntries(contenders.map((c) => [c.label, []]));
const load0 = loadavg()[0]!;
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  const order = round % 2 === 0 ? contenders : [...contenders].reverse();
  for (const c of order) {
    const s = runOnce(c.cli, join(dir, `${c.label}-${round}.json`));
    process.stderr.write(
      `bench/noop-rerun: round ${round}${round < WARMUP ? ' (warm-up)' : ''} ${c.label}: ${s.wallS.toFixed(2)} s, server CPU ${s.serverCpuS.toFixed(2)} s\n`,
    );
    if (round >= WARMUP) samples[c.label]!.push(s);
  }
}
const load1 = loadavg()[0]!;
const [ours, peer] = [contenders[0]!.label, contenders[1]!.label];
const med = (label: string, k: keyof Sample) => median(samples[label]!.map((s) => s[k]));
const rows = contenders.map(
  (c) =>
    `| ${c.label} | ${med(c.label, 'wallS').toFixed(2)} s | ${Math.max(...samples[c.label]!.map((s) => s.wallS)).toFixed(2)} s | ${med(c.label, 'serverCpuS').toFixed(2)} s |`,
);
const head = `bench/noop-rerun ${new Date().toISOString()}: ${availableParallelism()} CPUs (${cpus()[0]?.model}), Node ${process.version}, load ${load0.toFixed(1)} → ${load1.toFixed(1)}, ${ROUNDS} rounds + ${WARMUP} warm-up`;
const table = [
  '| contender | wall, median | wall, max | server CPU, median |',
  '| --- | ---: | ---: | ---: |',
  ...rows,
  `| ratio ${ours}/${peer} | **${(med(ours, 'wallS') / med(peer, 'wallS')).toFixed(2)}×** | | **${(med(ours, 'serverCpuS') / med(peer, 'serverCpuS')).toFixed(2)}×** |`,
].join('\n');
process.stdout.write(`${head}\n\n${table}\n`);
mkdirSync('.cache/bench', { recursive: true });
writeFileSync('.cache/bench/noop-rerun-last.json', `${JSON.stringify({ head, samples, load: [load0, load1] }, null, 2)}\n`);
