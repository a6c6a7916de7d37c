/**
 * The benchmark driver behind bench/run: ours and the pyspark-client peer, side by side against the
 * same Spark Connect server, runs interleaved (the order flips every round, warm-up rounds are
 * discarded) so that machine noise hits both. Prints a table and writes every raw sample to
 * .cache/bench/last.json.
 *
 * Run from the repository root by bench/run, which sets BENCH_REMOTE and BENCH_PYTHON.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { writeConfigs } from './configs.js';
import { cliNodeFlags, cliV8Flags } from './node-flags.js';

// ---------------------------------------------------------------------------------------------
// Settings

function intEnv(name: string, fallback: number, min = 0): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${raw}: expected an integer ≥ ${min}`);
  return n;
}

const REMOTE = process.env.BENCH_REMOTE ?? 'sc://127.0.0.1:15002';
const PYTHON = process.env.BENCH_PYTHON ?? '.cache/bench/venv/bin/python';
const RUNS = intEnv('BENCH_RUNS', 15, 1);
const HEAVY_RUNS = intEnv('BENCH_HEAVY_RUNS', Math.max(3, Math.round(RUNS / 3)), 1);
const ROW_RUNS = intEnv('BENCH_COLLECT_ROWS_RUNS', Math.min(3, HEAVY_RUNS), 0);
const WARMUP = intEnv('BENCH_WARMUP', 1, 0);
const PROCESS_SAMPLE = intEnv('BENCH_PROCESS_SAMPLE', 50, 1);
const CONFIGS = intEnv('BENCH_CONFIGS', 1000, 1);
const INVALID = intEnv('BENCH_INVALID', 10, 0);
const ROWS = intEnv('BENCH_ROWS', 1_000_000, 1);
const TIMEOUT_MS = intEnv('BENCH_TIMEOUT_S', 300, 1) * 1000;
const SCHEMA = 'schemas/cdc-silver-merge.v1.schema.json';
const LAKE_HOME = '/bench/lake'; // substituted into tenant.storage-root, never touched
const OUT_DIR = '.cache/bench';

/** Row counts of "collect streamed to a sink" (ours only): peak RSS must not grow with them. */
const STREAM_ROWS = (process.env.BENCH_STREAM_ROWS ?? `${ROWS},${ROWS * 10}`).split(',').filter(Boolean).map(Number);
const STREAM_RUNS = intEnv('BENCH_STREAM_RUNS', 3, 0);
const collectSql = (rows: number) =>
  [
    'SELECT id, id * 2 AS a, CAST(id AS DOUBLE) / 3 AS b, CAST(id AS STRING) AS c, id % 7 = 0 AS d,',
    "CAST(id AS DECIMAL(18,2)) AS e, DATE'2026-01-01' + CAST(id % 365 AS INT) AS f,",
    "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS g,",
    `CAST(NULL AS STRING) AS h, id % 100 AS i FROM range(${rows})`,
  ].join(' ');
const COLLECT_SQL = [
  'SELECT id, id * 2 AS a, CAST(id AS DOUBLE) / 3 AS b, CAST(id AS STRING) AS c, id % 7 = 0 AS d,',
  "CAST(id AS DECIMAL(18,2)) AS e, DATE'2026-01-01' + CAST(id % 365 AS INT) AS f,",
  "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS g,",
  `CAST(NULL AS STRING) AS h, id % 100 AS i FROM range(${ROWS})`,
].join(' ');
/** Node flags of the CLI as scripts/lakehouse-jobs and the image's entrypoint run it (scripts/build/node-flags). */
const CLI_NODE_FLAGS = cliNodeFlags();
/** The same bar source maps, for the bench drivers (compiled by tsc without maps). */
const DRIVER_NODE_FLAGS = cliV8Flags();
/** sum(a) = sum(2·id) for id < ROWS. */
const EXPECTED_SUM_A = (BigInt(ROWS) * BigInt(ROWS - 1)).toString();

