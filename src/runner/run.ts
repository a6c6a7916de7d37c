import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.js';
import { CancelledError, ConfigError, InternalError, type LakehouseError, asLakehouseError, ExitCode } from '../core/errors.js';
import { type JobIdentity, type LoadedJob, loadJob } from './load-job.js';
import { createLogger } from '../core/logger.js';
import { registerConnectionSecrets } from '../core/secrets.js';
import { type DiffReport, type RunState, type StatusDocument, type StatusTargets, writeStatus } from '../core/status.js';
// The Spark side (grpc-js, protobuf, apache-arrow, the executor) loads only when a command talks to
// Spark or prints protobuf: `validate` and the text `plan` start without it (cold start, issue 13).
import type { SparkConnectClient } from '../spark/client.js';
import { type ConnectionSpec, describeRemote } from '../spark/connection.js';
import type { ExecutionReport } from './executor.js';
import type { DiffState } from './diff.js';
import type { LineageRun } from './lineage/index.js';
import { resolveRemote } from './remote.js';
import { explainableRel } from './explain.js';
import type { RunView } from './view.js';
import { VERSION } from '../version.js';

/**
 * One invocation of `run`, `validate` or `plan`: load, (execute,) report. Always ends in exactly one
 * status document and an exit code from docs/contracts.md, whatever happened. What people see of it
 * (validate's lines, the plans, step lines, a terminal's summary) is the caller's view (src/app/).
 */

export interface RunRequest {
  /** `diff`: what a run would do now, writing nothing (docs/diff.md). */
  command: 'run' | 'validate' | 'plan' | 'diff';
  job?: string;
  config: string;
  envFile?: string;
  /** The tenant the orchestrator binds this run to (`--tenant`): trusted, unlike the config's tenant.id. */
  tenant?: string;
  remote?: string;
  set: string[];
  runId?: string;
  logicalDate?: string;
  statusFile?: string;
  logLevel: string;
  env: Record<string, string | undefined>;
  targets?: Partial<StatusTargets>;
  /** Process signals to honour (the CLI passes `process`); tests pass an emitter. */
  signals?: NodeJS.EventEmitter;
  /** Called for a second signal, or when cancelling overruns its grace period: leave at once. */
  exitNow?: (code: number) => void;
  /** Wall-clock time the run may spend retrying Spark Connect in all (default 2 minutes). */
  retryBudgetMs?: number;
  /** How long a cancelled run may take to wind down before it exits anyway (default 15 s). */
  cancelGraceMs?: number;
  /** `plan --explain`: also Spark's own explain of each step, from the remote. */
  explain?: boolean;
  /** What the caller shows of the run besides the log (src/app/ presents it); `plan` needs one. */
  view?: RunView;
  /** Where the log's JSON lines go (scrubbed); stderr by default. */
  logSink?: (line: string) => void;
}

/**
 * Kubernetes kills a pod 30 s after SIGTERM by default, and the contract promises an exit within 20 s
 * in any state. Winding down (interrupt by tag, interrupt of the running operation, release) is
 * bounded call by call; this is the backstop for anything that is not (starting the local server).
 */
const CANCEL_GRACE_MS = 15_000;

/** What the status reports about Spark, plus the live client and the cancellation, if any. */
type SparkState = NonNullable<StatusDocument['spark']> & { client?: SparkConnectClient; spec?: ConnectionSpec; cancelledBy?: CancelledError };

