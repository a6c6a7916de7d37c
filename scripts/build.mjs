// Bundle the CLI: `npm run build` → dist/cli.mjs plus lazy chunks, with source maps.
//
// One file instead of hundreds of modules is most of the cold-start win (Node resolves, reads and
// compiles each module separately). ESM code splitting keeps the dynamic imports of src/cli.ts
// lazy: `validate` never loads grpc-js or the protobuf schema, `ping` never loads zod's templates.
// Every chunk lands flat in dist/, next to cli.mjs (see sourceRelativeImportMeta below).
//
// Then each ES module chunk becomes a classic script (<chunk>.js, source maps chained to our
// sources) that dist/cli.mjs (scripts/build/launcher.mjs) compiles with V8's code cache
// (<chunk>.js.v8cache), recorded here by training runs of the CLI with this node binary and the
// CLI's node flags (scripts/build/node-flags): Node 20 has no compile cache for ES modules. See
// scripts/build/launcher.mjs.
//
//   node scripts/build.mjs [--metafile] [--outdir DIR] [--node-flags FILE]
//     --metafile: also write meta.json (inputs and imports of every chunk), for size analysis and tests
//     --outdir: somewhere else than dist/ (tests)
//     --node-flags: train the caches under the flags of FILE (the format of scripts/build/node-flags)
//       instead: a bundle for another flag set, to measure it (bench/ping_cpu.py DIST=FLAGS) or test it
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { embeddedDescriptors } from './build/embedded-descriptors.mjs';
import { grpcNet } from './build/grpc-net.mjs';
import { lazyModules } from './build/lazy-modules.mjs';
import { cliNodeFlags, parseNodeFlags } from './build/node-flags.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outArg = process.argv.indexOf('--outdir');
const dist = outArg > 0 ? resolve(process.argv[outArg + 1]) : resolve(root, 'dist');
const flagsArg = process.argv.indexOf('--node-flags');
// Caches trained under other flags are rejected under the CLI's: never in the dist/ the CLI runs.
if (flagsArg > 0 && outArg < 0) throw new Error('build: --node-flags needs --outdir (dist/ is run with scripts/build/node-flags)');
/** The node flags of the training runs: the CLI's, or those of --node-flags FILE. */
const trainingFlags = flagsArg > 0 ? parseNodeFlags(readFileSync(resolve(process.argv[flagsArg + 1]), 'utf8')) : cliNodeFlags(root);
// Built next to dist/ and swapped in at the end: a CLI started meanwhile (scripts/lakehouse-jobs
// rebuilds a stale bundle) never sees half a bundle. import.meta.url paths are the same either way.
const outdir = `${dist}.build-${process.pid}`;
// The ES module bundle, before its chunks become scripts (a sibling of dist/: same relative paths).
const esmdir = `${dist}.esm-${process.pid}`;

/**
 * Our sources use `new URL('../x', import.meta.url)` to find files of the checkout relative to
 * themselves (package.json, scripts/spark-connect). In a bundle, import.meta.url is the chunk's
 * URL, one flat directory dist/: rewrite it in our own sources to the URL the source file would
 * have had, computed from the chunk's URL, so every such relative path keeps its meaning.
 */
