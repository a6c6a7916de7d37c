import { randomUUID } from 'node:crypto';
import type { Table } from 'apache-arrow';
import type { Logger } from '../core/logger.js';
import { CancelledError, ConfigError, DataError, InternalError } from '../core/errors.js';
import { errorClassOf, SparkError } from '../spark/errors.js';
import { displayTable, quoteName, sameLocation, tableParts } from '../core/naming.js';
import { col, eq, lit } from '../spark/plan/expressions.js';
import {
  type CompiledPlan as Plan,
  compileCheckpointCommand,
  compileCommandPlan,
  compileRelationPlan,
  compileRemoveCachedRelation,
  compileStreamingQueryCommand,
} from '../spark/plan/compile.js';
import { Query } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import { rows as arrowRows } from '../spark/arrow.js';
import { type SparkType, structFields } from '../spark/types.js';
import type { SparkProgress, StreamingQueryResult } from '../spark/execution.js';
import { type PolicySession, PolicyVerdicts, type TenantReadPolicy, checkStepPolicy, commandInputs } from '../spark/policy/index.js';
import type { Rel } from '../spark/plan/relations.js';
import { type JobPlan, type OutputReport, type Row, type Step, type StepEffect, type StreamProgress, sameColumnType } from '../jobs/template.js';

/**
 * Runs a template's steps, in order, on a Spark Connect session. The only code that sends plans:
 * templates stay pure, and this is where outputs, metrics and operation ids are gathered.
 */

/** What the executor needs from a Spark Connect client. */
export interface SparkSession extends PolicySession {
  execute(
    plan: Plan,
    opts?: { tags?: string[]; signal?: AbortSignal; operationId?: string; onProgress?: (progress: SparkProgress) => void },
  ): Promise<{
    operationId: string;
    table?: Table;
    streamingQuery?: { id: string; runId: string };
    streamingQueryResult?: StreamingQueryResult;
    checkpointRelationId?: string;
  }>;
  readonly analyze: PolicySession['analyze'] & { schema(plan: Plan): Promise<unknown> };
  /** Session settings: the policy's, and a re-read of a bad source file for a better error message. */
  readonly config: PolicySession['config'] & { unset?(keys: readonly string[]): Promise<void> };
}

export interface ExecutionReport {
  outputs: OutputReport[];
  metrics: { rowsRead: number; rowsWritten: number };
  operationIds: string[];
  /** Ids of the steps that ran to the end, in order: after a failure, what did commit. */
  completedSteps: string[];
  /** The step that failed, if one did. */
  failedStep?: string;
  skipped?: string;
  /** Steps not sent because their `when` did not hold (e.g. a write that would change nothing). */
  notNeeded: string[];
}

export function emptyReport(): ExecutionReport {
  return { outputs: [], metrics: { rowsRead: 0, rowsWritten: 0 }, operationIds: [], completedSteps: [], notNeeded: [] };
}

export interface ExecuteOptions {
  session: SparkSession;
  logger: Logger;
  /** Operation tags: one `Interrupt` by tag cancels everything this run submitted. */
  tags: string[];
  signal: AbortSignal;
  /** Called with each operation id as soon as it is known. */
  onOperation?: (id: string) => void;
  /** Awaited before each step is sent: tests pause a run here to interleave it with another. */
  beforeStep?: (step: Step) => Promise<void>;
  /** Each step as it starts and ends (a terminal's step lines). */
  onStep?: (event: StepEvent) => void;
  /** Spark's execution progress of the running step's operations (stages, tasks, bytes read). */
  onProgress?: (step: Step, progress: SparkProgress) => void;
  /** What the tenant may read: steps flagged `untrusted` are checked against it before they run. */
  policy?: TenantReadPolicy;
  /**
   * The platform's catalogs. The tenant's layout puts a layer's table in one directory whatever its
   * catalog: before a table is created, the same name in the others is looked for (ensureTable).
   */
  catalogs?: readonly string[];
  /**
   * The report to fill in, step by step. The caller keeps it, so when a step fails (or the run is
   * cancelled) it still knows which steps completed and what they reported.
   */
  report?: ExecutionReport;
}

