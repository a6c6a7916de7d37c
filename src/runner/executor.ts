import { randomUUID } from 'node:crypto';
import type { Table } from 'apache-arrow';
import type { Logger } from 'pino';
import type { Plan } from '../spark/proto/gen/spark/connect/base_pb.js';
import { CancelledError, ConfigError } from '../core/errors.js';
import { errorClassOf } from '../spark/errors.js';
import { displayTable, quoteName, sameLocation, tableParts } from '../core/naming.js';
import { col, eq, lit } from '../spark/plan/expressions.js';
import { compileCommandPlan, compileRelationPlan } from '../spark/plan/compile.js';
import { Query } from '../spark/plan/query.js';
import { rows as arrowRows } from '../spark/arrow.js';
import { structFields } from '../spark/types.js';
import type { DataType } from '../spark/proto/gen/spark/connect/types_pb.js';
import { type Facts, type JobPlan, type OutputReport, type Row, type Step, sameColumnType } from '../jobs/template.js';

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
  skipped?: string;
  /** Steps not sent because their `when` did not hold (e.g. a write that would change nothing). */
  notNeeded: string[];
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
}

export async function executePlan(plan: JobPlan, opts: ExecuteOptions): Promise<ExecutionReport> {
  const report: ExecutionReport = { outputs: [], metrics: { rowsRead: 0, rowsWritten: 0 }, operationIds: [], notNeeded: [] };
  const facts: Record<string, readonly Row[]> = {};
  for (const step of plan.steps) {
    throwIfAborted(opts.signal);
    if (step.when && !step.when(facts)) {
      report.notNeeded.push(step.id);
      opts.logger.info({ step: step.id }, `${step.id} not needed: nothing for it to change`);
      continue;
    }
    await opts.beforeStep?.(step);
    throwIfAborted(opts.signal);
    const started = performance.now();
    opts.logger.info({ step: step.id }, step.title);
    const skipped = await runStep(step, opts, report, facts);
    opts.logger.info({ step: step.id, durationMs: Math.round(performance.now() - started) }, `${step.id} done`);
    if (skipped !== undefined) {
      report.skipped = skipped;
      opts.logger.info({ step: step.id, reason: skipped }, 'nothing to do: skipping the rest of the job');
      break;
    }
  }
  return report;
}

async function runStep(step: Step, opts: ExecuteOptions, report: ExecutionReport, facts: Record<string, readonly Row[]>): Promise<string | undefined> {
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
      const checkLocation = async () => {
        // The catalog finds tables by name; the name alone would let a job write to a table left
        // at an old lake home or at another tenant's path, and report the path it expected.
        const describe = Query.sql(`DESCRIBE TABLE EXTENDED ${quoteName(tableParts(step.table))}`).filter(eq(col('col_name'), lit('Location')));
        const result = await run(compileRelationPlan(describe.rel, { reveal: false }));
        const actual = (result.table ? arrowRows(result.table) : [])[0]?.data_type;
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
      try {
        await run(compileCommandPlan(step.create, { reveal: true }));
      } catch (e) {
        // Another run created it between our probe and our create: the state we wanted, if it is ours.
        if (!errorClassOf(e)?.startsWith('TABLE_OR_VIEW_ALREADY_EXISTS')) throw e;
        await checkLocation();
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
        changed: incoming.flatMap((f) => {
          const t = have.get(f.name.toLowerCase());
          return t && !sameColumnType(t.type, f.type) ? [{ name: f.name, tableType: t.type, sourceType: f.type }] : [];
        }),
      });
      if (decision.fail) throw decision.fail;
      for (const command of decision.commands ?? []) await run(compileCommandPlan(command, { reveal: true }));
      return undefined;
    }
    case 'probePaths': {
      const missing: string[] = [];
      for (const path of step.paths) if (!(await pathExists(opts.session, path))) missing.push(path);
      const effect = step.interpret(missing);
      if (effect.fail) throw effect.fail;
      return effect.skip;
    }
    case 'query': {
      const result = await run(compileRelationPlan(step.query.rel, { reveal: true }));
      const rows = result.table ? arrowRows(result.table) : [];
      facts[step.id] = rows;
      const effect = step.interpret(rows);
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
    case 'probePaths':
      return compileRelationPlan(listing(step.paths).rel, opts);
  }
}

/** The files under `paths` as a relation whose analysis lists them and reads none (binaryFile's schema is fixed). */
function listing(paths: readonly string[]): Query {
  return Query.read('binaryFile', { paths: [...paths] });
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