const PEER_PING = [
  'import sys',
  'from pyspark.sql.connect.session import SparkSession',
  'spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()',
  'print(spark.version)',
].join('\n');

// ---------------------------------------------------------------------------------------------
// Running one process: wall time from spawn to exit, peak RSS from GNU time when present

interface ProcResult {
  wallMs: number;
  /** Peak RSS of the process (KiB) by GNU time; null without it. */
  rssKb: number | null;
  code: number | null;
  stdout: string;
  stderr: string;
}

const GNU_TIME = detectGnuTime();

function detectGnuTime(): string | null {
  const probe = join(mkdtempSync(join(tmpdir(), 'bench-time-')), 'rss');
  try {
    const r = spawnSync('/usr/bin/time', ['-f', '%M', '-o', probe, 'true']);
    return r.status === 0 && /^\d+\s*$/.test(readFileSync(probe, 'utf8')) ? '/usr/bin/time' : null;
  } catch {
    return null;
  } finally {
    rmSync(join(probe, '..'), { recursive: true, force: true });
  }
}

let scratch = '';

function runProc(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ProcResult> {
  const rssFile = join(scratch, 'rss');
  const [file, argv] = GNU_TIME ? [GNU_TIME, ['-f', '%M', '-o', rssFile, cmd, ...args]] : [cmd, args];
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(file, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
      clearTimeout(timer);
      let rssKb: number | null = null;
      if (GNU_TIME) {
        // GNU time puts "Command exited with non-zero status N" before the value when N ≠ 0.
        const last = readFileSync(rssFile, 'utf8').trim().split('\n').at(-1) ?? '';
        rssKb = /^\d+$/.test(last) ? Number(last) : null;
      }
      resolve({ wallMs, rssKb, code, stdout, stderr });
    });
  });
}

class BenchError extends Error {}

function expectExit(what: string, r: ProcResult, code = 0): void {
  if (r.code !== code) throw new BenchError(`${what}: exit ${r.code}, expected ${code}\n${r.stderr.slice(-2000)}`);
}