export async function runJob(req: RunRequest): Promise<number> {
  const startedAt = new Date();
  const runId = req.runId ?? `manual__${startedAt.toISOString()}__${randomUUID().slice(0, 8)}`;
  // Before anything can print: a remote's token is scrubbed from every output, whoever echoes it.
  for (const remote of [req.remote, req.env.SPARK_REMOTE]) registerConnectionSecrets(remote);
  const logger = createLogger(req.logLevel, { runId, command: req.command }, req.logSink);
  const identity: JobIdentity = {};
  const cancel = new AbortController();
  const spark: SparkState = { remote: '', operationIds: [] };
  // Filled in step by step: after a failure it still says which steps completed.
  // executor.ts's emptyReport(), without loading the executor.
  const report: ExecutionReport = { outputs: [], metrics: { rowsRead: 0, rowsWritten: 0 }, operationIds: [], completedSteps: [], notNeeded: [] };
  let outcome: Outcome;
  // `diff`: what the steps found the run would do, also when the predicted run fails.
  const diff: { state?: DiffState } = {};

  let finished = false;
  /** Exactly one status document and exit code per run, whoever gets here first. */
  const context = { startedAt, runId, identity, spark, logger };
  const finish = (doc: StatusDocument): number | undefined => {
    if (finished) return undefined;
    finished = true;
    return emitStatus(req, doc, logger);
  };
  const stopSignals = installSignalHandlers(req, cancel, logger, spark, tagFor(runId), (error) => {
    // The grace period is over: write the cancelled status now and leave.
    logger.error({ graceMs: req.cancelGraceMs ?? CANCEL_GRACE_MS }, 'cancelling took too long: exiting now');
    lineage?.abortNow(error);
    const code = finish(statusOf(req, { state: 'cancelled', error, report }, context));
    if (code !== undefined) (req.exitNow ?? process.exit)(code);
  });
  let loaded: LoadedJob | undefined;
  let doc: StatusDocument;
  // OpenLineage events of a `run` whose platform config asks for them (src/runner/lineage).
  let lineage: LineageRun | undefined;
  try {
    loaded = await loadJob(
      {
        configFile: req.config,
        ...(req.envFile ? { envFile: req.envFile } : {}),
        ...(req.tenant !== undefined ? { tenant: req.tenant } : {}),
        ...(req.job ? { job: req.job } : {}),
        overrides: req.set,
        env: req.env,
        runId,
        ...(req.logicalDate ? { logicalDate: req.logicalDate } : {}),
      },
      identity,
    );
    logger.info(
      { template: loaded.template.name, schemaVersion: loaded.version.version, tenant: loaded.tenant.id, steps: loaded.plan.steps.length },
      'config valid',
    );
    if (req.command === 'validate') {
      req.view?.valid?.(loaded);
      outcome = { state: 'succeeded' };
    } else if (req.command === 'plan') {
      const explained = req.explain ? await explainSteps(loaded, req, logger, cancel.signal, spark) : undefined;
      if (!req.view?.plan) throw new InternalError('plan: the request has no view to print the plans');
      await req.view.plan(loaded, explained);
      outcome = { state: 'succeeded' };
    } else {
      // A diff runs nothing, so it emits no lineage either.
      if (loaded.platform.lineage && req.command === 'run') {
        const { LineageRun } = await import('./lineage/index.js');
        lineage = LineageRun.create({ loaded, orchestratorRunId: runId, ...(req.logicalDate ? { logicalDate: req.logicalDate } : {}), env: req.env, logger });
        await lineage?.start();
      }
      outcome = await execute(loaded, req, logger, cancel.signal, runId, spark, report, diff);
    }
  } catch (e) {
    // Once a signal arrived, whatever the interrupted operation threw is the cancellation.
    const caught = spark.cancelledBy && !(e instanceof ConfigError) ? spark.cancelledBy : asLakehouseError(e);
    const failed = loaded?.plan.steps.find((s) => s.id === report.failedStep);
    const error = loaded ? (await import('./config-column.js')).configColumnError(caught, failed, loaded.config) : caught;
    outcome = {
      state: error instanceof CancelledError ? 'cancelled' : 'failed',
      error,
      ...(req.command === 'run' || req.command === 'diff' ? { report } : {}),
    };
    if (diff.state) outcome.diff = diff.state.report;
    // `validate` is read by people: its view shows every problem with its path instead of the log.
    if (error instanceof ConfigError && req.command === 'validate' && req.view?.invalid) req.view.invalid(error);
    else if (error instanceof ConfigError)
      for (const [n, i] of error.issues.entries())
        logger.error({ path: i.path, ...(error.locations[n] ? { at: error.locations[n] } : {}) }, `config error: ${i.path ? `${i.path}: ` : ''}${i.message}`);
    else if (error instanceof InternalError) {
      // A bug: the stack is what it takes to fix it.
      const cause = error.cause instanceof Error ? error.cause : error;
      logger.error({ error: { type: cause.name, code: error.code, exitCode: error.exitCode, stack: cause.stack } }, `internal error: ${error.message}`);
    } else logger.error({ error: { type: error.name, code: error.code, exitCode: error.exitCode } }, error.message);
  } finally {
    // The end event first: after a success it reads the written tables' schemas on the open session.
    if (lineage && outcome!) {
      const client = spark.client;
      const reader = client && outcome.state === 'succeeded' ? (await import('./lineage/schemas.js')).sparkSchemaReader(client) : undefined;
      await lineage.finish(outcome, reader);
    }
    await closeSpark(spark.client, logger);
    doc = statusOf(req, outcome!, context);
    // The ledger's append, on a session of its own, after the run's is released: still before the
    // signal handlers go, so a cancelled run's append stays within its grace period.
    if (loaded?.platform.ledger && req.command === 'run' && spark.spec && spark.serverVersion !== undefined && !finished)
      doc.ledger = await recordRun(loaded, doc, spark.spec, runId, req.logicalDate, logger);
    stopSignals();
  }
  // undefined: the grace period already ended the run with a cancelled status.
  return finish(doc) ?? spark.cancelledBy?.exitCode ?? ExitCode.internal;
}

