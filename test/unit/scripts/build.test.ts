import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- a build script (plain JavaScript, no declarations)
import { cliNodeFlags } from '../../../scripts/build/node-flags.mjs';

/** `npm run build` (scripts/build.mjs): the bundle the image and scripts/lakehouse-jobs run. */

const root = join(import.meta.dirname, '../../..');
const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-build-'));
const out = join(scratch, 'dist');
/** The node flags the image's entrypoint runs the CLI with (scripts/build/node-flags). */
const cliFlags = (cliNodeFlags as (root: string) => string[])(root);

interface Meta {
  outputs: Record<string, { entryPoint?: string; imports: { path: string; kind: string }[]; inputs: Record<string, unknown> }>;
}
let meta: Meta;

beforeAll(() => {
  execFileSync('node', [join(root, 'scripts/build.mjs'), '--outdir', out, '--metafile'], { cwd: root, stdio: 'pipe' });
  meta = JSON.parse(readFileSync(join(out, 'meta.json'), 'utf8')) as Meta;
}, 120_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The inputs (sources and npm files) a chunk loads before any of its code runs (its static imports, transitively). */
function staticInputs(entryPoint: string): string[] {
  const byFile = new Map(Object.entries(meta.outputs).map(([f, o]) => [f.split('/').pop()!, o]));
  const start = [...byFile].find(([, o]) => o.entryPoint === entryPoint);
  if (!start) throw new Error(`no chunk for ${entryPoint}`);
  const seen = new Set<string>();
  const visit = (name: string): void => {
    const o = byFile.get(name);
    if (!o || seen.has(name)) return;
    seen.add(name);
    for (const i of o.imports) if (i.kind === 'import-statement') visit(i.path.split('/').pop()!);
  };
  visit(start[0]);
  return [...seen].flatMap((name) => Object.keys(byFile.get(name)!.inputs));
}

/** The npm packages a chunk loads before any of its code runs. */
function staticPackages(entryPoint: string): Set<string> {
  const packages = new Set<string>();
  for (const input of staticInputs(entryPoint)) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
    if (m) packages.add(m[1]!);
  }
  return packages;
}

