import { randomUUID } from 'node:crypto';
import type { Table } from 'apache-arrow';
import type { Logger } from 'pino';
import type { Plan } from '../spark/proto/gen/spark/connect/base_pb.js';
import { CancelledError } from '../core/errors.js';
import { errorClassOf } from '../spark/errors.js';
import { displayTable, tableParts } from '../core/naming.js';
import { compileCommandPlan, compileRelationPlan } from '../spark/plan/compile.js';
import { Query } from '../spark/plan/query.js';
import { rows as arrowRows } from '../spark/arrow.js';
import { structFields } from '../spark/types.js';
import type { DataType } from '../spark/proto/gen/spark/connect/types_pb.js';
import type { JobPlan, OutputReport, Step } from '../jobs/template.js';

/**
 * Runs a template's steps, in order, on a Spark Connect session. The only code that sends plans:
 * templates stay pure, and this is where outputs, metrics and operation ids are gathered.
 */

/** What the executor needs from a Spark Connect client. */
export interface SparkSession {
  execute(plan: Plan, opts?: { tags?: string[]; signal?: AbortSignal; operationId?: string }): Promise<{ operationId: string; table?: Table }>;
  readonly analyze: { schema(plan: Plan): Promise<unknown> };
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
}

export function emptyReport(): ExecutionReport {
  return { outputs: [], metrics: { rowsRead: 0, rowsWritten: 0 }, operationIds: [], completedSteps: [] };
}

export interface ExecuteOptions {
  session: SparkSession;
  logger: Logger;
  /** Operation tags: one `Interrupt` by tag cancels everything this run submitted. */
  tags: string[];
  signal: AbortSignal;
  /** Called with each operation id as soon as it is known. */
  onOperation?: (id: string) => void;
  /**
   * The report to fill in, step by step. The caller keeps it, so when a step fails (or the run is
   * cancelled) it still knows which steps completed and what they reported.
   */
  report?: ExecutionReport;
}

export async function executePlan(plan: JobPlan, opts: ExecuteOptions): Promise<ExecutionReport> {
  const report = opts.report ?? emptyReport();
  for (const step of plan.steps) {
    throwIfAborted(opts.signal);
    const started = performance.now();
    opts.logger.info({ step: step.id }, step.title);
    let skipped: string | undefined;
    try {
      skipped = await runStep(step, opts, report);
    } catch (e) {
      report.failedStep = step.id;
      throw e;
    }
    report.completedSteps.push(step.id);
    opts.logger.info({ step: step.id, durationMs: Math.round(performance.now() - started) }, `${step.id} done`);
    if (skipped !== undefined) {
      report.skipped = skipped;
      opts.logger.info({ step: step.id, reason: skipped }, 'nothing to do: skipping the rest of the job');
      break;
    }
  }
  return report;
}

async function runStep(step: Step, opts: ExecuteOptions, report: ExecutionReport): Promise<string | undefined> {
  const run = async (plan: Plan) => {
    // Our own operation id, recorded before sending: a run cancelled mid-step still names it.
    const operationId = randomUUID();
    report.operationIds.push(operationId);
    opts.onOperation?.(operationId);
    return opts.session.execute(plan, { operationId, tags: opts.tags, signal: opts.signal });
  };
  switch (step.kind) {
    case 'command':
      await run(compileCommandPlan(step.command, { reveal: true }));
      return undefined;
    case 'ensureTable': {
      if (await tableExists(opts.session, tableParts(step.table))) {
        opts.logger.debug({ table: displayTable(step.table) }, 'table exists');
        return undefined;
      }
      try {
        await run(compileCommandPlan(step.create, { reveal: true }));
      } catch (e) {
        // Another run created it between our probe and our create: that is the state we wanted.
        if (errorClassOf(e)?.startsWith('TABLE_OR_VIEW_ALREADY_EXISTS')) return undefined;
        throw e;
      }
      return undefined;
    }
    case 'compareSchemas': {
      const [source, table] = await Promise.all([
        opts.session.analyze.schema(compileRelationPlan(step.source.rel, { reveal: true })),
        opts.session.analyze.schema(compileRelationPlan(Query.table(tableParts(step.table)).rel, { reveal: false })),
      ]);
      const have = new Map(structFields(table as DataType).map((f) => [f.name.toLowerCase(), f]));
      const incoming = structFields(source as DataType);
      const names = new Set(incoming.map((f) => f.name.toLowerCase()));
      const decision = step.interpret({
        added: incoming.filter((f) => !have.has(f.name.toLowerCase())),
        missing: [...have.values()].filter((f) => !names.has(f.name.toLowerCase())).map((f) => f.name),
      });
      if (decision.fail) throw decision.fail;
      for (const command of decision.commands ?? []) await run(compileCommandPlan(command, { reveal: true }));
      return undefined;
    }
    case 'query': {
      const result = await run(compileRelationPlan(step.query.rel, { reveal: true }));
      const effect = step.interpret(result.table ? arrowRows(result.table) : []);
      if (effect.fail) throw effect.fail;
      if (effect.metrics?.rowsRead) report.metrics.rowsRead += effect.metrics.rowsRead;
      if (effect.metrics?.rowsWritten) report.metrics.rowsWritten += effect.metrics.rowsWritten;
      if (effect.output) mergeOutput(report.outputs, effect.output);
      return effect.skip;
    }
  }
}

/** The main plan of a step, as `plan` prints it (secrets redacted unless `reveal`). */
export function stepPlan(step: Step, opts: { reveal: boolean }): Plan {
  switch (step.kind) {
    case 'query':
      return compileRelationPlan(step.query.rel, opts);
    case 'compareSchemas':
      return compileRelationPlan(step.source.rel, opts);
    case 'command':
      return compileCommandPlan(step.command, opts);
    case 'ensureTable':
      return compileCommandPlan(step.create, opts);
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