/** Append the run's document to the platform's run ledger (src/runner/job-runs.ts); never throws. */
async function recordRun(loaded: LoadedJob, doc: StatusDocument, spec: ConnectionSpec, runId: string, logicalDate: string | undefined, logger: Logger) {
  const { appendToLedger } = await import('./job-runs.js');
  const grant = loaded.platform.tenants && Object.hasOwn(loaded.platform.tenants, loaded.tenant.id) ? loaded.platform.tenants[loaded.tenant.id] : undefined;
  return appendToLedger({
    spec,
    platform: loaded.platform,
    ledger: loaded.platform.ledger!,
    doc,
    facts: { attempt: loaded.context.attempt, configHash: configHashOf(loaded.config) },
    tenantRoots: [loaded.tenant.storageRoot, ...(grant?.['storage-roots'] ?? []), ...(grant?.['read-roots'] ?? [])],
    settings: { ...freshCatalogReads(loaded), ...commitMetadata(loaded, runId, logicalDate) },
    tag: `${tagFor(runId)}_ledger`.slice(0, 200),
    logger,
  });
}

type Outcome = { state: RunState; error?: LakehouseError; report?: ExecutionReport; diff?: DiffReport };

interface RunContext {
  startedAt: Date;
  runId: string;
  identity: JobIdentity;
  spark: SparkState;
  logger: Logger;
}

/** The status document of an outcome. */
function statusOf(req: RunRequest, outcome: Outcome, { startedAt, runId, identity, spark }: RunContext): StatusDocument {
  const exitCode = outcome.error ? outcome.error.exitCode : outcome.state === 'skipped' ? ExitCode.skipped : ExitCode.succeeded;
  const finishedAt = new Date();
  const { client: _client, spec: _spec, cancelledBy: _cancelled, ...sparkStatus } = spark;
  const doc: StatusDocument = {
    schema: 'lakehouse-jobs/status/v1',
    status: outcome.state,
    exitCode,
    command: req.command,
    job: { template: identity.template, schemaVersion: identity.schemaVersion, name: identity.name },
    ...(identity.tenant ? { tenant: identity.tenant } : {}),
    runId,
    ...(req.logicalDate ? { logicalDate: req.logicalDate } : {}),
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - startedAt.getTime(),
    ...((req.command === 'run' || req.command === 'diff') && sparkStatus.remote ? { spark: sparkStatus } : {}),
    outputs: outcome.report?.outputs ?? [],
    metrics: outcome.report?.metrics ?? { rowsRead: 0, rowsWritten: 0 },
    ...(outcome.report ? { completedSteps: [...outcome.report.completedSteps] } : {}),
    ...(outcome.report?.failedStep ? { failedStep: outcome.report.failedStep } : {}),
    ...(outcome.report?.skipped ? { skipReason: outcome.report.skipped } : {}),
    ...(outcome.error ? { error: outcome.error.report() } : {}),
    ...(outcome.diff ? { diff: outcome.diff } : {}),
  };
  return doc;
}

