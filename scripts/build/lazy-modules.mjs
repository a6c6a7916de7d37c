// Modules only help text needs, evaluated at their first use instead of at start (cold start).
//
// yargs imports cliui, and cliui and wrap-ansi import string-width, whose module body builds an
// Intl.Segmenter and compiles Unicode-property regular expressions (\p{RGI_Emoji}, …): ≈ 25 ms of
// every start (bench/RESULTS.md), for a function only help and usage text call. In the bundle,
// `string-width` is a stand-in that requires the real module when first called: esbuild then wraps
// the real one to run its body at that first require, not when the chunk loads. Same answers.
import { dirname, relative, sep } from 'node:path';

/** The stand-in: the real module's default export, required at the first call. */
export function lazySource(realPath) {
  return `export default function stringWidth(text, options) {\n  return require(${JSON.stringify(realPath)}).default(text, options);\n}\n`;
}

const REAL = Symbol('the real module');

export const lazyModules = {
  name: 'lazy-help-modules',
  setup(b) {
    b.onResolve({ filter: /^string-width$/ }, async (args) => {
      // The real module, resolved by esbuild as usual (this resolver steps aside for it).
      if (args.pluginData === REAL) return undefined;
      const real = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: REAL });
      if (real.errors.length) return { errors: real.errors };
      // Named by its path in the checkout (source maps and the metafile show it), the real one kept aside.
      const name = relative(b.initialOptions.absWorkingDir ?? process.cwd(), real.path)
        .split(sep)
        .join('/');
      return { path: name, namespace: 'lazy-help', pluginData: real.path };
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-help' }, (args) => ({
      contents: lazySource(args.pluginData),
      loader: 'js',
      resolveDir: dirname(args.pluginData),
    }));
  },
};
