// scripts/test's runner (see its header for the commands): the unit tier, then the integration
// files in groups, each group a vitest process of its own against servers of its own, side by
// side; then one summary of every report (scripts/test-summary.mjs).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assignGroups, groupEnv, installsFor, planFiles, selectFiles, tierFiles } from './test-plan.mjs';

const root = join(import.meta.dirname, '..');
const reports = join(root, '.cache/test-reports');
const timingsFile = join(root, 'test/timings.json');
const started = Date.now();
const secs = (ms) => `${(ms / 1000).toFixed(0)} s`;
const say = (text) => console.log(`test: [${secs(Date.now() - started)}] ${text}`);

// vitest options that take a value as the next argument (everything else not starting with - is a file filter).
const VALUE_OPTIONS = new Set(['-t', '--testNamePattern', '--retry', '--bail', '--testTimeout', '--hookTimeout', '--seed']);

function parse(argv) {
  const o = { mode: 'run', groups: 1, options: [], filters: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--fast') o.mode = 'fast';
    else if (a === '--install') o.mode = 'install';
    else if (a === '--record-timings') o.mode = 'record';
    else if (a === '--plan') o.mode = 'plan';
    else if (a === '--groups' || a.startsWith('--groups=')) {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      o.groups = Number(v);
      if (!Number.isInteger(o.groups) || o.groups < 1) throw new Error(`--groups wants a whole number of groups, got ${JSON.stringify(v)}`);
    } else if (a.startsWith('-')) {
      o.options.push(a);
      if (VALUE_OPTIONS.has(a) && i + 1 < argv.length) o.options.push(argv[++i]);
    } else o.filters.push(a);
  }
  return o;
}