/** A step starting or ending: `index` counts from 0 among the plan's `total` steps. */
export interface StepEvent {
  readonly kind: 'started' | 'done' | 'failed' | 'notNeeded';
  readonly step: Step;
  readonly index: number;
  readonly total: number;
  /** Since the step started (done, failed). */
  readonly ms?: number;
}

export async function executePlan(plan: JobPlan, opts: ExecuteOptions): Promise<ExecutionReport> {
  const report = opts.report ?? emptyReport();
  const facts: Record<string, readonly Row[]> = {};
  // The tenant read policy's verdicts of this run: a relation shared by several steps is analysed once.
  const verdicts = new PolicyVerdicts();
  // The rows the run's materialize steps keep on the server, by name: dropped when the run ends.
  const materialized = new Map<string, string>();
  try {
    for (const [index, step] of plan.steps.entries()) {
      const at = { step, index, total: plan.steps.length };
      throwIfAborted(opts.signal);
      if (step.when && !step.when(facts)) {
        report.notNeeded.push(step.id);
        opts.logger.info({ step: step.id }, `${step.id} not needed: nothing for it to change`);
        opts.onStep?.({ kind: 'notNeeded', ...at });
        continue;
      }
      await opts.beforeStep?.(step);
      throwIfAborted(opts.signal);
      const started = performance.now();
      opts.logger.info({ step: step.id }, step.title);
      opts.onStep?.({ kind: 'started', ...at });
      let skipped: string | undefined;
      try {
        skipped = await runStep(step, opts, report, facts, verdicts, materialized);
      } catch (e) {
        report.failedStep = step.id;
        opts.onStep?.({ kind: 'failed', ...at, ms: performance.now() - started });
        throw await findBadSourceFile(step, e, opts);
      }
      report.completedSteps.push(step.id);
      opts.logger.info({ step: step.id, durationMs: Math.round(performance.now() - started) }, `${step.id} done`);
      opts.onStep?.({ kind: 'done', ...at, ms: performance.now() - started });
      if (skipped !== undefined) {
        report.skipped = skipped;
        opts.logger.info({ step: step.id, reason: skipped }, 'nothing to do: skipping the rest of the job');
        break;
      }
    }
  } finally {
    await dropMaterialized(materialized, opts);
  }
  return report;
}

/**
 * Free the rows the run's materialize steps kept, also after a failure or a cancel: the server
 * would otherwise hold them until the session ends. Bounded, and a failure only logged: the run's
 * outcome is decided already.
 */
async function dropMaterialized(materialized: Map<string, string>, opts: ExecuteOptions): Promise<void> {
  for (const [name, id] of materialized) {
    try {
      const drop = opts.session.execute(compileRemoveCachedRelation(id), { tags: opts.tags });
      await Promise.race([drop, new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5_000).unref())]);
      opts.logger.debug({ materialized: name }, 'materialized rows dropped');
    } catch (e) {
      opts.logger.warn({ materialized: name, err: e instanceof Error ? e.message : String(e) }, 'could not drop the materialized rows');
    }
  }
  materialized.clear();
}