/** Write the status document to its targets; returns its exit code. */
function emitStatus(req: RunRequest, doc: StatusDocument, logger: Logger): number {
  const exitCode = doc.exitCode;
  const view = req.view?.status;
  writeStatus(doc, {
    ...(req.statusFile ? { statusFile: req.statusFile } : {}),
    ...req.targets,
    // A view that shows the status its own way (a terminal's summary) takes stdout's place.
    ...(view ? { stdout: () => view(doc) } : {}),
    // `plan` prints the plans on stdout; its status goes only to the files.
    ...(req.command === 'plan' ? { stdout: () => undefined } : {}),
  });
  logger.info({ status: doc.status, exitCode, durationMs: doc.durationMs }, `finished: ${doc.status}`);
  return exitCode;
}

async function execute(
  loaded: LoadedJob,
  req: RunRequest,
  logger: Logger,
  signal: AbortSignal,
  runId: string,
  spark: SparkState,
  report: ExecutionReport,
  diff: { state?: DiffState },
): Promise<Outcome> {
  req.view?.loaded?.(loaded);
  const client = await connect(loaded, req, logger, signal, spark);
  const [{ executePlan }, { bindTenant }, { DiffState }] = await Promise.all([import('./executor.js'), import('./tenant-logic.js'), import('./diff.js')]);
  if (req.command === 'diff') diff.state = new DiffState();
  await bindTenant(client, loaded.platform, loaded.tenant);
  await client.config.set(sessionSettings(loaded, runId, req.logicalDate));
  await executePlan(loaded.plan, {
    session: client,
    logger,
    signal,
    tags: [tagFor(runId)],
    onOperation: (id) => spark.operationIds.push(id),
    catalogs: Object.keys(loaded.platform.catalogs),
    report,
    stamps: (extra) => commitMetadata(loaded, runId, req.logicalDate, extra),
    ...(diff.state ? { diff: diff.state } : {}),
    ...(req.view?.step ? { onStep: req.view.step.bind(req.view) } : {}),
    ...(req.view?.progress ? { onProgress: req.view.progress.bind(req.view) } : {}),
  });
  return { state: report.skipped ? 'skipped' : 'succeeded', report, ...(diff.state ? { diff: diff.state.report } : {}) };
}

/** A session on the one resolved remote (src/runner/remote.ts), recorded in the run's Spark state. */
async function connect(loaded: LoadedJob, req: RunRequest, logger: Logger, signal: AbortSignal, spark: SparkState): Promise<SparkConnectClient> {
  const { SparkConnectClient } = await import('../spark/client.js');
  const spec = await resolveRemote(
    { ...(req.remote ? { option: req.remote } : {}), env: req.env, platform: loaded.platform, tenant: loaded.tenant.id },
    logger,
  );
  spark.remote = describeRemote(spec);
  spark.spec = spec;
  const client = SparkConnectClient.connect(spec, {
    userAgent: `lakehouse-jobs/${VERSION}`,
    logger,
    // Connecting, waiting between retries and analyzing all end at once when the run is cancelled.
    signal,
    ...(req.retryBudgetMs !== undefined ? { retryBudgetMs: req.retryBudgetMs } : {}),
  });
  spark.client = client;
  spark.sessionId = client.sessionId;
  spark.serverVersion = await client.analyze.sparkVersion();
  logger.info({ remote: spark.remote, sessionId: client.sessionId, serverVersion: spark.serverVersion }, 'connected to Spark Connect');
  return client;
}

