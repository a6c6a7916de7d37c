import { join } from 'node:path';
import { expect } from 'vitest';
import { loadJob, type LoadedJob } from '../../src/runner/load-job.js';
import { ConfigError, type ConfigIssue, type LakehouseError } from '../../src/core/errors.js';
import { tempFiles } from './files.js';

export interface LoadOptions {
  /** A platform config's text (written next to the job config and passed as --env); none: the embedded defaults. */
  platform?: string;
  /** --job */
  job?: string;
  /** --tenant: the orchestrator's binding */
  tenant?: string;
  /** --set lines */
  set?: string[];
  /** The environment the configs see. */
  env?: Record<string, string>;
  runId?: string;
  /** --logical-date */
  logicalDate?: string;
}

/** Load a job config's text as the CLI would (files in a fresh temp folder), without Spark. */
export async function loadConfig(config: string, opts: LoadOptions = {}): Promise<LoadedJob> {
  const dir = tempFiles({ 'job.conf': config, ...(opts.platform !== undefined ? { 'platform.conf': opts.platform } : {}) });
  return loadJob({
    configFile: join(dir, 'job.conf'),
    ...(opts.platform !== undefined ? { envFile: join(dir, 'platform.conf') } : {}),
    ...(opts.job ? { job: opts.job } : {}),
    ...(opts.tenant !== undefined ? { tenant: opts.tenant } : {}),
    overrides: opts.set ?? [],
    env: opts.env ?? {},
    runId: opts.runId ?? 'test-run',
    ...(opts.logicalDate ? { logicalDate: opts.logicalDate } : {}),
  });
}

/** The error a config must be refused with: of this class, with this exit code. */
export async function refusal<E extends LakehouseError>(
  config: string,
  opts: LoadOptions,
  kind: abstract new (...args: never[]) => E,
  exitCode: number,
): Promise<E> {
  const err = await loadConfig(config, opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(kind);
  expect((err as E).exitCode).toBe(exitCode);
  return err as E;
}

/** The issues of a config that must be refused as invalid (a ConfigError, exit 78). */
export async function configIssues(config: string, opts: LoadOptions = {}): Promise<readonly ConfigIssue[]> {
  return (await refusal(config, opts, ConfigError, 78)).issues;
}