function lastJson(what: string, r: ProcResult): Record<string, any> {
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as Record<string, any>;
  } catch {
    throw new BenchError(`${what}: no JSON result on stdout\n${r.stdout.slice(-1000)}\n${r.stderr.slice(-2000)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Interleaving and statistics

interface Sample {
  wallMs: number;
  rssKb: number | null;
  /** The driver's own timing of the measured work (excludes process start and imports). */
  workMs?: number;
  /** The driver's own peak RSS (process.resourceUsage / getrusage), KiB. */
  selfRssKb?: number;
  /** The driver's CPU time (all threads) during the measured work. */
  cpuMs?: number;
  extra?: Record<string, unknown>;
}

type Contender = { id: string; run: (round: number) => Promise<Sample>; rounds?: number };

/**
 * `warmup` discarded rounds, then `rounds` measured ones; every round runs each contender once, the
 * order rotating by round (A B, B A, … or A B C, B C A, C A B, …).
 */
async function interleave(title: string, contenders: Contender[], rounds: number, warmup: number): Promise<Record<string, Sample[]>> {
  const samples: Record<string, Sample[]> = Object.fromEntries(contenders.map((c) => [c.id, []]));
  const total = warmup + rounds;
  for (let round = 0; round < total; round++) {
    const measured = round >= warmup;
    const active = contenders.filter((c) => !measured || (c.rounds ?? rounds) > round - warmup);
    const order = active.map((_, k) => active[(k + round) % active.length]!);
    for (const c of order) {
      const s = await c.run(round);
      if (measured) samples[c.id]!.push(s);
    }
    if (process.stderr.isTTY) process.stderr.write(`\r  ${title}: round ${round + 1}/${total}${measured ? '' : ' (warm-up)'}   `);
  }
  process.stderr.write(`${process.stderr.isTTY ? '\r' : ''}  ${title}: ${total} rounds (${warmup} warm-up) done\n`);
  return samples;
}

interface Stats {
  n: number;
  median: number;
  p90: number;
  min: number;
  max: number;
  mean: number;
}

function stats(values: number[]): Stats | null {
  if (values.length === 0) return null;
  const v = [...values].sort((a, b) => a - b);
  const at = (q: number) => v[Math.min(v.length - 1, Math.ceil(q * v.length) - 1)]!;
  const mid = v.length / 2;
  const median = v.length % 2 ? v[Math.floor(mid)]! : (v[mid - 1]! + v[mid]!) / 2;
  return { n: v.length, median, p90: at(0.9), min: v[0]!, max: v.at(-1)!, mean: v.reduce((a, b) => a + b, 0) / v.length };
}

const pick = (samples: Sample[], f: (s: Sample) => number | null | undefined) => stats(samples.map(f).filter((x): x is number => typeof x === 'number'));

// ---------------------------------------------------------------------------------------------
// The three benchmarks

const CLI = 'dist/cli.mjs';
const BUILD = `${OUT_DIR}/build/bench`;
const childEnv = { ...process.env, LAKEHOUSE_LAKE_HOME: LAKE_HOME };

async function coldStart() {
  let serverVersion = '';
  const ours = async (): Promise<Sample> => {
    const r = await runProc('node', [...CLI_NODE_FLAGS, CLI, 'ping', '--remote', REMOTE], childEnv);
    expectExit('ours: lakehouse-jobs ping', r);
    const out = lastJson('ours: lakehouse-jobs ping', r);
    serverVersion = String(out.serverVersion);
    return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: Number(out.ms) };
  };
  const peer = async (): Promise<Sample> => {
    const r = await runProc(PYTHON, ['-c', PEER_PING, REMOTE], childEnv);
    expectExit('peer: python -c SparkSession…spark.version', r);
    const v = r.stdout.trim();
    if (serverVersion && v !== serverVersion) throw new BenchError(`peer saw server ${v}, ours ${serverVersion}`);
    return { wallMs: r.wallMs, rssKb: r.rssKb };
  };
  const samples = await interleave(
    'cold start',
    [
      { id: 'ours', run: ours },
      { id: 'peer', run: peer },
    ],
    RUNS,
    Math.max(WARMUP, 2),
  );
  return { samples, serverVersion };
}

/** The configs read ${LAKEHOUSE_LAKE_HOME}, which a job config may only with a platform config that allows it. */
function benchPlatform(): string {
  const platform = join(scratch, 'platform.conf');
  writeFileSync(
    platform,
    'config-env { allow = ["LAKEHOUSE_LAKE_HOME"] }\ncatalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\n',
  );
  return platform;
}

async function validate(dir: string, expected: { valid: string[]; invalid: string[] }) {
  const check = (who: string, out: Record<string, any>) => {
    const got = [...(out.invalidFiles as string[])].sort().join(',');
    if (out.valid !== expected.valid.length || got !== [...expected.invalid].sort().join(','))
      throw new BenchError(`${who}: ${out.valid} valid, invalid [${got}]; expected ${expected.valid.length} valid, invalid [${expected.invalid.join(',')}]`);
  };
  const ours = async (): Promise<Sample> => {
    const r = await runProc('node', [`${BUILD}/validate.js`, dir, benchPlatform()], childEnv);
    expectExit('ours: validate.js', r);
    const out = lastJson('ours: validate.js', r);
    check('ours', out);
    return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: out.ms, selfRssKb: out.maxRssKb };
  };
  const peer = async (): Promise<Sample> => {
    const r = await runProc(PYTHON, ['bench/peer_validate.py', '--schema', SCHEMA, dir], childEnv);
    expectExit('peer: peer_validate.py', r);
    const out = lastJson('peer: peer_validate.py', r);
    check('peer', out);
    return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: out.ms, selfRssKb: out.maxRssKb };
  };
  return interleave(
    `validate ${expected.valid.length + expected.invalid.length} configs`,
    [
      { id: 'ours', run: ours },
      { id: 'peer', run: peer },
    ],
    HEAVY_RUNS,
    WARMUP,
  );
}

async function validatePerProcess(dir: string, valid: string[]) {
  const step = Math.max(1, Math.floor(valid.length / PROCESS_SAMPLE));
  const sample = valid.filter((_, i) => i % step === 0).slice(0, PROCESS_SAMPLE);
  const warm = 2;
  const file = (round: number) => join(dir, sample[(round - warm + sample.length) % sample.length]!);
  const termination = join(scratch, 'termination-log');
  const platform = benchPlatform();
  const ours = async (round: number): Promise<Sample> => {
    const r = await runProc(
      'node',
      [...CLI_NODE_FLAGS, CLI, 'validate', '--job', 'cdc-silver-merge', '--config', file(round), '--env', platform, '--termination-log', termination],
      childEnv,
    );
    expectExit(`ours: lakehouse-jobs validate ${file(round)}`, r);
    return { wallMs: r.wallMs, rssKb: r.rssKb };
  };
  const peer = async (round: number): Promise<Sample> => {
    const r = await runProc(PYTHON, ['bench/peer_validate.py', '--schema', SCHEMA, file(round)], childEnv);
    expectExit(`peer: peer_validate.py ${file(round)}`, r);
    return { wallMs: r.wallMs, rssKb: r.rssKb };
  };
  return interleave(
    'validate, one process per config',
    [
      { id: 'ours', run: ours },
      { id: 'peer', run: peer },
    ],
    sample.length,
    warm,
  );
}

async function collect() {
  const check = (who: string, out: Record<string, any>) => {
    if (out.rows !== ROWS || out.cols !== 10 || out.sumA !== EXPECTED_SUM_A)
      throw new BenchError(`${who}: ${out.rows} rows × ${out.cols} columns, sum(a) = ${out.sumA}; expected ${ROWS} × 10, ${EXPECTED_SUM_A}`);
  };
  const ours = async (): Promise<Sample> => {
    const r = await runProc('node', [...DRIVER_NODE_FLAGS, `${BUILD}/collect.js`, REMOTE, COLLECT_SQL], childEnv);
    expectExit('ours: collect.js', r);
    const out = lastJson('ours: collect.js', r);
    check('ours', out);
    return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: out.ms, selfRssKb: out.maxRssKb, cpuMs: out.cpuMs, extra: { batches: out.batches } };
  };
  const peer = (mode: 'toArrow' | 'collect') => async (): Promise<Sample> => {
    const r = await runProc(PYTHON, ['bench/peer_collect.py', REMOTE, mode, COLLECT_SQL], childEnv);
    expectExit(`peer: peer_collect.py ${mode}`, r);
    const out = lastJson(`peer: peer_collect.py ${mode}`, r);
    check(`peer ${mode}()`, out);
    return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: out.ms, selfRssKb: out.maxRssKb, cpuMs: out.cpuMs };
  };
  return interleave(
    `collect ${ROWS.toLocaleString('en-US')} rows × 10 columns`,
    [
      { id: 'ours', run: ours },
      { id: 'peerToArrow', run: peer('toArrow') },
      // collect() builds a Row per row: slow, so fewer runs and no warm-up of its own (toArrow's warms the server).
      ...(ROW_RUNS > 0 ? [{ id: 'peerCollect', run: peer('collect'), rounds: ROW_RUNS }] : []),
    ],
    HEAVY_RUNS,
    WARMUP,
  );
}

/** Ours only: the same query streamed to a sink (`executeToSink`) at each of STREAM_ROWS, interleaved. */
async function collectStreamed() {
  const contenders = STREAM_ROWS.map((rows) => ({
    id: String(rows),
    run: async (): Promise<Sample> => {
      // One partition per 500,000 rows: the server then streams partition by partition instead of
      // building a 10M-row partition in its own memory first (what it does with range's default 2).
      const sql = collectSql(rows).replace(`range(${rows})`, `range(0, ${rows}, 1, ${Math.max(2, Math.ceil(rows / 500_000))})`);
      const r = await runProc('node', [...DRIVER_NODE_FLAGS, `${BUILD}/collect.js`, REMOTE, sql, 'sink'], childEnv);
      expectExit('ours: collect.js sink', r);
      const out = lastJson('ours: collect.js sink', r);
      const sum = (BigInt(rows) * BigInt(rows - 1)).toString();
      if (out.rows !== rows || out.sumA !== sum) throw new BenchError(`ours (sink): ${out.rows} rows, sum(a) = ${out.sumA}; expected ${rows}, ${sum}`);
      return { wallMs: r.wallMs, rssKb: r.rssKb, workMs: out.ms, selfRssKb: out.maxRssKb, cpuMs: out.cpuMs };
    },
  }));
  const none: Record<string, Sample[]> = {};
  return STREAM_RUNS > 0 && contenders.length > 0 ? interleave('collect streamed to a sink', contenders, STREAM_RUNS, 0) : none;
}

// ---------------------------------------------------------------------------------------------
// Report

function machine(serverVersion: string, loadBefore: number[]) {
  const py = spawnSync(
    PYTHON,
    [
      '-c',
      "import sys, importlib.metadata as m; print(sys.version.split()[0], *(m.version(p) for p in ('pyspark-client', 'pyarrow', 'pyhocon', 'jsonschema')))",
    ],
    { encoding: 'utf8' },
  )
    .stdout.trim()
    .split(' ');
  const git = (...a: string[]) => spawnSync('git', a, { encoding: 'utf8' }).stdout.trim();
  return {
    date: new Date().toISOString(),
    commit: git('rev-parse', '--short', 'HEAD'),
    /** Uncommitted changes under src/ were part of what ran. */
    srcDirty: git('status', '--porcelain', '--', 'src') !== '',
    nproc: availableParallelism(),
    cpu: cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    python: py[0],
    pysparkClient: py[1],
    pyarrow: py[2],
    pyhocon: py[3],
    jsonschema: py[4],
    server: `Spark ${serverVersion} (Spark Connect, ${REMOTE})`,
    /** 1-minute load average before and after: the 2 cores are shared with whatever else runs. */
    load: { before: loadBefore[0]!, after: loadavg()[0]! },
    peakRss: GNU_TIME ? 'GNU time %M of the whole process' : 'the drivers’ own getrusage (CLI processes: not measured)',
  };
}

const fmtMs = (ms: number | undefined) =>
  ms === undefined ? '–' : ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
const fmtMb = (kb: number | undefined) => (kb === undefined ? '–' : `${Math.round(kb / 1024)} MB`);

interface Line {
  name: string;
  ours: Stats | null;
  peer: Stats | null;
  fmt: (x: number | undefined) => string;
  target?: number;
}

const HEAD = ['', 'ours median', 'ours p90', 'peer median', 'peer p90', 'ours/peer', 'target'];

function cells(lines: Line[]): string[][] {
  return lines.map((l) => {
    const ratio = l.ours && l.peer ? l.ours.median / l.peer.median : undefined;
    const target = l.target === undefined ? '' : ratio === undefined ? `≤ ${l.target}×` : `≤ ${l.target}× ${ratio <= l.target ? 'met' : 'MISSED'}`;
    return [
      l.name,
      l.fmt(l.ours?.median),
      l.fmt(l.ours?.p90),
      l.fmt(l.peer?.median),
      l.fmt(l.peer?.p90),
      ratio === undefined ? '–' : `${ratio.toFixed(2)}×`,
      target,
    ];
  });
}

/** The same table in Markdown, for bench/RESULTS.md. */
function markdown(lines: Line[]): string {
  const row = (r: string[]) => `| ${r.map((x, c) => (c === 0 ? x.replace(/^ {2}/, '↳ ') : x)).join(' | ')} |`;
  return [row(HEAD), `|${HEAD.map((_, c) => (c === 0 ? ' --- ' : ' ---: ')).join('|')}|`, ...cells(lines).map(row)].join('\n');
}

function table(lines: Line[]): string {
  const head = HEAD;
  const rows = cells(lines);
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) =>
    r
      .map((x, c) => (c === 0 ? x.padEnd(widths[c]!) : x.padStart(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

async function main(): Promise<void> {
  mkdirSync(OUT_DIR, { recursive: true });
  scratch = mkdtempSync(join(tmpdir(), 'lakehouse-bench-'));
  const t0 = Date.now();
  const loadBefore = loadavg();
  try {
    process.stderr.write(
      `bench: remote ${REMOTE}; ${RUNS} cold-start runs, ${HEAVY_RUNS} validate/collect runs (${ROW_RUNS} of collect()), ${PROCESS_SAMPLE} configs one process each, warm-up ${WARMUP}; peak RSS ${GNU_TIME ? 'by GNU time' : 'self-reported'}\n`,
    );
    const dir = join(scratch, 'configs');
    mkdirSync(dir);
    const generated = writeConfigs(dir, CONFIGS, INVALID);

    const cold = await coldStart();
    const val = await validate(dir, generated);
    const perProc = await validatePerProcess(dir, generated.valid);
    const col = await collect();
    const streamed = await collectStreamed();

    const n = (CONFIGS + INVALID).toLocaleString('en-US');
    const rows = ROWS.toLocaleString('en-US');
    /** Rows per second at the median and at the p90 (slow) collect time. */
    const rowsPerSec = (s: Sample[]): Stats | null => {
      const t = pick(s, (x) => x.workMs);
      const rate = (ms: number) => (ROWS / ms) * 1000;
      return t && { n: t.n, median: rate(t.median), p90: rate(t.p90), min: rate(t.max), max: rate(t.min), mean: rate(t.mean) };
    };
    const lines: Line[] = [
      {
        name: 'cold start → first RPC (process wall)',
        ours: pick(cold.samples.ours!, (s) => s.wallMs),
        peer: pick(cold.samples.peer!, (s) => s.wallMs),
        fmt: fmtMs,
        target: 0.25,
      },
      { name: '  peak RSS', ours: pick(cold.samples.ours!, (s) => s.rssKb), peer: pick(cold.samples.peer!, (s) => s.rssKb), fmt: fmtMb },
      { name: `validate ${n} configs (in process)`, ours: pick(val.ours!, (s) => s.workMs), peer: pick(val.peer!, (s) => s.workMs), fmt: fmtMs },
      { name: '  whole process wall', ours: pick(val.ours!, (s) => s.wallMs), peer: pick(val.peer!, (s) => s.wallMs), fmt: fmtMs },
      { name: '  peak RSS', ours: pick(val.ours!, (s) => s.rssKb ?? s.selfRssKb), peer: pick(val.peer!, (s) => s.rssKb ?? s.selfRssKb), fmt: fmtMb },
      {
        name: `validate 1 config per process (n=${perProc.ours!.length})`,
        ours: pick(perProc.ours!, (s) => s.wallMs),
        peer: pick(perProc.peer!, (s) => s.wallMs),
        fmt: fmtMs,
        target: 1.0,
      },
      { name: '  peak RSS', ours: pick(perProc.ours!, (s) => s.rssKb), peer: pick(perProc.peer!, (s) => s.rssKb), fmt: fmtMb },
      {
        name: `collect ${rows} × 10 → Arrow (vs toArrow)`,
        ours: pick(col.ours!, (s) => s.workMs),
        peer: pick(col.peerToArrow!, (s) => s.workMs),
        fmt: fmtMs,
        target: 1.0,
      },
      {
        name: '  rows/s (at median, p90 time)',
        ours: rowsPerSec(col.ours!),
        peer: rowsPerSec(col.peerToArrow!),
        fmt: (x) => (x === undefined ? '–' : `${Math.round(x / 1000)}k`),
      },
      { name: '  client CPU during the collect', ours: pick(col.ours!, (s) => s.cpuMs), peer: pick(col.peerToArrow!, (s) => s.cpuMs), fmt: fmtMs, target: 1.5 },
      { name: '  peak RSS', ours: pick(col.ours!, (s) => s.rssKb ?? s.selfRssKb), peer: pick(col.peerToArrow!, (s) => s.rssKb ?? s.selfRssKb), fmt: fmtMb },
      { name: '  whole process wall', ours: pick(col.ours!, (s) => s.wallMs), peer: pick(col.peerToArrow!, (s) => s.wallMs), fmt: fmtMs },
      ...Object.entries(streamed).flatMap(([rows, samples]) => [
        {
          name: `collect ${Number(rows).toLocaleString('en-US')} × 10 streamed to a sink (ours only)`,
          ours: pick(samples, (s) => s.workMs),
          peer: null,
          fmt: fmtMs,
        },
        { name: '  client CPU', ours: pick(samples, (s) => s.cpuMs), peer: null, fmt: fmtMs },
        { name: '  peak RSS (target ≤ 150 MB, flat)', ours: pick(samples, (s) => s.rssKb ?? s.selfRssKb), peer: null, fmt: fmtMb },
      ]),
      ...(col.peerCollect?.length
        ? [
            {
              name: `collect vs peer collect() → Rows (n=${col.peerCollect.length})`,
              ours: pick(col.ours!, (s) => s.workMs),
              peer: pick(col.peerCollect, (s) => s.workMs),
              fmt: fmtMs,
            },
            {
              name: '  peak RSS',
              ours: pick(col.ours!, (s) => s.rssKb ?? s.selfRssKb),
              peer: pick(col.peerCollect, (s) => s.rssKb ?? s.selfRssKb),
              fmt: fmtMb,
            },
          ]
        : []),
    ];
    const env = machine(cold.serverVersion, loadBefore);
    const text = table(lines);
    process.stdout.write(
      `\n${env.date}  ${env.nproc} CPUs (${env.cpu}), ${env.memGiB} GiB; Node ${env.node}, Python ${env.python}, pyspark-client ${env.pysparkClient}; ${env.server}; load ${env.load.before.toFixed(1)} → ${env.load.after.toFixed(1)}\n\n${text}\n\nbench: ${Math.round((Date.now() - t0) / 1000)} s; raw samples in ${OUT_DIR}/last.json, the table in Markdown in ${OUT_DIR}/last.md\n`,
    );
    const ratios = Object.fromEntries(lines.filter((l) => !l.name.startsWith('  ') && l.ours && l.peer).map((l) => [l.name, l.ours!.median / l.peer!.median]));
    writeFileSync(join(OUT_DIR, 'last.md'), `${markdown(lines)}\n`);
    writeFileSync(
      join(OUT_DIR, 'last.json'),
      JSON.stringify(
        {
          machine: env,
          settings: { REMOTE, RUNS, HEAVY_RUNS, ROW_RUNS, WARMUP, PROCESS_SAMPLE, CONFIGS, INVALID, ROWS, COLLECT_SQL, SCHEMA },
          lines: lines.map((l) => ({ name: l.name.trim(), ours: l.ours, peer: l.peer, target: l.target })),
          ratios,
          table: text,
          samples: { coldStart: cold.samples, validate: val, validatePerProcess: perProc, collect: col, collectStreamed: streamed },
          seconds: (Date.now() - t0) / 1000,
        },
        null,
        2,
      ) + '\n',
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`\nbench: ${e instanceof BenchError ? e.message : e instanceof Error ? e.stack : String(e)}\n`);
  process.exitCode = 1;
});