/**
 * `plan --explain`: Spark's own explain of each step's query (a command's input), analysed on the
 * server and never executed. A step Spark cannot analyse yet (its table does not exist before the
 * run creates it) shows why instead. The session is bound to the tenant and config logic is sent as
 * tenant logic, as a run sends it: Spark's explain of a plan that reads another tenant's table would
 * show that table's columns and files, so the server's refusal ends the command (78) unexplained.
 */
async function explainSteps(loaded: LoadedJob, req: RunRequest, logger: Logger, signal: AbortSignal, spark: SparkState): Promise<Map<string, string>> {
  const client = await connect(loaded, req, logger, signal, spark);
  const [{ compileRelationPlan }, { bindTenant, tenantLogicOf }, { tenantPolicyError }] = await Promise.all([
    import('../spark/plan/compile.js'),
    import('./tenant-logic.js'),
    import('../spark/policy/index.js'),
  ]);
  await bindTenant(client, loaded.platform, loaded.tenant);
  await client.config.set(sessionSettings(loaded, 'plan', req.logicalDate));
  const out = new Map<string, string>();
  for (const step of loaded.plan.steps) {
    const rel = explainableRel(tenantLogicOf(step));
    if (!rel) continue;
    try {
      // Bound options (an incremental read's snapshot ids) are known only in a run: explained without them.
      out.set(step.id, await client.analyze.explain(compileRelationPlan(rel, { reveal: false, bound: new Map() }), 'simple'));
    } catch (e) {
      // The policy's refusal is the config's error, as in a run; anything else leaves the step unexplained.
      const refused = tenantPolicyError(e);
      if (refused instanceof ConfigError) throw refused;
      out.set(step.id, `(not explained: ${asLakehouseError(refused ?? e).message.split('\n')[0]})`);
    }
  }
  return out;
}

/** Everything a run sets on its Spark session before the first step. */
export function sessionSettings(loaded: LoadedJob, runId: string, logicalDate: string | undefined): Record<string, string> {
  return { ...freshCatalogReads(loaded), ...loaded.plan.sessionConf, ...commitMetadata(loaded, runId, logicalDate) };
}

/**
 * Every read of an Iceberg table sees its latest commit. Iceberg's Spark catalog caches loaded
 * tables per session (30 s by default), so a run that looked at its tombstone table early would
 * decide its MERGE on a stale copy while another run committed deletes in between: the way deleted
 * rows come back. Set before the session's first use of the catalog, which is when it reads them.
 * (Delta refreshes its log on every query.)
 */
export function freshCatalogReads(loaded: LoadedJob): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, c] of Object.entries(loaded.platform.catalogs)) if (c.format === 'iceberg') out[`spark.sql.catalog.${name}.cache-enabled`] = 'false';
  return out;
}

/**
 * Session settings that stamp every commit of this run with the orchestrator's run: Iceberg copies
 * `spark.sql.iceberg.snapshot-property.*` into each snapshot summary, Delta puts
 * `commitInfo.userMetadata` into each commit. A table's history then leads back to the Airflow run,
 * and the attempt's nonce tells a template which commits since its first read were its own. The
 * template, tenant and a hash of the resolved config say which job wrote it (the run ledger).
 */
