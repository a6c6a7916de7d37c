// Bundle the CLI: `npm run build` → dist/cli.mjs plus lazy chunks, with source maps.
//
// One file instead of hundreds of modules is most of the cold-start win (Node resolves, reads and
// compiles each module separately). ESM code splitting keeps the dynamic imports of src/cli.ts
// lazy: `validate` never loads grpc-js or the protobuf schema, `ping` never loads zod's templates.
// Every chunk lands flat in dist/, next to cli.mjs (see sourceRelativeImportMeta below).
//
//   node scripts/build.mjs [--metafile] [--outdir DIR]
//     --metafile: also write meta.json (inputs and imports of every chunk), for size analysis and tests
//     --outdir: somewhere else than dist/ (tests)
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outArg = process.argv.indexOf('--outdir');
const dist = outArg > 0 ? resolve(process.argv[outArg + 1]) : resolve(root, 'dist');
// Built next to dist/ and swapped in at the end: a CLI started meanwhile (scripts/lakehouse-jobs
// rebuilds a stale bundle) never sees half a bundle. import.meta.url paths are the same either way.
const outdir = `${dist}.build-${process.pid}`;

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

let result;
try {
  result = await build({
    absWorkingDir: root,
    entryPoints: { cli: 'src/cli.ts' },
    outdir,
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
    // Bundled CommonJS (grpc-js, yargs' helpers) may call require(): give ESM chunks one.
    banner: { js: "import { createRequire as __lakehouseCreateRequire } from 'node:module'; const require = __lakehouseCreateRequire(import.meta.url);" },
    plugins: [sourceRelativeImportMeta, noProtoLoader],
    metafile: true,
    logLevel: 'warning',
  });
} catch (e) {
  rmSync(outdir, { recursive: true, force: true });
  throw e;
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
process.stderr.write(`build: ${relative(root, dist) || '.'}/cli.mjs and ${chunks - 1} chunks, ${(bytes / 1e6).toFixed(1)} MB with source maps\n`);
