import { randomUUID } from 'node:crypto';
import type { Table } from 'apache-arrow';
import type { Logger } from '../core/logger.js';
import { CancelledError, InternalError, LakehouseError } from '../core/errors.js';
import { errorClassOf, SparkError } from '../spark/errors.js';
import {
  type CompiledPlan as Plan,
  compileCheckpointCommand,
  compileCommandPlan,
  compileRelationPlan,
  compileRemoveCachedRelation,
  compileStreamingQueryCommand,
} from '../spark/plan/compile.js';
import { rows as arrowRows } from '../spark/arrow.js';
import { type Field, type SparkType, structFields } from '../spark/types.js';
import type { SparkProgress, StreamingQueryResult } from '../spark/execution.js';
import { tenantPolicyError } from '../spark/policy/index.js';
import type { Rel } from '../spark/plan/relations.js';
import type { JobPlan, OutputReport } from '../jobs/template.js';
import { type Step, type StepEffect, StepFacts } from '../jobs/steps.js';
import { findBadSourceFile } from './forensics.js';
import { subjectSchemas } from './schema-registry.js';
import { type PlanNode, type Sent, type StepRun, kindOf, stepPlanNode } from './steps/index.js';
import { tenantLogicOf } from './tenant-logic.js';
import { type DiffState, diffRun } from './diff.js';

/**
 * Runs a template's steps, in order, on a Spark Connect session: the interpreter loop. What each
 * kind of step does is its module's (src/runner/steps/); this is the one place that compiles and
 * sends their plans, and where outputs, metrics and operation ids are gathered.
 */

