import type { Options } from 'yargs';
import { LOG_LEVELS } from '../core/log-levels.js';
import { TERMINATION_LOG } from '../core/status.js';

/**
 * The options the commands share, as yargs options. Each is also read from LAKEHOUSE_<OPTION>
 * (yargs' `.env('LAKEHOUSE')`, src/app/main.ts); the remote also from SPARK_REMOTE.
 */

const string = (describe: string, extra: Options = {}): Options => ({ type: 'string', requiresArg: true, describe, ...extra });

export const logOptions = {
  'log-level': string('log lines on stderr from this level (default: info; warn on a terminal, where step lines say what info lines would)', {
    choices: LOG_LEVELS,
  }),
  'log-format': string('json: JSON lines (default off a terminal); pretty: lines for people (default on a terminal)', { choices: ['json', 'pretty'] }),
} satisfies Record<string, Options>;

export const remoteOption = {
  remote: string('sc://host:port/;token=… or "local" (default: SPARK_REMOTE, the platform config, then local)'),
} satisfies Record<string, Options>;

export const platformOption = {
  env: string('platform config (HOCON): Spark remote, catalogs, connections, tenant roots'),
} satisfies Record<string, Options>;

/** The options of the commands that load a job (`run`, `validate`, `plan`). */
export const jobOptions = {
  job: string('job template (may be omitted when the config names job.template)'),
  config: string("the tenant's job config (HOCON)"),
  ...platformOption,
  tenant: string("the tenant the orchestrator runs this job for: the config's tenant.id must be this one"),
  ...remoteOption,
  set: string('HOCON override, repeatable: --set target.snapshot-date=2026-07-05', { array: true, nargs: 1 }),
  'run-id': string("the orchestrator's run id (Airflow: {{ run_id }})"),
  'logical-date': string("the orchestrator's logical date (Airflow: {{ ds }})"),
  'status-file': string('also write the status document here (atomically)'),
  'termination-log': string(`Kubernetes termination message file (default: ${TERMINATION_LOG}, only where it exists)`),
  'retry-budget': string('seconds a run may spend retrying Spark Connect in all (default 120); then it exits 69 or 75'),
  ...logOptions,
} satisfies Record<string, Options>;

export const ENV_EPILOGUE = 'Every option can also be set as LAKEHOUSE_<OPTION> (LAKEHOUSE_CONFIG, LAKEHOUSE_RUN_ID, …); the remote also as SPARK_REMOTE.';
