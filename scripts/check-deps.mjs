#!/usr/bin/env node
// One direction of dependencies: core ← spark ← jobs ← runner ← app. The runner runs a job (load →
// execute → report); the app is the command line and everything people see (plan printing,
// validate's lines, a terminal's step lines and summary). A module may import from its own layer and
// the layers below it, never from a layer above.
// Reads every import/export-from and dynamic import() of src/ with a regex: our code has no other
// form of import. Prints each violation as `file: imports target (layer → layer)` and exits 1.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const LAYERS = ['core', 'spark', 'jobs', 'runner', 'app'];

/** The layer of a path relative to src/ (posix separators). */
export function layerOf(path) {
  const top = path.split('/')[0];
  if (top === 'core' || top === 'spark' || top === 'jobs' || top === 'runner') return top;
  // Imports name the entry point cli.js (TypeScript's .js specifiers), the file is cli.ts.
  if (top === 'app' || /^cli\.[mc]?[jt]s$/.test(top)) return 'app';
  // version.ts and other leaf files at the top: below everything.
  return 'core';
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;

/** The relative imports of one source text. */
export function importsOf(text) {
  const out = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (spec && spec.startsWith('.')) out.push(spec);
  }
  return out;
}

function* files(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else if (/\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts')) yield p;
  }
}

/** Every import that points up the layers, under `srcDir`. */
export function violations(srcDir) {
  const out = [];
  for (const file of files(srcDir)) {
    const from = relative(srcDir, file).split(sep).join('/');
    const fromLayer = layerOf(from);
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      const to = relative(srcDir, resolve(dirname(file), spec))
        .split(sep)
        .join('/');
      if (to.startsWith('..')) continue;
      const toLayer = layerOf(to);
      if (LAYERS.indexOf(toLayer) > LAYERS.indexOf(fromLayer)) out.push({ from, to, fromLayer, toLayer });
    }
  }
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const src = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');
  const found = violations(src);
  for (const v of found) process.stderr.write(`src/${v.from}: imports src/${v.to} (${v.fromLayer} may not depend on ${v.toLayer})\n`);
  if (found.length) {
    process.stderr.write(`check-deps: ${found.length} import(s) against the direction ${LAYERS.join(' ← ')}\n`);
    process.exit(1);
  }
  process.stdout.write(`check-deps: dependencies point one way (${LAYERS.join(' ← ')})\n`);
}
