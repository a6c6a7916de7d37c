#!/usr/bin/env node
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ExitCode, UsageError, cliFailure } from './core/errors.js';
import { TERMINATION_LOG, XCOM_DIR, terminationTargets } from './core/status.js';
import { VERSION } from './version.js';

/**
 * The command line (docs/contracts.md). Thin: parse arguments, hand over to the runner, exit with its code.
 * Every option also reads from the environment (`LAKEHOUSE_CONFIG`, `LAKEHOUSE_ENV`, …; the
 * Spark remote from `SPARK_REMOTE`).
 */

type Argv = {
  job?: string;
  config?: string;
  env?: string;
  remote?: string;
  set?: string[];
  'run-id'?: string;
  'logical-date'?: string;
  'status-file'?: string;
  'log-level': string;
  'termination-log'?: string;
  'retry-budget'?: string | number;
  timeout?: number;
};

/** Options not given on the command line come from LAKEHOUSE_<OPTION> (only these names are read). */
const ENV_OPTIONS = ['job', 'config', 'env', 'remote', 'run-id', 'logical-date', 'status-file', 'log-level', 'termination-log', 'retry-budget'] as const;

/** Seconds from the command line or environment as milliseconds; the option's name in the error. */
function seconds(value: string | number | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isFinite(n) || n < 0 || String(value).trim() === '') throw new UsageError(`--${option} must be a non-negative number of seconds, got ${JSON.stringify(value)}`);
  return Math.round(n * 1000);
}

function withEnvironment(a: Argv): Argv {
  const out: Record<string, unknown> = { ...a };
  for (const name of ENV_OPTIONS) {
    const value = process.env[`LAKEHOUSE_${name.toUpperCase().replaceAll('-', '_')}`];
    if (value !== undefined && value !== '' && !explicitlyGiven(name)) out[name] = value;
  }
  return out as Argv;
}

function explicitlyGiven(name: string): boolean {
  return process.argv.some((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
}

async function main(argv: string[]): Promise<number> {
  let exitCode: number = ExitCode.succeeded;
  const run = (command: 'run' | 'validate' | 'plan') => async (args: unknown) => {
    const a = withEnvironment(args as Argv);
    if (!a.config) throw new UsageError('--config <file> is required');
    const retryBudgetMs = seconds(a['retry-budget'], 'retry-budget');
    // Each command loads only what it needs: a cold start is what an orchestrator pays per task.
    const { runJob } = await import('./runner/run.js');
    exitCode = await runJob({
      command,
      config: a.config,
      set: a.set ?? [],
      logLevel: a['log-level'],
      env: process.env,
      ...(a.job ? { job: a.job } : {}),
      ...(a.env ? { envFile: a.env } : {}),
      ...(a.remote ? { remote: a.remote } : {}),
      ...(a['run-id'] ? { runId: a['run-id'] } : {}),
      ...(a['logical-date'] ? { logicalDate: a['logical-date'] } : {}),
      ...(a['status-file'] ? { statusFile: a['status-file'] } : {}),
      ...(retryBudgetMs !== undefined ? { retryBudgetMs } : {}),
      targets: { xcomDir: process.env.LAKEHOUSE_XCOM_DIR ?? XCOM_DIR, ...terminationTargets(a['termination-log']) },
      signals: process,
      exitNow: (code) => process.exit(code),
    });
  };

  const parser = yargs(argv)
    .scriptName('lakehouse-jobs')
    .version(VERSION)
    .strict()
    .wrap(Math.min(110, process.stdout.columns || 110))
    .options({
      job: { type: 'string', describe: 'job template (may be omitted when the config names job.template)' },
      config: { type: 'string', describe: "the tenant's job config (HOCON)" },
      env: { type: 'string', describe: 'platform config (HOCON): Spark remote, catalogs, connections, tenant roots' },
      remote: { type: 'string', describe: 'sc://host:port/;token=… or "local" (default: SPARK_REMOTE, the platform config, then local)' },
      set: { type: 'string', array: true, describe: 'HOCON override, repeatable: --set target.snapshot-date=2026-07-05' },
      'run-id': { type: 'string', describe: "the orchestrator's run id (Airflow: {{ run_id }})" },
      'logical-date': { type: 'string', describe: "the orchestrator's logical date (Airflow: {{ ds }})" },
      'status-file': { type: 'string', describe: 'also write the status document here (atomically)' },
      'log-level': { type: 'string', default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] },
      'termination-log': { type: 'string', describe: `Kubernetes termination message file (default: ${TERMINATION_LOG}, only where it exists)` },
      'retry-budget': { type: 'string', describe: 'seconds a run may spend retrying Spark Connect in all (default 120); then it exits 69 or 75' },
    })
    .command(['run', '$0'], 'run a job on Spark Connect (the default command)', {}, run('run'))
    .command('validate', 'parse and validate a config without Spark: schema, tenant rules, plan building', {}, run('validate'))
    .command('plan', 'print the Spark Connect plans a run would submit; sends and writes nothing', {}, run('plan'))
    .command(
      'ping',
      'one round trip to Spark Connect (readiness check); exits 0 or 69',
      (y) => y.option('timeout', { type: 'number', default: 10, describe: 'seconds to wait for the answer, retries included' }),
      async (args) => {
        const a = withEnvironment(args as unknown as Argv);
        const timeoutMs = seconds(a.timeout, 'timeout');
        const { ping } = await import('./runner/ping.js');
        exitCode = await ping(a.remote ?? process.env.SPARK_REMOTE ?? 'local', a['log-level'], {
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
          signals: process,
        });
      },
    )
    .command('templates', 'the job catalog with schema versions', {}, async () => {
      const { templates } = await import('./jobs/registry.js');
      const list = templates.map((t) => ({
        name: t.name,
        layer: t.layer,
        stability: t.stability,
        schemaVersions: t.versions.map((v) => v.version),
        summary: t.summary,
        examples: t.versions.map((v) => v.example),
      }));
      process.stdout.write(JSON.stringify(list, null, 2) + '\n');
    })
    .command(
      'schema <template>',
      "JSON Schema of a template's config",
      (y) => y.positional('template', { type: 'string', demandOption: true }).option('schema-version', { type: 'number' }),
      async (a) => {
        const { findTemplate } = await import('./jobs/registry.js');
        const { jsonSchemaOf } = await import('./jobs/json-schema.js');
        const t = findTemplate(a.template as string);
        const wanted = a['schema-version'] as number | undefined;
        const v = wanted === undefined ? t.versions.at(-1)! : t.versions.find((x) => x.version === wanted);
        if (!v) throw new UsageError(`${t.name} has no schema-version ${wanted} (has ${t.versions.map((x) => x.version).join(', ')})`);
        process.stdout.write(JSON.stringify(jsonSchemaOf(t, v), null, 2) + '\n');
      },
    )
    .fail((msg, err) => {
      throw err ?? new UsageError(msg);
    });

  try {
    await parser.parseAsync();
  } catch (e) {
    const failure = cliFailure(e);
    process.stderr.write(`lakehouse-jobs: ${failure.message}\n${failure.stack ? `${failure.stack}\n` : ''}${failure.usage ? 'Try lakehouse-jobs --help.\n' : ''}`);
    return failure.exitCode;
  }
  return exitCode;
}

main(hideBin(process.argv)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`lakehouse-jobs: internal error: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.exitCode = ExitCode.internal;
  },
);