describe('the bundle', () => {
  it('runs from anywhere and still finds the checkout’s files relative to its sources (package.json for --version)', () => {
    const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
    expect(execFileSync('node', [join(out, 'cli.mjs'), '--version'], { encoding: 'utf8' }).trim()).toBe(version);
  });

  it('the CLI entry loads the command line parser (yargs) and nothing heavier before a command is chosen', () => {
    const entry = staticPackages('src/cli.ts');
    expect(entry).toContain('yargs');
    for (const heavy of ['zod', '@grpc/grpc-js', '@bufbuild/protobuf', 'apache-arrow', 'pino', 'pino-pretty']) expect(entry).not.toContain(heavy);
  });

  it("help's string-width is evaluated at its first use (scripts/build/lazy-modules.mjs): validate builds no Intl.Segmenter, --help does", () => {
    const count =
      'data:text/javascript,let n=0;const R=Intl.Segmenter;Intl.Segmenter=class extends R{constructor(...a){super(...a);n++}};process.on("exit",()=>process.stderr.write(`segmenters=${n}\\n`))';
    const config = join(root, 'configs/examples/cdc-silver-merge.v1.conf');
    const segmenters = (args: string[]) => {
      const r = spawnSync('node', [...cliFlags, '--import', count, join(out, 'cli.mjs'), ...args], {
        encoding: 'utf8',
        env: { ...process.env, LAKEHOUSE_LAKE_HOME: '/lake' },
      });
      return /segmenters=(\d+)/.exec(r.stderr)?.[1];
    };
    expect(segmenters(['validate', '--config', config, '--env', join(root, 'configs/examples/platform-local.conf')])).toBe('0');
    expect(Number(segmenters(['validate', '--help']))).toBeGreaterThan(0);
  });

  it('validate and plan (src/runner/run.ts) start without grpc-js, protobuf or apache-arrow; the Spark client loads them', () => {
    const run = staticPackages('src/runner/run.ts');
    for (const heavy of ['@grpc/grpc-js', '@bufbuild/protobuf', 'apache-arrow']) expect(run).not.toContain(heavy);
    expect(staticPackages('src/spark/client.ts')).toContain('@grpc/grpc-js');
  });

  it('validate loads the one template its config names: no template module before, each template alone', () => {
    const templateModules = (inputs: string[]) => inputs.filter((i) => /^src\/jobs\/(bronze|silver|gold|ops|vault)\//.test(i));
    expect(templateModules(staticInputs('src/runner/run.ts'))).toEqual([]);
    expect(templateModules(staticInputs('src/jobs/silver/cdc-silver-merge.ts'))).toEqual(['src/jobs/silver/cdc-silver-merge.ts']);
  });

  it('ping starts without zod or a config schema: only the Spark client; a platform config (--env) loads them when given', () => {
    const ping = staticPackages('src/runner/ping.ts');
    expect(ping).not.toContain('zod');
    expect(ping).toContain('@grpc/grpc-js');
    // grpc-js's channelz/ORCA loader (and protobufjs under it) is stubbed out: it needs .proto files a bundle does not ship.
    for (const unused of ['@grpc/proto-loader', 'protobufjs', 'long']) expect(ping).not.toContain(unused);
  });

  it('no chunk decodes a protobuf descriptor at run time: they are embedded decoded (scripts/build/embedded-descriptors.mjs)', () => {
    const loaded = Object.values(meta.outputs).flatMap((o) => Object.keys(o.inputs));
    expect(loaded.filter((i) => /descriptor_pb\.js$|codegenv2\/(file|boot)\.js$/.test(i))).toEqual([]);
    expect(staticInputs('src/runner/ping.ts').some((i) => i.endsWith('base_pb.ts'))).toBe(true);
  });

  it("grpc-js gets the bundle's net (scripts/build/grpc-net.mjs), which answers IPv6 questions without Node's large pattern", () => {
    expect(staticInputs('src/runner/ping.ts')).toContain('grpc-net:grpc-net');
  });

  it('pino loads with the commands that log; pino-pretty only when a person reads the log (a dynamic import)', () => {
    for (const entry of ['src/runner/ping.ts', 'src/runner/run.ts']) expect(staticPackages(entry)).toContain('pino');
    for (const entry of ['src/cli.ts', 'src/runner/ping.ts', 'src/runner/run.ts', 'src/spark/client.ts', 'src/app/views/terminal.ts'])
      expect(staticPackages(entry), entry).not.toContain('pino-pretty');
    // Its own chunk, which src/app/output.ts imports for pretty lines only.
    expect(staticPackages('src/app/views/log.ts')).toContain('pino-pretty');
  });

  it("a person's log (--log-format pretty) works in the bundle: pino-pretty loads and formats each line", () => {
    const args = ['validate', '--config', join(root, 'configs/examples/cdc-silver-merge.v1.conf'), '--env', join(root, 'configs/examples/platform-local.conf')];
    const r = spawnSync('node', [...cliFlags, join(out, 'cli.mjs'), ...args, '--log-format', 'pretty'], {
      encoding: 'utf8',
      env: { ...process.env, LAKEHOUSE_LAKE_HOME: '/lake' },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: config valid \{"template":"cdc-silver-merge"/m);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded' });
  });

  it('writes source maps next to every chunk, with mappings and without the sources', () => {
    const map = JSON.parse(readFileSync(join(out, 'cli.js.map'), 'utf8')) as { sources: string[]; mappings: string; sourcesContent?: unknown };
    expect(map.mappings.length).toBeGreaterThan(0);
    expect(map.sources.some((s) => s.endsWith('src/cli.ts'))).toBe(true);
    expect(map.sourcesContent).toBeUndefined();
  });

  it('an internal error (70) under --enable-source-maps names our TypeScript sources, not the bundle', () => {
    // A bug planted where the CLI writes --version: stdout.write throws a TypeError (called from
    // main, after yargs' parse: the frames of our chunks above it).
    const plant = 'data:text/javascript,process.stdout.write=()=>{throw new TypeError("planted")}';
    const r = spawnSync('node', ['--enable-source-maps', '--import', plant, join(out, 'cli.mjs'), '--version'], { encoding: 'utf8' });
    expect(r.status).toBe(70);
    expect(r.stderr).toContain('internal error: TypeError: planted');
    expect(r.stderr).toMatch(/at main \(.*src\/app\/main\.ts:\d+:\d+\)/);
    expect(r.stderr).toMatch(/at Object\.stdout \(.*src\/app\/command\.ts:\d+:\d+\)/);
    expect(r.stderr).not.toMatch(/dist\/[^/\s]+\.js:/);
  });
});

/** [chunk, rejected] for each chunk of `dir`, its cache checked in a node started with `flags`. */
function rejections(dir: string, chunks: string[], flags: string[]): [string, boolean][] {
  // The launcher's own wrapper, read from it: the cache belongs to exactly that source text.
  const launcher = readFileSync(join(dir, 'cli.mjs'), 'utf8');
  const literal = (name: string) =>
    /const (\w+) = '(.*)';/.exec(launcher.split('\n').find((l) => l.startsWith(`const ${name} = `))!)![2]!.replaceAll('\\n', '\n');
  const check = [
    "const { readFileSync } = require('node:fs');",
    "const { Script } = require('node:vm');",
    'const [head, tail, ...files] = JSON.parse(process.argv[1]);',
    'const verdicts = files.map((file) => [file.split("/").pop(), new Script(head + readFileSync(file, "utf8") + tail, { filename: file, lineOffset: -1, cachedData: readFileSync(`${file}.v8cache`) }).cachedDataRejected]);',
    'process.stdout.write(JSON.stringify(verdicts));',
  ].join('\n');
  const args = JSON.stringify([literal('HEAD'), literal('TAIL'), ...chunks.map((f) => join(dir, f))]);
  const r = spawnSync('node', [...flags, '-e', check, args], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as [string, boolean][];
}

describe('the V8 code caches of the bundle (dist/cli.mjs starts from them, Node 20 has no ES module compile cache)', () => {
  const chunks = () => readdirSync(out).filter((f) => f.endsWith('.js'));

  it('were made by the build with this node binary and the CLI’s node flags: V8 accepts every one under them for the script the launcher compiles', () => {
    // The launcher's own wrapper, read from it: the cache belongs to exactly that source text.
    const launcher = readFileSync(join(out, 'cli.mjs'), 'utf8');
    const literal = (name: string) =>
      /const (\w+) = '(.*)';/.exec(launcher.split('\n').find((l) => l.startsWith(`const ${name} = `))!)![2]!.replaceAll('\\n', '\n');
    const head = literal('HEAD');
    // ES modules are strict code; the scripts made of them must stay so.
    expect(head).toContain('{"use strict";');
    const cached = chunks().filter((f) => readdirSync(out).includes(`${f}.v8cache`));
    // Every chunk a training run loads: the entry, the templates, the Spark client.
    for (const f of ['cli.js', ...chunks().filter((c) => /^(cdc-silver-merge|client|ping|run)-/.test(c))]) expect(cached).toContain(f);
    // V8 hashes its flags into a cache: checked in a node started as the image starts the CLI
    // (scripts/build/node-flags), not in this test's process, whose flags may differ.
    const verdicts = rejections(out, cached, cliFlags);
    expect(verdicts.map(([f]) => f)).toEqual(cached);
    for (const [f, rejected] of verdicts) expect({ f, rejected }).toEqual({ f, rejected: false });
  });

  it('are trained under the flags the build is given (--node-flags FILE; by default scripts/build/node-flags)', () => {
    // --max-semi-space-size enters V8's flag hash (--single-threaded-gc does not): a build trained
    // without the flags it is given would leave caches rejected under them.
    const flags = [...cliFlags, '--max-semi-space-size=4'];
    const file = join(scratch, 'node-flags');
    writeFileSync(file, `# test\n${flags.join('\n')}\n`);
    const other = join(scratch, 'dist-other-flags');
    execFileSync('node', [join(root, 'scripts/build.mjs'), '--outdir', other, '--node-flags', file], { cwd: root, stdio: 'pipe' });
    const cached = readdirSync(other).filter((f) => f.endsWith('.js') && readdirSync(other).includes(`${f}.v8cache`));
    expect(cached).toContain('cli.js');
    expect(rejections(other, cached, flags).filter(([, rejected]) => rejected)).toEqual([]);
    expect(rejections(other, cached, cliFlags).filter(([, rejected]) => !rejected)).toEqual([]);
    // Never into the dist/ that scripts/lakehouse-jobs and the image run with the CLI's flags.
    const r = spawnSync('node', [join(root, 'scripts/build.mjs'), '--node-flags', file], { cwd: root, encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('--node-flags needs --outdir');
  }, 120_000);

  it('a rejected or missing cache only means a normal compile: same answers', () => {
    // A sibling of the bundle: the chunks find the checkout's files by relative paths.
    const copy = join(scratch, 'dist-copy');
    cpSync(out, copy, { recursive: true });
    const caches = readdirSync(copy).filter((f) => f.endsWith('.v8cache'));
    expect(caches.length).toBeGreaterThan(0);
    const config = join(root, 'configs/examples/cdc-silver-merge.v1.conf');
    const args = ['validate', '--job', 'cdc-silver-merge', '--config', config, '--env', join(root, 'configs/examples/platform-local.conf')];
    const answer = (dir: string) => {
      const r = spawnSync('node', [join(dir, 'cli.mjs'), ...args], { encoding: 'utf8', env: { ...process.env, LAKEHOUSE_LAKE_HOME: '/lake' } });
      return { status: r.status, summary: r.stderr.split('\n').filter((l) => l.includes(': valid')) };
    };
    const expected = answer(out);
    expect(expected.status).toBe(0);
    expect(expected.summary).toHaveLength(1);
    // Garbage of the right name: V8 rejects it (another node binary's cache looks the same to us).
    for (const f of caches) writeFileSync(join(copy, f), Buffer.alloc(4096, 7));
    expect(answer(copy)).toEqual(expected);
    for (const f of caches) rmSync(join(copy, f));
    expect(answer(copy)).toEqual(expected);
  });
});