const sourceRelativeImportMeta = {
  name: 'source-relative-import-meta',
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, async (args) => {
      const { readFile } = await import('node:fs/promises');
      if (!args.path.startsWith(resolve(root, 'src') + sep)) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const fromDist = relative(dist, args.path).split('\\').join('/');
      return {
        contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromDist)}, import.meta.url).href`),
        loader: 'ts',
      };
    });
  },
};

/**
 * grpc-js requires @grpc/proto-loader (and with it protobufjs and long, ≈ 190 KB) only to serve its
 * channelz and ORCA services from .proto files next to its own sources, which a bundle does not
 * ship: code that could never work here, yet every `ping` parsed it. A stub that says so instead.
 */
const noProtoLoader = {
  name: 'no-grpc-proto-loader',
  setup(b) {
    b.onResolve({ filter: /^@grpc\/proto-loader$/ }, () => ({ path: 'grpc-proto-loader', namespace: 'stub' }));
    b.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({
      contents:
        "const unavailable = () => { throw new Error('@grpc/proto-loader is not bundled: grpc-js channelz and ORCA are not used by lakehouse-jobs'); };\n" +
        'module.exports = { loadSync: unavailable, load: unavailable };\n',
      loader: 'js',
    }));
  },
};

/**
 * Each ES module chunk of `from` as a classic script in `to` (scripts/build/launcher.mjs runs them):
 * static imports and import() become calls of the launcher's `require`, import.meta.url its
 * argument `__lakehouse_chunk_url`. esbuild chains the chunks' source maps, so the scripts' maps
 * still point at src/. The launcher itself becomes cli.mjs; legal notices are copied as they are.
 */
async function asScripts(from, to) {
  const chunks = readdirSync(from).filter((f) => f.endsWith('.mjs'));
  // A script is a function body for the launcher, where a hashbang is a syntax error: make it a
  // comment of the same length (lines and columns of the source map stay right).
  const entry = join(from, 'cli.mjs');
  writeFileSync(entry, readFileSync(entry, 'utf8').replace(/^#!/, '//'));
  await build({
    absWorkingDir: root,
    entryPoints: chunks.map((f) => join(from, f)),
    outdir: to,
    bundle: false,
    format: 'cjs',
    platform: 'node',
    target: 'node20.19',
    // import() of a chunk must go through the launcher too, not through Node's ES module loader.
    supported: { 'dynamic-import': false },
    define: { 'import.meta.url': '__lakehouse_chunk_url' },
    sourcemap: 'linked',
    sourcesContent: false,
    minifyWhitespace: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  for (const f of readdirSync(from).filter((f) => f.endsWith('.LEGAL.txt'))) copyFileSync(join(from, f), join(to, f));
  writeFileSync(join(to, 'cli.mjs'), readFileSync(resolve(root, 'scripts/build/launcher.mjs')), { mode: 0o755 });
}

/**
 * Training runs of the CLI in `dir` (its final place: a cache remembers the path of its script,
 * and stack traces name it) with this node binary (the one the image ships) and the CLI's node
 * flags (scripts/build/node-flags: V8 rejects a cache made under other V8 flags), each leaving
 * V8's code cache of the chunks it compiled (scripts/build/train-code-cache.mjs): --help, validate
 * and plan of every example config, ping and run against a port where nothing listens (connect,
 * retry and exit 69 paths; no server needed). Exit codes do not matter, only the code that ran.
 * Runs read the examples and write nothing but the caches (status files go to a scratch dir).
 */
function trainCodeCache(dir) {
  const cli = join(dir, 'cli.mjs');
  const hook = resolve(root, 'scripts/build/train-code-cache.mjs');
  const examples = resolve(root, 'configs/examples');
  const env = resolve(examples, 'platform-local.conf');
  const nowhere = 'sc://127.0.0.1:1';
  const scratch = `${dir}.train`;
  const term = join(scratch, 'termination-log');
  const runs = [['--help'], ['ping', '--remote', nowhere, '--timeout', '0.2']];
  for (const f of readdirSync(examples)
    .filter((f) => /\.v\d+\.conf$/.test(f))
    .sort()) {
    const job = ['--job', basename(f).split('.')[0], '--config', join(examples, f), '--env', env, '--termination-log', term];
    runs.push(['validate', ...job], ['plan', ...job]);
  }
  runs.push([
    'run',
    '--job',
    'cdc-silver-merge',
    '--config',
    join(examples, 'cdc-silver-merge.v1.conf'),
    '--env',
    env,
    '--remote',
    nowhere,
    '--retry-budget',
    '0.2',
    '--termination-log',
    term,
  ]);
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  try {
    for (const args of runs) {
      spawnSync(process.execPath, [...trainingFlags, '--import', pathToFileURL(hook).href, cli, ...args], {
        cwd: scratch,
        env: { PATH: process.env.PATH ?? '', LAKEHOUSE_LAKE_HOME: join(scratch, 'lake') },
        stdio: 'ignore',
        timeout: 30_000,
      });
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  // The entry chunk is compiled by every run: no cache of it means the training itself is broken.
  const entryCache = join(dir, 'cli.js.v8cache');
  try {
    readFileSync(entryCache);
  } catch {
    throw new Error(`build: the training runs of ${cli} left no code cache; run it by hand to see why`);
  }
}

let result;
try {
  result = await build({
    absWorkingDir: root,
    entryPoints: { cli: 'src/cli.ts' },
    outdir: esmdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20.19',
    outExtension: { '.js': '.mjs' },
    chunkNames: '[name]-[hash]',
    sourcemap: 'linked',
    // Mappings only: stack traces need lines, not the sources (half the size of the maps).
    sourcesContent: false,
    // Keep class and function names: error classes are matched and logged by name.
    keepNames: true,
    minifySyntax: true,
    minifyWhitespace: true,
    legalComments: 'linked',
    plugins: [sourceRelativeImportMeta, noProtoLoader, grpcNet, embeddedDescriptors, lazyModules],
    metafile: true,
    logLevel: 'warning',
  });
  await asScripts(esmdir, outdir);
} catch (e) {
  rmSync(outdir, { recursive: true, force: true });
  throw e;
} finally {
  rmSync(esmdir, { recursive: true, force: true });
}
if (process.argv.includes('--metafile')) writeFileSync(resolve(outdir, 'meta.json'), JSON.stringify(result.metafile));
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + (o.bytes ?? 0), 0);
const chunks = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.mjs')).length;
const old = `${dist}.old-${process.pid}`;
rmSync(old, { recursive: true, force: true });
try {
  renameSync(dist, old);
} catch (e) {
  if (e.code !== 'ENOENT') throw e;
}
renameSync(outdir, dist);
rmSync(old, { recursive: true, force: true });
// In place: V8 keeps the file name a cache was made under, and stack traces show it.
trainCodeCache(dist);
process.stderr.write(`build: ${relative(root, dist) || '.'}/cli.mjs and ${chunks - 1} chunks, ${(bytes / 1e6).toFixed(1)} MB with source maps\n`);
