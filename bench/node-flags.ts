/**
 * The node flags of the CLI (scripts/build/node-flags, the one list of them: the image's entrypoint,
 * scripts/lakehouse-jobs and the build's training runs of the V8 code caches use the same), for the
 * benchmarks to run our processes as the image runs them. Read from the checkout the benchmark runs
 * in (bench/run and bench/startup.ts run from the repository root). The same format as
 * scripts/build/node-flags.mjs reads (bench/ is compiled by tsc alone, which does not copy .mjs).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function cliNodeFlags(root = process.cwd()): string[] {
  return readFileSync(join(root, 'scripts/build/node-flags'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** The flags for a process that is not the bundle (a bench driver compiled by tsc): no source maps to read. */
export function cliV8Flags(root = process.cwd()): string[] {
  return cliNodeFlags(root).filter((f) => f !== '--enable-source-maps');
}