/** Runs a command; each output line goes to stdout, prefixed; resolves to its exit code. */
function run(cmd, args, { env = process.env, prefix = '' } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [child.stdout, child.stderr]) {
      let rest = '';
      stream.on('data', (b) => {
        const lines = (rest + b.toString()).split('\n');
        rest = lines.pop();
        for (const l of lines) process.stdout.write(`${prefix}${l}\n`);
      });
      stream.on('end', () => rest && process.stdout.write(`${prefix}${rest}\n`));
    }
    child.on('error', (e) => {
      process.stdout.write(`${prefix}${cmd}: ${e.message}\n`);
      resolve(127);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

const vitest = join(root, 'node_modules/vitest/vitest.mjs');

/** One vitest process; its JSON report lands in `report`. */
async function vitestRun(project, files, options, report, { env, prefix } = {}) {
  rmSync(report, { force: true }); // never summarise an earlier run
  const args = [vitest, 'run', '--project', project, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...options, ...files];
  return run(process.execPath, args, { env, prefix });
}

/** The installs the needs take, in parallel; the apt ones one after another under one lock. */
async function install(needs) {
  const { parallel, apt } = installsFor(needs);
  if (parallel.length + apt.length === 0) return true;
  mkdirSync(reports, { recursive: true });
  const one = async ({ need, script, args }) => {
    const t0 = Date.now();
    const code = await run('bash', [join(root, script), ...args], { prefix: `[install ${need}] ` });
    say(`install ${need} (${script} ${args.join(' ')}): ${code === 0 ? 'done' : `failed (exit ${code})`} in ${secs(Date.now() - t0)}`);
    return code === 0;
  };
  const aptLock = join(process.env.LAKEHOUSE_CACHE ?? join(root, '.cache'), 'apt-install.lock');
  mkdirSync(join(aptLock, '..'), { recursive: true });
  const aptChain = async () => {
    let ok = true;
    for (const step of apt) {
      const t0 = Date.now();
      const code = await run('flock', [aptLock, 'bash', join(root, step.script), ...step.args], { prefix: `[install ${step.need}] ` });
      say(`install ${step.need} (${step.script} ${step.args.join(' ')}): ${code === 0 ? 'done' : `failed (exit ${code})`} in ${secs(Date.now() - t0)}`);
      ok &&= code === 0;
    }
    return ok;
  };
  say(`installing in parallel: ${[...parallel, ...apt].map((s) => `${s.script} ${s.args.join(' ')}`).join(', ')}`);
  const results = await Promise.all([aptChain(), ...parallel.map(one)]);
  return results.every(Boolean);
}

function readTimings() {
  try {
    return JSON.parse(readFileSync(timingsFile, 'utf8'));
  } catch {
    return {};
  }
}

/** The closing summary over every vitest process of the run; 1 when it counts a failure. */
function summarise(pairs, expected, extraLines, failures = []) {
  const list = join(reports, 'expected-files.txt');
  writeFileSync(list, expected.join('\n') + '\n');
  const args = [
    join(root, 'scripts/test-summary.mjs'),
    '--expect',
    list,
    ...failures.flatMap((f) => ['--failed', f]),
    ...pairs.flatMap(([r, c]) => [r, String(c)]),
  ];
  for (const l of extraLines) console.log(l);
  let out;
  try {
    out = execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
  } catch {
    console.log('failed: scripts/test-summary.mjs could not summarise the reports');
    console.log('0 passed, 1 failed');
    return 1;
  }
  process.stdout.write(out);
  const last = /^(\d+) passed, (\d+) failed/.exec(out.trimEnd().split('\n').pop() ?? '');
  return last && last[2] === '0' && failures.length === 0 && pairs.every(([, c]) => c === 0) ? 0 : 1;
}

/** All reports merged into .cache/vitest-report.json (vitest's JSON shape), for tools that read one. */
function mergeReports(paths) {
  const merged = { numTotalTests: 0, numPassedTests: 0, numFailedTests: 0, testResults: [] };
  for (const p of paths) {
    if (!existsSync(p)) continue;
    const r = JSON.parse(readFileSync(p, 'utf8'));
    for (const k of ['numTotalTests', 'numPassedTests', 'numFailedTests']) merged[k] += r[k] ?? 0;
    merged.testResults.push(...(r.testResults ?? []));
  }
  writeFileSync(join(root, '.cache/vitest-report.json'), JSON.stringify(merged));
}

async function main() {
  const o = parse(process.argv.slice(2));
  mkdirSync(reports, { recursive: true });
  const unitFiles = selectFiles(tierFiles(root, 'unit'), o.filters, root);
  const integrationFiles = selectFiles(tierFiles(root, 'integration'), o.filters, root);

  if (o.mode === 'record') {
    const report = JSON.parse(readFileSync(o.filters[0] ?? join(root, '.cache/vitest-report.json'), 'utf8'));
    const timings = readTimings();
    for (const r of report.testResults ?? []) {
      const file = r.name.startsWith(root) ? r.name.slice(root.length + 1) : r.name;
      if (!file.startsWith('test/unit/') && r.endTime > r.startTime) timings[file] = Math.round((r.endTime - r.startTime) / 100) / 10;
    }
    const sorted = Object.fromEntries(Object.entries(timings).sort(([a], [b]) => a.localeCompare(b)));
    writeFileSync(timingsFile, JSON.stringify(sorted, null, 2) + '\n');
    say(`wrote ${Object.keys(sorted).length} timings to test/timings.json`);
    return 0;
  }

  if (o.mode === 'fast') {
    const report = join(reports, 'unit.json');
    const code = unitFiles.length ? await vitestRun('unit', o.filters.length ? unitFiles : [], o.options, report) : 0;
    return summarise(unitFiles.length ? [[report, code]] : [], unitFiles, []);
  }

  const plan = planFiles(root, integrationFiles, readTimings());
  const needs = [...new Set(plan.flatMap((f) => f.needs))];
  if (o.mode === 'install') return (await install(needs)) ? 0 : 1;

  if (o.groups > 1 && process.env.SPARK_REMOTE) throw new Error('--groups starts servers of its own: unset SPARK_REMOTE');
  // The safety net for a file written without the declaration (DEFAULT_NEEDS): said, not silent.
  for (const f of plan.filter((p) => !p.declared)) say(`${f.file} has no needs(...) call: it gets ${f.needs.join(', ')} (test/README.md)`);
  const groups = assignGroups(plan, o.groups);
  for (const [k, g] of groups.entries())
    say(
      `group ${k + 1}: ${g.segments.map((s) => `${s.files.length} files on ${s.server ?? 'no'} server`).join(', then ')}, expected ${g.seconds} s (test/timings.json)`,
    );
  if (o.mode === 'plan') {
    for (const [k, g] of groups.entries()) for (const s of g.segments) for (const f of s.files) console.log(`${k + 1} ${s.server ?? '-'} ${f}`);
    return 0;
  }

  // With groups, the installs run first (in parallel, and beside the unit tier), so that two groups
  // never install the same thing at once; a single group installs on first use (needs()).
  const installing = o.groups > 1 ? install(needs) : Promise.resolve(true);
  const pairs = [];
  const lines = [];
  if (unitFiles.length) {
    const t0 = Date.now();
    const report = join(reports, 'unit.json');
    pairs.push([report, await vitestRun('unit', o.filters.length ? unitFiles : [], o.options, report)]);
    lines.push(`unit tier: ${unitFiles.length} files in ${secs(Date.now() - t0)}`);
  }
  if (!(await installing)) {
    return summarise(pairs, unitFiles, lines, [`an install step failed (its output is above): none of the ${integrationFiles.length} integration files ran`]);
  }
  let lakeHome = process.env.LAKEHOUSE_LAKE_HOME;
  if (o.groups > 1 && !lakeHome) lakeHome = execFileSync('bash', [join(root, 'scripts/spark-connect'), 'warehouse'], { encoding: 'utf8' }).trim();
  const results = await Promise.all(
    groups.map(async (g, k) => {
      const env = o.groups > 1 ? { ...process.env, ...groupEnv(k, process.env, lakeHome) } : process.env;
      const prefix = o.groups > 1 ? `[g${k + 1}] ` : '';
      const t0 = Date.now();
      const out = [];
      for (const [i, s] of g.segments.entries()) {
        if (!s.files.length) continue;
        const report = join(reports, `integration-g${k + 1}-${i + 1}.json`);
        // What the segment's files need, so that a service a server reads at its start comes first.
        const segmentNeeds = [...new Set(plan.filter((f) => s.files.includes(f.file)).flatMap((f) => f.needs))].join(',');
        out.push([report, await vitestRun('integration', s.files, o.options, report, { env: { ...env, LAKEHOUSE_TEST_NEEDS: segmentNeeds }, prefix })]);
      }
      const ports = o.groups > 1 ? ` (Spark port ${env.SPARK_CONNECT_PORT ?? 15002})` : '';
      lines.push(`group ${k + 1}${ports}: ${g.segments.reduce((n, s) => n + s.files.length, 0)} files in ${secs(Date.now() - t0)}, expected ${g.seconds} s`);
      return out;
    }),
  );
  for (const r of results) pairs.push(...r);
  mergeReports(pairs.map(([r]) => r));
  lines.push(`all tiers: ${secs(Date.now() - started)}`);
  return summarise(pairs, [...unitFiles, ...integrationFiles], lines);
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.log(`failed: scripts/test: ${e.message}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