async function runStep(
  step: Step,
  opts: ExecuteOptions,
  report: ExecutionReport,
  facts: Record<string, readonly Row[]>,
  verdicts: PolicyVerdicts,
  materialized: Map<string, string>,
): Promise<string | undefined> {
  // What the executor sends: secrets revealed, materialized rows named by the server's ids.
  const live = { reveal: true, materialized };
  // Flagged steps are checked right before their plan first reaches the server (analysing it
  // included): an ensureTable whose table exists sends nothing and needs no check.
  const policyCheck = async () => {
    if (step.untrusted?.length) await checkPolicy(step, opts, verdicts);
  };
  const run = async (plan: Plan) => {
    // Our own operation id, recorded before sending: a run cancelled mid-step still names it.
    const operationId = randomUUID();
    report.operationIds.push(operationId);
    opts.onOperation?.(operationId);
    // Which step sent which operation: bench/passes attributes the server's jobs and scans by it.
    opts.logger.debug({ step: step.id, operationId }, 'operation sent');
    const onProgress = opts.onProgress;
    return opts.session.execute(plan, {
      operationId,
      tags: opts.tags,
      signal: opts.signal,
      ...(onProgress ? { onProgress: (p: SparkProgress) => onProgress(step, p) } : {}),
    });
  };
  // A query's rows become the step's fact for later steps, and its pure function says what they mean.
  const factsOf = async (rel: Rel, interpret: (rows: Row[]) => StepEffect) => {
    const result = await run(compileRelationPlan(rel, live));
    const rows = result.table ? arrowRows(result.table) : [];
    facts[step.id] = rows;
    return applyEffect(interpret(rows), report);
  };
  switch (step.kind) {
    case 'command':
      await policyCheck();
      await run(compileCommandPlan(step.command, live));
      return undefined;
    case 'ensureTable': {
      const locationOf = async (parts: string[]): Promise<unknown> => {
        const describe = Query.sql(sql`DESCRIBE TABLE EXTENDED ${sql.table(parts)}`).filter(eq(col('col_name'), lit('Location')));
        const result = await run(compileRelationPlan(describe.rel, { reveal: false }));
        return (result.table ? arrowRows(result.table) : [])[0]?.data_type;
      };
      const checkLocation = async () => {
        // The catalog finds tables by name; the name alone would let a job write to a table left
        // at an old lake home or at another tenant's path, and report the path it expected.
        const actual = await locationOf(tableParts(step.table));
        if (typeof actual === 'string' && sameLocation(actual, step.location)) return;
        const where = typeof actual === 'string' && actual !== '' ? `at ${actual}` : 'without a location Spark reports';
        throw new ConfigError([
          {
            path: step.configPath,
            message: `table ${displayTable(step.table)} already exists ${where}, not at ${step.location} where the tenant's storage layout puts it; nothing was written to it (move or drop the table, or fix tenant.storage-root)`,
          },
        ]);
      };
      if (await tableExists(opts.session, tableParts(step.table))) {
        opts.logger.debug({ table: displayTable(step.table) }, 'table exists');
        await checkLocation();
        return undefined;
      }
      await checkOtherCatalogs(step, opts, locationOf);
      await checkLocationEmpty(step, opts);
      await policyCheck();
      try {
        await run(compileCommandPlan(step.create, live));
      } catch (e) {
        // Another run created it between our probe and our create: the state we wanted, if it is ours.
        if (!errorClassOf(e)?.startsWith('TABLE_OR_VIEW_ALREADY_EXISTS')) throw e instanceof SparkError ? e.at(step.configPath) : e;
        await checkLocation();
      }
      return undefined;
    }
    case 'compareSchemas': {
      await policyCheck();
      const [source, table] = await Promise.all([
        opts.session.analyze.schema(compileRelationPlan(step.source.rel, live)),
        opts.session.analyze.schema(compileRelationPlan(Query.table(tableParts(step.table)).rel, { reveal: false })),
      ]);
      const have = new Map(structFields(table as SparkType).map((f) => [f.name.toLowerCase(), f]));
      const incoming = structFields(source as SparkType);
      const names = new Set(incoming.map((f) => f.name.toLowerCase()));
      const decision = step.interpret({
        added: incoming.filter((f) => !have.has(f.name.toLowerCase())),
        missing: [...have.values()].filter((f) => !names.has(f.name.toLowerCase())).map((f) => f.name),
        changed: incoming.flatMap((f) => {
          const t = have.get(f.name.toLowerCase());
          return t && !sameColumnType(t.type, f.type) ? [{ name: f.name, tableType: t.type, sourceType: f.type }] : [];
        }),
      });
      if (decision.fail) throw decision.fail;
      for (const command of decision.commands ?? []) await run(compileCommandPlan(command, live));
      return undefined;
    }
    case 'checkColumns': {
      await policyCheck();
      const schema = await opts.session.analyze.schema(compileRelationPlan(step.source.rel, live));
      const effect = step.interpret(structFields(schema as SparkType).map((f) => ({ name: f.name, type: f.type })));
      if (effect.fail) throw effect.fail;
      return effect.skip;
    }
    case 'probePaths': {
      const missing: string[] = [];
      for (const path of step.paths) if (!(await pathExists(opts.session, path))) missing.push(path);
      const effect = step.interpret(missing);
      if (effect.fail) throw effect.fail;
      return effect.skip;
    }
    case 'query': {
      await policyCheck();
      return factsOf(step.query.rel, step.interpret);
    }
    case 'materialize': {
      await policyCheck();
      const kept = await run(compileCheckpointCommand(step.query.rel, live));
      if (!kept.checkpointRelationId) throw new InternalError(`step ${step.id}: the server answered the checkpoint without naming its rows`);
      materialized.set(step.name, kept.checkpointRelationId);
      return factsOf(step.check.rel, step.interpret);
    }
    case 'stream': {
      await policyCheck();
      const progress: StreamProgress[] = [];
      for (let attempt = 1; ; attempt++) {
        const started = await run(compileCommandPlan(step.command, live));
        const query = started.streamingQuery;
        if (!query) throw new InternalError(`step ${step.id}: the server answered the stream's start without a query id`);
        opts.logger.info({ step: step.id, streamingQuery: query, attempt }, 'streaming query started');
        try {
          progress.push(...(await awaitStreamingQuery(query, opts, run)));
          break;
        } catch (e) {
          if (attempt >= STREAM_ATTEMPTS || opts.signal.aborted || errorClassOf(e) !== 'STREAM_FAILED') throw e;
          // The query itself failed on the server (not the connection, not a cancel). Restarting it
          // from its checkpoint lands nothing twice; it clears a failure of the first batch after a
          // restart, which Spark 4.1's Kafka source hits once that batch is committed (SPARK-55271:
          // its progress metrics read offsets only a fresh batch sets). A real fault fails again.
          opts.logger.warn({ step: step.id, streamingQuery: query, err: e }, 'streaming query failed; restarting it once from its checkpoint');
        }
      }
      return applyEffect(step.interpret(progress), report);
    }
  }
}