export function commitMetadata(
  loaded: LoadedJob,
  runId: string,
  logicalDate: string | undefined,
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const job = `${loaded.template.name}/v${loaded.version.version}${loaded.config.job?.name ? `/${loaded.config.job.name}` : ''}`;
  const iceberg = 'spark.sql.iceberg.snapshot-property.lakehouse-jobs.';
  const attempt = loaded.context.attempt;
  const [template, tenant, configHash] = [loaded.template.name, loaded.tenant.id, configHashOf(loaded.config)];
  // A step's own stamps (an incremental read's position) beside the run's, under lakehouse-jobs.<key>.
  return {
    [`${iceberg}run-id`]: runId,
    ...(attempt ? { [`${iceberg}attempt`]: attempt } : {}),
    [`${iceberg}job`]: job,
    [`${iceberg}template`]: template,
    [`${iceberg}tenant`]: tenant,
    [`${iceberg}config-hash`]: configHash,
    ...(logicalDate ? { [`${iceberg}logical-date`]: logicalDate } : {}),
    ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [`${iceberg}${k}`, v])),
    'spark.databricks.delta.commitInfo.userMetadata': JSON.stringify({
      'lakehouse-jobs': { runId, ...(attempt ? { attempt } : {}), job, template, tenant, configHash, ...(logicalDate ? { logicalDate } : {}), ...extra },
    }),
  };
}

/**
 * The resolved job config's SHA-256 (keys sorted, so the same config hashes alike however it was
 * written), cut to 16 hex digits: it tells two runs of one job apart when their configs differ.
 */
export function configHashOf(config: unknown): string {
  const canonical = (v: unknown): unknown =>
    typeof v === 'bigint'
      ? v.toString()
      : v instanceof Date
        ? v.toISOString()
        : Array.isArray(v)
          ? v.map(canonical)
          : v && typeof v === 'object'
            ? Object.fromEntries(
                Object.keys(v)
                  .sort()
                  .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
              )
            : v;
  return createHash('sha256')
    .update(JSON.stringify(canonical(config)) ?? '')
    .digest('hex')
    .slice(0, 16);
}

/** Operation tags allow letters, digits and a few marks; one tag per run covers all its operations. */
export function tagFor(runId: string): string {
  return `lakehouse-jobs_${runId.replace(/[^A-Za-z0-9_.-]/g, '_')}`.slice(0, 200);
}

/**
 * SIGTERM/SIGINT: interrupt this run's Spark operations by their tag (one call covers all), then
 * abort the local work; the run ends as `cancelled` with 143/130. A second signal exits at once.
 */
function installSignalHandlers(
  req: RunRequest,
  cancel: AbortController,
  logger: Logger,
  spark: SparkState,
  tag: string,
  overrun: (error: CancelledError) => void,
): () => void {
  const signals = req.signals;
  if (!signals) return () => undefined;
  let grace: NodeJS.Timeout | undefined;
  const onSignal = (signal: 'SIGINT' | 'SIGTERM') => {
    const error = new CancelledError(signal);
    if (spark.cancelledBy) {
      logger.warn({ signal }, 'second signal: exiting now');
      (req.exitNow ?? process.exit)(error.exitCode);
      return;
    }
    spark.cancelledBy = error;
    grace = setTimeout(() => overrun(error), req.cancelGraceMs ?? CANCEL_GRACE_MS);
    grace.unref();
    logger.warn({ signal }, 'cancelling: interrupting the Spark operations of this run');
    const client = spark.client;
    // Nothing submitted yet (still connecting or analyzing): nothing to interrupt on the server.
    if (!client || spark.operationIds.length === 0) {
      cancel.abort(error);
      return;
    }
    client
      .interruptTag(tag)
      .then((ids) => {
        spark.interruptedOperationIds = ids;
        logger.info({ interrupted: ids }, 'interrupted');
      })
      .catch((e: unknown) => logger.warn({ err: String(e) }, 'interrupt by tag failed; interrupting by operation id'))
      .finally(() => cancel.abort(error));
  };
  const int = () => onSignal('SIGINT');
  const term = () => onSignal('SIGTERM');
  signals.on('SIGINT', int);
  signals.on('SIGTERM', term);
  return () => {
    clearTimeout(grace);
    signals.off('SIGINT', int);
    signals.off('SIGTERM', term);
  };
}

async function closeSpark(client: SparkConnectClient | undefined, logger: Logger): Promise<void> {
  if (!client) return;
  try {
    await client.releaseSession();
  } catch (e) {
    logger.warn({ err: String(e) }, 'releasing the Spark session failed');
  } finally {
    client.close();
  }
}
