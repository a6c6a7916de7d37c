import { UsageError } from '../../core/errors.js';
import { TERMINATION_LOG, XCOM_DIR, terminationTargets } from '../../core/status.js';
import type { RunRequest } from '../../runner/run.js';
import { type Invocation, type OptionSpec, seconds } from '../command.js';
import { jobView } from '../views/job.js';

/** The options of the commands that load a job (`run`, `validate`, `plan`), each also read from LAKEHOUSE_<OPTION>. */
export const JOB_OPTIONS: readonly OptionSpec[] = [
  { name: 'job', type: 'string', arg: '<template>', env: 'LAKEHOUSE_JOB', describe: 'job template (may be omitted when the config names job.template)' },
  { name: 'config', type: 'string', arg: '<file>', env: 'LAKEHOUSE_CONFIG', describe: "the tenant's job config (HOCON)" },
  { name: 'env', type: 'string', arg: '<file>', env: 'LAKEHOUSE_ENV', describe: 'platform config (HOCON): Spark remote, catalogs, connections, tenant roots' },
  {
    name: 'tenant',
    type: 'string',
    arg: '<id>',
    env: 'LAKEHOUSE_TENANT',
    describe: "the tenant the orchestrator runs this job for: the config's tenant.id must be this one",
  },
  {
    name: 'remote',
    type: 'string',
    arg: '<sc://…|local>',
    env: 'LAKEHOUSE_REMOTE',
    describe: 'sc://host:port/;token=… or "local" (default: SPARK_REMOTE, the platform config, then local)',
  },
  { name: 'set', type: 'string', arg: '<key=value>', multiple: true, describe: 'HOCON override: --set target.snapshot-date=2026-07-05' },
  { name: 'run-id', type: 'string', arg: '<id>', env: 'LAKEHOUSE_RUN_ID', describe: "the orchestrator's run id (Airflow: {{ run_id }})" },
  { name: 'logical-date', type: 'string', arg: '<date>', env: 'LAKEHOUSE_LOGICAL_DATE', describe: "the orchestrator's logical date (Airflow: {{ ds }})" },
  { name: 'status-file', type: 'string', arg: '<file>', env: 'LAKEHOUSE_STATUS_FILE', describe: 'also write the status document here (atomically)' },
  LOG_LEVEL(),
  {
    name: 'termination-log',
    type: 'string',
    arg: '<file>',
    env: 'LAKEHOUSE_TERMINATION_LOG',
    describe: `Kubernetes termination message file (default: ${TERMINATION_LOG}, only where it exists)`,
  },
  {
    name: 'retry-budget',
    type: 'string',
    arg: '<seconds>',
    env: 'LAKEHOUSE_RETRY_BUDGET',
    describe: 'seconds a run may spend retrying Spark Connect in all (default 120); then it exits 69 or 75',
  },
];

export function LOG_LEVEL(): OptionSpec {
  return {
    name: 'log-level',
    type: 'string',
    arg: '<level>',
    env: 'LAKEHOUSE_LOG_LEVEL',
    default: 'info',
    choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
    describe: 'JSON log lines on stderr from this level',
  };
}

/** The runner's request for a job command; `extra` carries a command's own options. */
export function jobRequest(
  command: RunRequest['command'],
  inv: Invocation,
  env: Record<string, string | undefined>,
  extra: Partial<RunRequest> = {},
): RunRequest {
  const v = inv.values as Record<string, string | undefined> & { set?: string[] };
  if (!v.config) throw new UsageError('--config <file> is required');
  const retryBudgetMs = seconds(v['retry-budget'], 'retry-budget');
  return {
    command,
    config: v.config,
    set: v.set ?? [],
    logLevel: v['log-level'] ?? 'info',
    env,
    ...(v.job ? { job: v.job } : {}),
    ...(v.env ? { envFile: v.env } : {}),
    ...(v.tenant !== undefined ? { tenant: v.tenant } : {}),
    ...(v.remote ? { remote: v.remote } : {}),
    ...(v['run-id'] ? { runId: v['run-id'] } : {}),
    ...(v['logical-date'] ? { logicalDate: v['logical-date'] } : {}),
    ...(v['status-file'] ? { statusFile: v['status-file'] } : {}),
    ...(retryBudgetMs !== undefined ? { retryBudgetMs } : {}),
    targets: { xcomDir: env.LAKEHOUSE_XCOM_DIR ?? XCOM_DIR, ...terminationTargets(v['termination-log']) },
    view: jobView({
      config: v.config,
      ...(v.env ? { envFile: v.env } : {}),
      ...(v.format === 'json' ? { planFormat: 'json' } : {}),
      stdout: (t) => process.stdout.write(t),
      stderr: (t) => process.stderr.write(t),
    }),
    signals: process,
    exitNow: (code) => process.exit(code),
    ...extra,
  };
}