function applyEffect(effect: StepEffect, report: ExecutionReport): string | undefined {
  // A failing check may still report what it measured (gold-publish's expectations): the status shows it.
  if (effect.output) mergeOutput(report.outputs, effect.output);
  if (effect.fail) throw effect.fail;
  if (effect.metrics?.rowsRead) report.metrics.rowsRead += effect.metrics.rowsRead;
  if (effect.metrics?.rowsWritten) report.metrics.rowsWritten += effect.metrics.rowsWritten;
  return effect.skip;
}

/** How often a failed streaming query is started: once more, from its checkpoint (see the 'stream' step). */
const STREAM_ATTEMPTS = 2;

/** How long one wait for a streaming query's end may take: well inside a call's answer deadline. */
const STREAM_WAIT_MS = 30_000;

/**
 * Wait until a streaming query ends (availableNow ends it once it caught up), then read its
 * micro-batches' progress. A failed query makes the wait throw the query's error. When the run is
 * cancelled or the wait fails otherwise, the query is stopped: it must not go on writing after
 * the run that owns it ended (its checkpoint lets the next run resume where it stopped).
 */
async function awaitStreamingQuery(
  query: { id: string; runId: string },
  opts: ExecuteOptions,
  run: (plan: Plan) => ReturnType<SparkSession['execute']>,
): Promise<StreamProgress[]> {
  try {
    for (;;) {
      const answer = await run(compileStreamingQueryCommand(query, { await: { timeoutMs: STREAM_WAIT_MS } }));
      const r = answer.streamingQueryResult?.resultType;
      if (r?.case === 'awaitTermination' && r.value.terminated) break;
      opts.logger.debug({ streamingQuery: query.id }, 'streaming query still running');
    }
  } catch (e) {
    try {
      // Bounded: a cancelled run must still end within its grace period, answered or not.
      const stop = opts.session.execute(compileStreamingQueryCommand(query, 'stop'), { tags: opts.tags });
      await Promise.race([stop, new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5_000).unref())]);
      opts.logger.info({ streamingQuery: query }, 'streaming query stopped');
    } catch (stopError) {
      opts.logger.warn({ streamingQuery: query, err: stopError }, 'could not stop the streaming query');
    }
    throw e;
  }
  const answer = await run(compileStreamingQueryCommand(query, 'recentProgress'));
  const r = answer.streamingQueryResult?.resultType;
  const docs = r?.case === 'recentProgress' ? r.value.recentProgressJson : [];
  opts.logger.info({ streamingQuery: query.id, batches: docs.length, answer: r?.case ?? 'none' }, 'streaming query ended');
  return docs.map(parseProgress).filter((p) => p.numInputRows > 0 || p.sources.length > 0);
}