/** What the executor needs from a Spark Connect client. */
export interface SparkSession {
  execute(
    plan: Plan,
    opts?: { tags?: string[]; signal?: AbortSignal; operationId?: string; onProgress?: (progress: SparkProgress) => void },
  ): Promise<{
    operationId: string;
    table?: Table;
    /** The result's Spark schema, when the server sent one. */
    schema?: unknown;
    streamingQuery?: { id: string; runId: string };
    streamingQueryResult?: StreamingQueryResult;
    checkpointRelationId?: string;
  }>;
  readonly analyze: { schema(plan: Plan): Promise<unknown>; inputFiles(plan: Plan): Promise<string[]> };
  /** Session settings: a re-read of a bad source file for a better error message. */
  readonly config: { set(pairs: Readonly<Record<string, string>>): Promise<unknown>; unset?(keys: readonly string[]): Promise<void> };
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
  /**
   * The session settings that stamp a commit with the run's stamps plus `extra` (src/runner/run.ts
   * commitMetadata): set around a step that declares a `stamp`, then set back to the run's own.
   */
  stamps?: (extra: Readonly<Record<string, string>>) => Record<string, string>;
  /** `diff`: every step's diff operation instead of its run, sharing this state; nothing is written (src/runner/diff.ts). */
  diff?: DiffState;
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

/** What one run keeps across its steps. */
interface RunState {
  readonly report: ExecutionReport;
  readonly facts: StepFacts;
  /** The rows the run's materialize steps keep on the server, by name: dropped when the run ends. */
  readonly materialized: Map<string, string>;
}

export async function executePlan(plan: JobPlan, opts: ExecuteOptions): Promise<ExecutionReport> {
  const state: RunState = { report: opts.report ?? emptyReport(), facts: new StepFacts(), materialized: new Map() };
  const { report } = state;
  try {
    const steps = await withRegistrySchemas(plan.steps, opts);
    for (const [index, step] of steps.entries()) {
      const at = { step, index, total: steps.length };
      throwIfAborted(opts.signal);
      if (opts.diff && step.when && opts.diff.whenUnknown(step, state.facts)) continue;
      if (step.when && !step.when(state.facts)) {
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
        // Its config logic wrapped as tenant logic: the server judges it when the plan arrives (src/spark/policy).
        const sent = tenantLogicOf(step);
        const run = stepRun(sent, opts, state, bound(plan, state));
        // A diff commits nothing, so it sets no stamps either; nor does a step with nothing to stamp yet.
        const stamp = step.stamp?.(state.facts);
        skipped = opts.diff
          ? await kindOf(sent).diff(
              sent,
              diffRun(sent, run, opts.diff, state.facts, () => report.outputs),
            )
          : stamp && Object.keys(stamp).length
            ? await stamped(stamp, opts, () => kindOf(sent).run(sent, run))
            : await kindOf(sent).run(sent, run);
      } catch (e) {
        report.failedStep = step.id;
        opts.onStep?.({ kind: 'failed', ...at, ms: performance.now() - started });
        const explained = e instanceof LakehouseError ? step.explainFailure?.(e) : undefined;
        throw explained ?? tenantPolicyError(e, step.mapPosition ? { position: step.mapPosition } : {}) ?? (await findBadSourceFile(step, e, opts));
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
    await dropMaterialized(state.materialized, opts);
  }
  return report;
}

/**
 * Streams that decode with a schema registry's writer schemas get them before the first step: a
 * subject the registry lacks (66), a registry that does not answer (69) or a reader schema that
 * cannot fill the declared columns (78) ends the run before any table is created.
 */
async function withRegistrySchemas(steps: readonly Step[], opts: ExecuteOptions): Promise<readonly Step[]> {
  const out: Step[] = [];
  for (const step of steps) {
    const r = step.kind === 'stream' ? step.registry : undefined;
    if (step.kind !== 'stream' || !r) {
      out.push(step);
      continue;
    }
    const found = await subjectSchemas(r.ref, r.subjects, r.configPath, opts.signal ? { signal: opts.signal } : {});
    opts.logger.info(
      { step: step.id, registry: r.ref.name, subjects: r.subjects, schemaIds: found.map((f) => f.id) },
      'writer schemas fetched from the schema registry',
    );
    const { registry: _fetched, ...rest } = step;
    out.push({ ...rest, command: r.build(found) });
  }
  return out;
}

/** The plan's bound option values for the next step, from the facts so far (undefined ones left out). */
function bound(plan: JobPlan, state: RunState): ReadonlyMap<string, string> {
  const values = plan.bind?.(state.facts) ?? {};
  return new Map(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined));
}

/** Run a step with its commit stamps set, then set the run's own stamps back (also when it fails). */
async function stamped<T>(extra: Readonly<Record<string, string>>, opts: ExecuteOptions, run: () => Promise<T>): Promise<T> {
  if (!opts.stamps) throw new InternalError('a step stamps its commit, but the run has no commit stamps to extend');
  const [own, withExtra] = [opts.stamps({}), opts.stamps(extra)];
  await opts.session.config.set(withExtra);
  try {
    return await run();
  } finally {
    await opts.session.config.set(own);
    const added = Object.keys(withExtra).filter((k) => !(k in own));
    if (added.length) await opts.session.config.unset?.(added);
  }
}

/** The session as one step's run sees it: every plan it sends compiled here, every operation recorded. */
function stepRun(step: Step, opts: ExecuteOptions, state: RunState, boundValues: ReadonlyMap<string, string>): StepRun {
  const { session } = opts;
  const { report } = state;
  // What a step sends: secrets revealed, materialized rows named by the server's ids, bound options' values.
  const live = { reveal: true, materialized: state.materialized, bound: boundValues };
  const execute = (plan: Plan) => {
    // Our own operation id, recorded before sending: a run cancelled mid-step still names it.
    const operationId = randomUUID();
    report.operationIds.push(operationId);
    opts.onOperation?.(operationId);
    // Which step sent which operation: bench/passes attributes the server's jobs and scans by it.
    opts.logger.debug({ step: step.id, operationId }, 'operation sent');
    const onProgress = opts.onProgress;
    return session.execute(plan, {
      operationId,
      tags: opts.tags,
      signal: opts.signal,
      ...(onProgress ? { onProgress: (p: SparkProgress) => onProgress(step, p) } : {}),
    });
  };
  const sent = (answer: Awaited<ReturnType<SparkSession['execute']>>): Sent => {
    const r = answer.streamingQueryResult?.resultType;
    return {
      operationId: answer.operationId,
      ...(answer.streamingQuery ? { streamingQuery: answer.streamingQuery } : {}),
      ...(answer.checkpointRelationId ? { checkpointRelationId: answer.checkpointRelationId } : {}),
      ...(r?.case === 'awaitTermination' ? { terminated: r.value.terminated } : {}),
      ...(r?.case === 'recentProgress' ? { recentProgress: r.value.recentProgressJson } : {}),
    };
  };
  const compile = (rel: Rel, reveal = true) =>
    compileRelationPlan(rel, reveal ? live : { reveal: false, bound: boundValues, materialized: state.materialized });
  return {
    logger: opts.logger,
    signal: opts.signal,
    catalogs: opts.catalogs ?? [],
    send: async (node) => sent(await execute(compileNode(node, live))),
    rows: async (rel, o) => {
      const { table, schema } = await execute(compile(rel, o?.reveal ?? true));
      // The Arrow schema names the columns; without a batch, the Spark schema the server sent.
      const columns = table ? table.schema.fields.map((f) => f.name) : schema ? fields(schema).map((f) => f.name) : undefined;
      return { columns, rows: table ? arrowRows(table) : [] };
    },
    schema: async (rel, o) => fields(await session.analyze.schema(compile(rel, o?.reveal ?? true))),
    inputFiles: (rel) => session.analyze.inputFiles(compile(rel, false)),
    streaming: async (query, action) =>
      action === 'stop'
        ? // Sent also after a cancel (no signal, no operation of the step): the query must not outlive its run.
          sent(await session.execute(compileStreamingQueryCommand(query, 'stop'), { tags: opts.tags }))
        : sent(await execute(compileStreamingQueryCommand(query, action))),
    facts: state.facts,
    record: (s, columns, rows) => state.facts.record(s, columns, rows),
    effect: (effect) => applyEffect(effect, report),
    keep: (name, relationId) => void state.materialized.set(name, relationId),
    errorClass: errorClassOf,
    at: (e, path) => (e instanceof SparkError ? e.at(path) : e),
  };
}

/** The fields of a schema the server sent (a struct type); none for anything else. */
function fields(schema: unknown): Field[] {
  const t = schema as Partial<SparkType> | undefined;
  return t?.kind?.case === 'struct' ? structFields(t as SparkType) : [];
}

function compileNode(node: PlanNode, opts: { reveal: boolean; materialized?: ReadonlyMap<string, string>; bound?: ReadonlyMap<string, string> }): Plan {
  if ('relation' in node) return compileRelationPlan(node.relation, opts);
  if ('checkpoint' in node) return compileCheckpointCommand(node.checkpoint, opts);
  return compileCommandPlan(node.command, opts);
}

/** The main plan of a step, as `plan` prints it (secrets redacted unless `reveal`). */
export function stepPlan(step: Step, opts: { reveal: boolean; bound?: ReadonlyMap<string, string> }): Plan {
  return compileNode(stepPlanNode(step), opts);
}

function applyEffect(effect: StepEffect, report: ExecutionReport): string | undefined {
  // A failing check may still report what it measured (gold-publish's expectations): the status shows it.
  if (effect.output) mergeOutput(report.outputs, effect.output);
  if (effect.fail) throw effect.fail;
  if (effect.metrics?.rowsRead) report.metrics.rowsRead += effect.metrics.rowsRead;
  if (effect.metrics?.rowsWritten) report.metrics.rowsWritten += effect.metrics.rowsWritten;
  return effect.skip;
}

function mergeOutput(outputs: OutputReport[], next: OutputReport): void {
  const existing = outputs.find((o) => o.table === next.table);
  if (!existing) {
    outputs.push({ ...next });
    return;
  }
  Object.assign(existing, { ...next, metrics: { ...existing.metrics, ...next.metrics } });
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

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason instanceof CancelledError ? signal.reason : new CancelledError('SIGTERM');
}
