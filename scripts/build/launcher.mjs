#!/usr/bin/env node
// dist/cli.mjs: starts the bundle from V8 code caches (issue 13, cold start).
//
// Node 20 has no compile cache for ES modules (`module.enableCompileCache` is Node 22), so every
// start compiled the bundle's JavaScript again: most of a one-config `validate`. scripts/build.mjs
// therefore turns each chunk of the bundle into a classic script (dist/<chunk>.js, its imports
// turned into calls of `require`) and records V8's code cache of it (dist/<chunk>.js.v8cache)
// after a few training runs with the same node binary. This launcher compiles each chunk with
// its cache when the chunk is first needed, as the ES module loader did.
//
// A cache is only ever read here, never written: a missing, unreadable or rejected cache (another
// node binary, other V8 flags than scripts/build/node-flags, which the training runs use) means a
// normal compile, silently. Stack traces keep naming our
// TypeScript sources under --enable-source-maps: Node does not map scripts compiled through
// node:vm, so the launcher maps the frames of its chunks itself from their source maps.
import { readFileSync } from 'node:fs';
import { SourceMap, createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Script } from 'node:vm';

const here = new URL('./', import.meta.url);
const nodeRequire = createRequire(import.meta.url);
/** Chunk name → its module record; filled before the chunk runs, so import cycles resolve as in ESM. */
const modules = new Map();
/** Compiled chunks, for the build's training runs (scripts/build/train-code-cache.mjs). */
const trained = globalThis[Symbol.for('lakehouse-jobs.code-cache.training')];

// Same text at build and at run time: V8 accepts a cache only for the very source it was made from.
// Strict, as the ES modules the chunks were (a write to a frozen plan node throws, as in tests).
const HEAD = '(function (exports, require, module, __lakehouse_chunk_url) {"use strict";\n';
const TAIL = '\n})';

function load(name) {
  const known = modules.get(name);
  if (known) return known.exports;
  const url = new URL(name, here);
  const file = fileURLToPath(url);
  const module = { exports: {} };
  modules.set(name, module);
  let cachedData;
  try {
    cachedData = readFileSync(`${file}.v8cache`);
  } catch {
    // No cache (a build without training): compile as usual.
  }
  const script = new Script(HEAD + readFileSync(file, 'utf8') + TAIL, { filename: file, lineOffset: -1, cachedData });
  trained?.push({ file, script });
  script.runInThisContext()(module.exports, requireFrom, module, url.href);
  return module.exports;
}

/** `require` inside a chunk: our chunks by their bundle name (./x.mjs), anything else is a Node builtin. */
function requireFrom(id) {
  return id.startsWith('./') ? load(id.slice(2).replace(/\.mjs$/, '.js')) : nodeRequire(id);
}

const maps = new Map();
/** The source map of one of our chunks, parsed when a stack trace first needs it. */
function mapOf(file) {
  if (!file?.startsWith(fileURLToPath(here)) || !file.endsWith('.js')) return undefined;
  if (!maps.has(file)) {
    let map;
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')));
    } catch {
      map = undefined;
    }
    maps.set(file, map);
  }
  return maps.get(file);
}

/** One frame as Node prints a source-mapped frame: the original function name, file, line and column. */
function frame(site) {
  const map = mapOf(site.getFileName());
  const entry = map?.findEntry(site.getLineNumber() - 1, site.getColumnNumber() - 1);
  if (!entry?.originalSource) return `    at ${site}`;
  const source = fileURLToPath(new URL(entry.originalSource, pathToFileURL(`${site.getFileName()}.map`)));
  const type = site.getTypeName();
  const fn = site.getFunctionName() ?? site.getMethodName();
  // The bundle keeps our identifiers (no minified names), so the generated name is the original one.
  const name = fn ? `${type && type !== 'global' && !site.isConstructor() ? `${type}.` : ''}${fn}` : '';
  const where = `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
  return `    at ${site.isAsync() ? 'async ' : ''}${site.isConstructor() ? 'new ' : ''}${name ? `${name} (${where})` : where}`;
}

// Node's own source-mapping prepareStackTrace stays in charge of frames that are not our chunks'.
if (process.sourceMapsEnabled) {
  const nodes = Error.prepareStackTrace;
  Error.prepareStackTrace = (error, sites) => {
    let head;
    try {
      head = Error.prototype.toString.call(error);
    } catch {
      head = '<error>';
    }
    if (nodes && !sites.some((site) => mapOf(site.getFileName()))) return nodes(error, sites);
    return [head, ...sites.map(frame)].join('\n');
  };
}

load('cli.js');