function parseProgress(doc: string): StreamProgress {
  const p = JSON.parse(doc) as {
    batchId?: number;
    numInputRows?: number;
    sources?: { description?: string; startOffset?: unknown; endOffset?: unknown; numInputRows?: number }[];
  };
  const offsets = (o: unknown) => (typeof o === 'string' ? (JSON.parse(o) as unknown) : o);
  const sources = p.sources ?? [];
  return {
    batchId: Number(p.batchId ?? -1),
    // Spark's JSON leaves the batch's own count out at times; its sources' counts add up to it.
    numInputRows: Number(p.numInputRows ?? sources.reduce((n, s) => n + Number(s.numInputRows ?? 0), 0)),
    sources: sources.map((s) => ({
      description: String(s.description ?? ''),
      ...(s.startOffset === undefined || s.startOffset === null ? {} : { startOffset: offsets(s.startOffset) }),
      ...(s.endOffset === undefined || s.endOffset === null ? {} : { endOffset: offsets(s.endOffset) }),
      numInputRows: Number(s.numInputRows ?? 0),
    })),
  };
}

/**
 * The second wall: a step carrying config logic runs only if the server's analysis of its plan
 * reads nothing but the tenant's data and uses only allowed functions (src/spark/policy).
 */
async function checkPolicy(step: Step, opts: ExecuteOptions, verdicts: PolicyVerdicts): Promise<void> {
  const subject = { step: step.id, configPaths: step.untrusted ?? [] };
  if (!opts.policy) throw new InternalError(`step ${step.id} carries config logic but the run has no tenant read policy`);
  const checked = await checkStepPolicy(opts.session, stepRelations(step, subject), opts.policy, subject, { verdicts });
  // Say what was judged now: a step whose relations were all judged by an earlier step was not analysed again.
  const verdict =
    checked.relations === 0 && checked.cached > 0
      ? 'allowed (its relations were judged earlier in this run)'
      : `allowed (${checked.relations} relation(s) analysed by the server)`;
  opts.logger.info({ step: step.id, policy: { ...checked, configPaths: subject.configPaths } }, `tenant read policy: ${verdict}`);
}

/** The relations a step sends, as the policy analyses them. */
export function stepRelations(step: Step, subject: { step: string; configPaths: readonly string[] }): Rel[] {
  switch (step.kind) {
    case 'query':
    case 'materialize':
      return [step.query.rel];
    case 'compareSchemas':
    case 'checkColumns':
      return [step.source.rel];
    case 'command':
    case 'stream':
      return commandInputs(step.command, subject);
    case 'ensureTable':
      return commandInputs(step.create, subject);
    case 'probePaths':
      return [];
  }
}

/** The main plan of a step, as `plan` prints it (secrets redacted unless `reveal`). */
export function stepPlan(step: Step, opts: { reveal: boolean }): Plan {
  switch (step.kind) {
    case 'query':
      return compileRelationPlan(step.query.rel, opts);
    case 'materialize':
      return compileCheckpointCommand(step.query.rel, opts);
    case 'compareSchemas':
    case 'checkColumns':
      return compileRelationPlan(step.source.rel, opts);
    case 'command':
    case 'stream':
      return compileCommandPlan(step.command, opts);
    case 'ensureTable':
      return compileCommandPlan(step.create, opts);
    case 'probePaths':
      return compileRelationPlan(listing(step.paths).rel, opts);
  }
}

