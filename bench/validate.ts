/**
 * Ours for "validate 1,000 configs": the loader `lakehouse-jobs validate` runs (loadJob: hardened
 * HOCON parse, zod schema, tenant rules, plan building) on every *.conf of a folder, in one process,
 * so the number is validation and not 1,000 process starts. One JSON line on stdout.
 *
 *   node .cache/bench/build/bench/validate.js DIR [PLATFORM]
 *
 * PLATFORM: the platform config (`--env`) each load reads, as `lakehouse-jobs validate --env` does;
 * the generated configs read ${LAKEHOUSE_LAKE_HOME}, which a job config may only when it allows it.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadJob } from '../src/runner/load-job.js';
import { ConfigError } from '../src/core/errors.js';

const dir = process.argv[2];
const envFile = process.argv[3];
if (!dir) throw new Error('usage: validate.js DIR [PLATFORM]');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.conf'))
  .sort();
// Any absolute path: it is substituted into tenant.storage-root, never touched.
const env = { LAKEHOUSE_LAKE_HOME: process.env.LAKEHOUSE_LAKE_HOME ?? '/bench/lake' };

const invalidFiles: string[] = [];
const t0 = performance.now();
for (const f of files) {
  try {
    await loadJob({ configFile: join(dir, f), ...(envFile ? { envFile } : {}), env, runId: 'bench', overrides: [] });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    invalidFiles.push(f);
  }
}
const ms = performance.now() - t0;
process.stdout.write(
  JSON.stringify({
    files: files.length,
    valid: files.length - invalidFiles.length,
    invalid: invalidFiles.length,
    invalidFiles,
    ms,
    maxRssKb: process.resourceUsage().maxRSS,
  }) + '\n',
);
