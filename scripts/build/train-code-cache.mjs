// Build time only (scripts/build.mjs): preloaded with --import into a training run of the bundle's
// launcher (dist/cli.mjs). When the run exits, writes V8's code cache of every chunk it compiled
// next to the chunk (<chunk>.js.v8cache). A cache made after running holds the functions the run
// compiled, not only the top level: what a real start of the same command needs. Several runs
// (validate of each template, ping, run) each compile part of the shared chunks; the cache with
// the most compiled code wins.
import { renameSync, statSync, writeFileSync } from 'node:fs';

const compiled = [];
globalThis[Symbol.for('lakehouse-jobs.code-cache.training')] = compiled;

process.on('exit', () => {
  for (const { file, script } of compiled) {
    const data = script.createCachedData();
    let size = 0;
    try {
      size = statSync(`${file}.v8cache`).size;
    } catch {
      // First run that compiled this chunk.
    }
    // Written aside and renamed: a CLI started meanwhile reads the old cache or the new one, whole.
    if (data.length > size) {
      writeFileSync(`${file}.v8cache.${process.pid}`, data);
      renameSync(`${file}.v8cache.${process.pid}`, `${file}.v8cache`);
    }
  }
});