/** The files under `paths` as a relation whose analysis lists them and reads none (binaryFile's schema is fixed). */
function listing(paths: readonly string[], options?: Record<string, string>): Query {
  return Query.read('binaryFile', { paths: [...paths], ...(options ? { options } : {}) });
}

async function pathExists(session: SparkSession, path: string): Promise<boolean> {
  try {
    await session.analyze.schema(compileRelationPlan(listing([path]).rel, { reveal: false }));
    return true;
  } catch (e) {
    if (errorClassOf(e)?.startsWith('PATH_NOT_FOUND')) return false;
    throw e;
  }
}

/**
 * Before a table is created: the same namespace and name in the platform's other catalogs. The
 * tenant's layout puts a layer's table at one location whatever its catalog, and Spark creates an
 * Iceberg table on a directory holding a Delta table (or another catalog's Iceberg table) without
 * complaint; both then write there, and one's orphan-file removal or VACUUM deletes the other's
 * files. Refused (78, TABLE_LOCATION_TAKEN) when such a table is at this location; a catalog the
 * server does not have holds no table. A view there has no location and is no obstacle.
 */
async function checkOtherCatalogs(
  step: Extract<Step, { kind: 'ensureTable' }>,
  opts: ExecuteOptions,
  locationOf: (parts: string[]) => Promise<unknown>,
): Promise<void> {
  for (const catalog of opts.catalogs ?? []) {
    if (catalog === step.table.catalog) continue;
    const parts = [catalog, step.table.namespace, step.table.table];
    let exists: boolean;
    try {
      exists = await tableExists(opts.session, parts);
    } catch (e) {
      // Not a catalog of this server: Spark reads the name as a namespace of its session catalog.
      if (errorClassOf(e)?.startsWith('REQUIRES_SINGLE_PART_NAMESPACE')) continue;
      throw e instanceof SparkError ? e.at(step.configPath) : e;
    }
    if (!exists) continue;
    const actual = await locationOf(parts);
    if (typeof actual !== 'string' || !sameLocation(actual, step.location)) continue;
    const other = quoteName(parts);
    throw new ConfigError(
      [
        {
          path: step.configPath,
          message: `table ${displayTable(step.table)} cannot be created at ${step.location}: ${other} of catalog ${catalog} is there (the tenant's layout puts a layer's table at one location whatever its catalog, and two tables in one directory delete each other's files); nothing was written (name this table differently, or drop the other)`,
        },
      ],
      { code: 'TABLE_LOCATION_TAKEN' },
    );
  }
}

/**
 * Before a table is created: nothing else is at its location. The tenant's layout gives a layer's
 * table one location whatever its format and catalog, and bronze may be parquet files there too; a
 * table created over files it does not own takes them for its own to delete: an Iceberg table's
 * orphan-file removal deletes every file its snapshots do not reference (a parquet bronze's dates,
 * the files of a table dropped from its catalog but not purged), and Delta's VACUUM likewise. So a
 * new table starts at an empty location: no `_delta_log` (a Delta table no catalog names; Delta
 * itself refuses to create a table over one with a query, as the runner's creates are) and no file
 * Spark lists (hidden files, `_…` and `.…`, are not listed and do not count). Refused (78,
 * TABLE_LOCATION_TAKEN); nothing is written.
 */
async function checkLocationEmpty(step: Extract<Step, { kind: 'ensureTable' }>, opts: ExecuteOptions): Promise<void> {
  const taken = (what: string) =>
    new ConfigError(
      [
        {
          path: step.configPath,
          message: `table ${displayTable(step.table)} cannot be created at ${step.location}: ${what} already there (another format's table, a table dropped from its catalog without its files, or bronze parquet files), which the new table would take for its own and delete in its maintenance; a new table starts at an empty location, and nothing was written (move the files away, or name the table differently)`,
        },
      ],
      { code: 'TABLE_LOCATION_TAKEN' },
    );
  if (await pathExists(opts.session, `${step.location}/_delta_log`)) throw taken('a Delta table (_delta_log)');
  const files = await filesUnder(opts.session, step.location, step.configPath);
  if (files.length > 0) throw taken(`${files.length} file(s)`);
}

