/**
 * The cold-start levers, one at a time, side by side: `validate` of one config per process and
 * `ping` (cold start → first RPC), each lever against a bare `node -e 0` and the Python peer, runs
 * interleaved (the order rotates every round, warm-up rounds discarded). Prints medians, p90s,
 * peak RSS and ratios; the load average before and after.
 *
 *   node --import tsx bench/startup.ts          (after `npm run build`; bench/run installs the peer)
 *
 * Environment: BENCH_REMOTE (sc://…, enables the ping rows), BENCH_PYTHON (the peer's venv python,
 * default .cache/bench/venv/bin/python), BENCH_RUNS=15, BENCH_WARMUP=2, BENCH_TSC_DIST (a `tsc`
 * build of src, e.g. `npx tsc -p tsconfig.build.json --outDir .cache/tscdist`, to compare the
 * unbundled CLI), BENCH_BASE_DIST (the bundle of an earlier commit, `node scripts/build.mjs --outdir DIR`
 * in a checkout of it, to measure a change before/after in the same interleaved rounds),
 * BENCH_BASE_NODE_FLAGS (the node flags that commit runs its bundle with, space-separated: its
 * scripts/build/node-flags or entrypoint; default --enable-source-maps), BENCH_IMAGE (podman image:
 * adds container start → first RPC, via scripts/container).
 *
 * Our bundle runs with the CLI's node flags (scripts/build/node-flags), as the image runs it: its
 * V8 code caches were trained under them and V8 rejects them under other V8 flags.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeConfigs } from './configs.js';
import { cliNodeFlags, cliV8Flags } from './node-flags.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const REMOTE = process.env.BENCH_REMOTE;
const PYTHON = process.env.BENCH_PYTHON ?? '.cache/bench/venv/bin/python';
const TSC_DIST = process.env.BENCH_TSC_DIST;
const IMAGE = process.env.BENCH_IMAGE;
const BASE_DIST = process.env.BENCH_BASE_DIST;
const BASE_NODE_FLAGS = (process.env.BENCH_BASE_NODE_FLAGS ?? '--enable-source-maps').split(/\s+/).filter(Boolean);
const SCHEMA = 'schemas/cdc-silver-merge.v1.schema.json';

interface Sample {
  wallMs: number;
  rssKb: number | null;
}

const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-startup-'));

function run(cmd: string, args: string[], expectCode = 0): Promise<Sample> {
  const rssFile = join(scratch, 'rss');
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn('/usr/bin/time', ['-f', '%M', '-o', rssFile, cmd, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LAKEHOUSE_LAKE_HOME: '/bench/lake' },
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
      if (code !== expectCode) return reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}\n${stderr.slice(-1500)}`));
      const last = readFileSync(rssFile, 'utf8').trim().split('\n').at(-1) ?? '';
      resolve({ wallMs, rssKb: /^\d+$/.test(last) ? Number(last) : null });
    });
  });
}

interface Contender {
  id: string;
  cmd: string;
  args: string[];
}

async function interleave(title: string, cs: Contender[]): Promise<Record<string, Sample[]>> {
  const samples: Record<string, Sample[]> = Object.fromEntries(cs.map((c) => [c.id, []]));
  for (let round = 0; round < WARMUP + RUNS; round++) {
    for (let k = 0; k < cs.length; k++) {
      const c = cs[(k + round) % cs.length]!;
      const s = await run(c.cmd, c.args);
      if (round >= WARMUP) samples[c.id]!.push(s);
    }
  }
  process.stderr.write(`  ${title}: ${RUNS} rounds (+${WARMUP} warm-up)\n`);
  return samples;
}

const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length / 2;
  return s.length % 2 ? s[Math.floor(m)]! : (s[m - 1]! + s[m]!) / 2;
};
const p90 = (v: number[]) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.ceil(0.9 * v.length) - 1)]!;

function report(title: string, samples: Record<string, Sample[]>, peer: string, bare: string): string {
  const rows = Object.entries(samples).map(([id, s]) => {
    const w = s.map((x) => x.wallMs);
    const rss = s.map((x) => x.rssKb ?? 0);
    const m = median(w);
    const vsPeer = m / median(samples[peer]!.map((x) => x.wallMs));
    const vsBare = m / median(samples[bare]!.map((x) => x.wallMs));
    return `| ${id} | ${m.toFixed(0)} ms | ${p90(w).toFixed(0)} ms | ${Math.round(median(rss) / 1024)} MB | ${vsPeer.toFixed(2)}× | ${vsBare.toFixed(2)}× |`;
  });
  return [`**${title}**`, '', `| | median | p90 | peak RSS | vs ${peer} | vs ${bare} |`, '| --- | ---: | ---: | ---: | ---: | ---: |', ...rows].join('\n');
}

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  const dir = join(scratch, 'configs');
  spawnSync('mkdir', ['-p', dir]);
  const { valid } = writeConfigs(dir, 1, 0);
  const config = join(dir, valid[0]!);
  const term = join(scratch, 'term');
  // The generated configs read ${LAKEHOUSE_LAKE_HOME}: a platform config must allow it.
  const platform = join(scratch, 'platform.conf');
  writeFileSync(platform, 'config-env { allow = ["LAKEHOUSE_LAKE_HOME"] }\ncatalogs { lake { format = iceberg, default = true } }\n');
  const clis: [string, string[]][] = [
    ['bundle, CLI flags bar source maps', [...cliV8Flags(), 'dist/cli.mjs']],
    ['bundle + CLI flags', [...cliNodeFlags(), 'dist/cli.mjs']],
    ...(TSC_DIST ? [['tsc dist (unbundled)', [join(TSC_DIST, 'cli.js')]] as [string, string[]]] : []),
    ...(BASE_DIST ? [['base bundle + base flags', [...BASE_NODE_FLAGS, join(BASE_DIST, 'cli.mjs')]] as [string, string[]]] : []),
  ];
  const out: string[] = [];
  const validateArgs = ['validate', '--job', 'cdc-silver-merge', '--config', config, '--env', platform, '--termination-log', term];
  const v = await interleave('validate', [
    { id: 'node -e 0', cmd: 'node', args: ['-e', '0'] },
    ...clis.map(([id, a]) => ({ id, cmd: 'node', args: [...a, ...validateArgs] })),
    ...(existsSync(PYTHON) ? [{ id: 'peer (pyhocon + jsonschema)', cmd: PYTHON, args: ['bench/peer_validate.py', '--schema', SCHEMA, config] }] : []),
  ]);
  out.push(report('validate, one config per process', v, existsSync(PYTHON) ? 'peer (pyhocon + jsonschema)' : 'node -e 0', 'node -e 0'));
  if (REMOTE) {
    const peerPing = [
      '-c',
      'import sys\nfrom pyspark.sql.connect.session import SparkSession\nprint(SparkSession.builder.remote(sys.argv[1]).getOrCreate().version)',
      REMOTE,
    ];
    const p = await interleave('ping', [
      { id: 'node -e 0', cmd: 'node', args: ['-e', '0'] },
      ...clis.map(([id, a]) => ({ id, cmd: 'node', args: [...a, 'ping', '--remote', REMOTE] })),
      ...(existsSync(PYTHON) ? [{ id: 'peer (pyspark-client)', cmd: PYTHON, args: peerPing }] : []),
      ...(IMAGE
        ? [
            {
              id: `container ${IMAGE}`,
              cmd: 'bash',
              args: ['scripts/container', 'podman', 'run', '--rm', '--network', 'host', IMAGE, 'ping', '--remote', REMOTE],
            },
          ]
        : []),
    ]);
    out.push(report('cold start → first RPC (ping)', p, existsSync(PYTHON) ? 'peer (pyspark-client)' : 'node -e 0', 'node -e 0'));
  }
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'scripts/build.mjs', 'scripts/build'], { encoding: 'utf8' }).stdout.trim() !== '';
  process.stdout.write(
    `${new Date().toISOString()}  ${availableParallelism()} CPUs (${cpus()[0]?.model}), Node ${process.version}, commit ${git}${dirty ? ' (+ uncommitted src)' : ''}; CLI flags ${cliNodeFlags().join(' ')}${BASE_DIST ? `; base flags ${BASE_NODE_FLAGS.join(' ')}` : ''}; load ${load0.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}; ${RUNS} rounds + ${WARMUP} warm-up\n\n${out.join('\n\n')}\n`,
  );
}

main()
  .catch((e: unknown) => {
    process.stderr.write(`startup: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  })
  .finally(() => rmSync(scratch, { recursive: true, force: true }));