/** The files Spark lists under `path`, recursively (none when it does not exist). */
async function filesUnder(session: SparkSession, path: string, configPath: string): Promise<string[]> {
  try {
    return await session.analyze.inputFiles(compileRelationPlan(listing([path], { recursiveFileLookup: 'true' }).rel, { reveal: false }));
  } catch (e) {
    if (errorClassOf(e)?.startsWith('PATH_NOT_FOUND')) return [];
    throw e instanceof SparkError ? e.at(configPath) : e;
  }
}

async function tableExists(session: SparkSession, parts: string[]): Promise<boolean> {
  try {
    await session.analyze.schema(compileRelationPlan(Query.table(parts).rel, { reveal: false }));
    return true;
  } catch (e) {
    if (errorClassOf(e)?.startsWith('TABLE_OR_VIEW_NOT_FOUND')) return false;
    throw e;
  }
}

function mergeOutput(outputs: OutputReport[], next: OutputReport): void {
  const existing = outputs.find((o) => o.table === next.table);
  if (!existing) {
    outputs.push({ ...next });
    return;
  }
  Object.assign(existing, { ...next, metrics: { ...existing.metrics, ...next.metrics } });
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason instanceof CancelledError ? signal.reason : new CancelledError('SIGTERM');
}

// ---------------------------------------------------------------------------------------------
// Bad source files: which one?

/** Source failures where Spark names neither the file nor (always) the column. */
const UNLOCATED = new Set(['SOURCE_TYPE_MISMATCH', 'SOURCE_TYPE_UNSUPPORTED']);
/** The search reads one footer per file: bounded, it is only there to improve an error message. */
const DIAGNOSE_MAX_FILES = 200;
const DIAGNOSE_MAX_MS = 30_000;
const NANOS_AS_LONG = 'spark.sql.legacy.parquet.nanosAsLong';

/**
 * A schema merge across bronze files fails without saying which file is odd, and an illegal Parquet
 * type (nanosecond timestamps) names neither file nor column. Then look at the step's Parquet
 * sources file by file (their schemas, footers only) and name the file and the column; any other
 * error, or a search that finds nothing within its bounds, is returned as it was.
 */
async function findBadSourceFile(step: Step, error: unknown, opts: ExecuteOptions): Promise<unknown> {
  if (!(error instanceof SparkError) || !UNLOCATED.has(error.code) || error.messageParameters.path || opts.signal.aborted) return error;
  const started = performance.now();
  try {
    const paths = parquetSourcePaths(step);
    if (paths.length === 0) return error;
    // binaryFile lists the files; without its `content` column it reads none of them.
    const listing = Query.read('binaryFile', { paths, options: { pathGlobFilter: '*.parquet', recursiveFileLookup: 'true' } })
      .select('path')
      .limit(DIAGNOSE_MAX_FILES + 1);
    const files = (await opts.session.execute(compileRelationPlan(listing.rel, { reveal: true }), { tags: opts.tags, signal: opts.signal })).table;
    const names = (files ? arrowRows(files) : []).map((r) => String(r.path)).sort();
    if (names.length === 0 || names.length > DIAGNOSE_MAX_FILES) return error;
    const schemas = new Map<string, Map<string, string>>();
    const unreadable: string[] = [];
    for (const file of names) {
      if (performance.now() - started > DIAGNOSE_MAX_MS) return error;
      try {
        const t = await opts.session.analyze.schema(compileRelationPlan(Query.read('parquet', { paths: [file] }).rel, { reveal: true }));
        schemas.set(file, new Map(structFields(t as SparkType).map((f) => [f.name.toLowerCase(), f.type])));
      } catch (e) {
        if (e instanceof SparkError && e.code === 'SOURCE_TYPE_UNSUPPORTED') unreadable.push(file);
        else throw e;
      }
    }
    const located = error.code === 'SOURCE_TYPE_UNSUPPORTED' ? await illegalTypeColumn(unreadable, schemas, opts) : typeClash(schemas);
    if (!located) return error;
    opts.logger.info(
      { step: step.id, file: located.file, column: located.column, durationMs: Math.round(performance.now() - started) },
      'found the bad source file',
    );
    return new DataError(`source file ${located.file}: ${located.what}. Fix: ${error.hint ?? 'rewrite the file'}`, {
      cause: error,
      code: error.code,
      ...(error.hint ? { hint: error.hint } : {}),
    });
  } catch (e) {
    opts.logger.debug({ step: step.id, err: e instanceof Error ? e.message : String(e) }, 'looking for the bad source file failed');
    return error;
  }
}

/** The column whose type differs between files, and the file(s) of the minority type. */
function typeClash(schemas: Map<string, Map<string, string>>): { file: string; column: string; what: string } | undefined {
  const columns = new Set([...schemas.values()].flatMap((m) => [...m.keys()]));
  for (const column of columns) {
    const byType = new Map<string, string[]>();
    for (const [file, fields] of schemas) {
      const type = fields.get(column);
      if (type !== undefined) byType.set(type, [...(byType.get(type) ?? []), file]);
    }
    if (byType.size < 2) continue;
    const ranked = [...byType].sort((a, b) => b[1].length - a[1].length);
    const [common, odd] = [ranked[0]!, ranked[1]!];
    return {
      file: odd[1][0]!,
      column,
      what: `column ${column} is ${odd[0]} in this file${odd[1].length > 1 ? ` (and ${odd[1].length - 1} more)` : ''}, ${common[0]} in ${common[1].length} other file${common[1].length > 1 ? 's' : ''} of the source`,
    };
  }
  return undefined;
}

/**
 * The file Spark cannot read, and its column: read again with nanosecond timestamps as longs, the
 * column is the one that is a bigint there and a timestamp in the readable files (or any
 * nanosecond column when there is no readable file to compare with).
 */
async function illegalTypeColumn(
  unreadable: string[],
  readable: Map<string, Map<string, string>>,
  opts: ExecuteOptions,
): Promise<{ file: string; column: string; what: string } | undefined> {
  const file = unreadable[0];
  if (!file) return undefined;
  const more = unreadable.length > 1 ? ` (and ${unreadable.length - 1} more file${unreadable.length > 2 ? 's' : ''})` : '';
  let column: string | undefined;
  const unset = opts.session.config.unset?.bind(opts.session.config);
  if (unset) {
    await opts.session.config.set({ [NANOS_AS_LONG]: 'true' });
    try {
      const t = await opts.session.analyze.schema(compileRelationPlan(Query.read('parquet', { paths: [file] }).rel, { reveal: true }));
      const other = readable.values().next().value as Map<string, string> | undefined;
      column = structFields(t as SparkType).find((f) => f.type === 'bigint' && other?.get(f.name.toLowerCase())?.startsWith('timestamp'))?.name;
    } finally {
      await unset([NANOS_AS_LONG]);
    }
  }
  return {
    file,
    column: column ?? '?',
    what: `${column ? `column ${column} holds` : 'it holds'} a Parquet type Spark cannot read (nanosecond timestamps)${more}`,
  };
}

/** Every path a step reads as Parquet, wherever it sits in the step's plan. */
function parquetSourcePaths(step: Step): string[] {
  const out = new Set<string>();
  const seen = new Set<unknown>();
  const walk = (node: unknown, depth: number): void => {
    if (depth > 200 || typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    const n = node as { kind?: unknown; format?: unknown; paths?: unknown };
    if (n.kind === 'source' && n.format === 'parquet' && Array.isArray(n.paths)) for (const p of n.paths) out.add(String(p));
    for (const v of Array.isArray(node) ? node : Object.values(node)) walk(v, depth + 1);
  };
  walk(step, 0);
  return [...out];
}
