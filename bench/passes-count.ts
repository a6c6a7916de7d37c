/**
 * bench/passes (driver): how much Spark work each step of a template's run causes, counted by the
 * server itself. The server runs with its event log on (`spark.eventLog.*`, set by bench/passes);
 * every Spark Connect operation tags its jobs and SQL executions with
 * `SparkConnect_OperationTag_…_Operation_<id>`, and our runner logs (debug) which step sent which
 * operation id. Joined, per step:
 *   ops      Spark Connect operations (ExecutePlan) the step sent
 *   jobs     Spark jobs those operations ran (SparkListenerJobStart)
 *   stages   stages actually run (skipped stages, whose shuffle output was reused, not counted)
 *   tasks    tasks run
 *   scans    scan nodes in the final physical plans of their SQL executions (parquet/Delta `Scan …`,
 *            Iceberg `BatchScan …`): each is one pass over a table or a set of files
 *   rows     records read from storage (the tasks' input metrics)
 *   analyses AnalyzePlan calls of the tenant read policy (from our log: relations analysed)
 * and per run the jobs of no operation (those an AnalyzePlan call starts, e.g. Delta's log replay).
 * The Spark UI and its REST API are off on this server, and Spark Connect has no listener API for
 * clients: the event log is the server's own record of the same listener events the UI shows.
 *
 * bench/passes.ts runs the cases and calls `countRuns` with the event log and each run's log.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface StepCount {
  ops: number;
  jobs: number;
  stages: number;
  tasks: number;
  scans: number;
  rows: number;
  analyses: number;
  ms: number;
}
export const zero = (): StepCount => ({ ops: 0, jobs: 0, stages: 0, tasks: 0, scans: 0, rows: 0, analyses: 0, ms: 0 });

type Event = Record<string, unknown> & { Event: string };

/** The newest application's event log under `dir` (plain, or zstd-compressed as Spark writes it by default). */
function readEventLog(dir: string): Event[] {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (!f.startsWith('.') && !f.startsWith('appstatus')) files.push(p);
    }
  };
  walk(dir);
  const newest = files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  if (!newest) throw new Error(`no event log under ${dir}`);
  const text = /\.zstd?$/.test(newest)
    ? execFileSync('zstd', ['-dc', newest], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString()
    : readFileSync(newest, 'utf8');
  const out: Event[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as Event);
    } catch {
      // The last line of a log still being written may be cut short.
    }
  }
  return out;
}

const OP_TAG = /_Operation_([0-9a-f-]{36})/;
const opOf = (tags: unknown): string | undefined => {
  const text = Array.isArray(tags) ? tags.join(',') : typeof tags === 'string' ? tags : '';
  return OP_TAG.exec(text)?.[1];
};

interface PlanInfo {
  nodeName: string;
  children: PlanInfo[];
}
/** Scan nodes of a physical plan: each one a pass over a table or files. */
function scans(p: PlanInfo | undefined): number {
  if (!p) return 0;
  const self = /^(Scan |BatchScan|FileScan)/.test(p.nodeName) && !/^Scan (ExistingRDD|OneRowRelation)/.test(p.nodeName) ? 1 : 0;
  return self + (p.children ?? []).reduce((n, c) => n + scans(c), 0);
}

/** Per operation id: jobs, stages, tasks, scans, rows. */
function countByOperation(events: Event[], untagged: number[]): Map<string, Omit<StepCount, 'ops' | 'analyses' | 'ms'>> {
  const byOp = new Map<string, Omit<StepCount, 'ops' | 'analyses' | 'ms'>>();
  const get = (op: string) => byOp.get(op) ?? byOp.set(op, { jobs: 0, stages: 0, tasks: 0, scans: 0, rows: 0 }).get(op)!;
  const stageOp = new Map<number, string>();
  const execOp = new Map<number, string>();
  const execPlan = new Map<number, PlanInfo>();
  for (const e of events) {
    switch (e.Event) {
      case 'SparkListenerJobStart': {
        const op = opOf((e.Properties as Record<string, unknown> | undefined)?.['spark.job.tags']);
        if (!op) {
          untagged.push(e['Submission Time'] as number);
          break;
        }
        get(op).jobs++;
        for (const s of (e['Stage IDs'] as number[] | undefined) ?? []) stageOp.set(s, op);
        break;
      }
      case 'SparkListenerStageSubmitted': {
        const op = stageOp.get((e['Stage Info'] as { 'Stage ID': number })['Stage ID']);
        if (op) get(op).stages++;
        break;
      }
      case 'SparkListenerTaskEnd': {
        const op = stageOp.get(e['Stage ID'] as number);
        if (!op) break;
        const c = get(op);
        c.tasks++;
        const input = (e['Task Metrics'] as { 'Input Metrics'?: { 'Records Read'?: number } } | undefined)?.['Input Metrics'];
        c.rows += input?.['Records Read'] ?? 0;
        break;
      }
      case 'org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart': {
        const op = opOf(e.jobTags);
        if (!op) break;
        execOp.set(e.executionId as number, op);
        execPlan.set(e.executionId as number, e.sparkPlanInfo as PlanInfo);
        break;
      }
      case 'org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate':
        // Adaptive execution replans as stages finish: the last plan is the one that ran.
        if (execOp.has(e.executionId as number)) execPlan.set(e.executionId as number, e.sparkPlanInfo as PlanInfo);
        break;
    }
  }
  for (const [id, op] of execOp) get(op).scans += scans(execPlan.get(id));
  return byOp;
}

/** Our runner's JSON log lines: which step sent which operation, the policy's analyses, step durations. */
function stepsOfRun(logFile: string): {
  order: string[];
  opStep: Map<string, string>;
  analyses: Map<string, number>;
  ms: Map<string, number>;
  span: [number, number];
} {
  const order: string[] = [];
  const opStep = new Map<string, string>();
  const analyses = new Map<string, number>();
  const ms = new Map<string, number>();
  const span: [number, number] = [Infinity, -Infinity];
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    let r: { time?: string; step?: string; operationId?: string; msg?: string; durationMs?: number; policy?: { relations?: number } };
    try {
      r = JSON.parse(line) as typeof r;
    } catch {
      continue;
    }
    const t = r.time ? Date.parse(r.time) : NaN;
    if (!Number.isNaN(t)) [span[0], span[1]] = [Math.min(span[0], t), Math.max(span[1], t)];
    if (!r.step) continue;
    if (!order.includes(r.step)) order.push(r.step);
    if (r.operationId && r.msg === 'operation sent') opStep.set(r.operationId, r.step);
    if (r.policy?.relations !== undefined) analyses.set(r.step, (analyses.get(r.step) ?? 0) + r.policy.relations);
    if (r.msg === `${r.step} done` && r.durationMs !== undefined) ms.set(r.step, r.durationMs);
  }
  return { order, opStep, analyses, ms, span };
}

export interface RunCount {
  run: string;
  total: StepCount;
  analysisJobs: number;
  steps: Record<string, StepCount>;
}

/** The counts of each run (name, log file of our runner), from the server's event log under `eventLogDir`. */
export function countRuns(eventLogDir: string, runs: readonly (readonly [string, string])[]): RunCount[] {
  const untagged: number[] = [];
  const byOp = countByOperation(readEventLog(eventLogDir), untagged);
  return runs.map(([name, log]) => {
    const { order, opStep, analyses, ms, span } = stepsOfRun(log);
    const steps = new Map(order.map((s) => [s, zero()]));
    for (const [op, step] of opStep) {
      const c = steps.get(step)!;
      c.ops++;
      const server = byOp.get(op);
      if (server) for (const k of ['jobs', 'stages', 'tasks', 'scans', 'rows'] as const) c[k] += server[k];
    }
    for (const [step, n] of analyses) steps.get(step)!.analyses = n;
    for (const [step, t] of ms) steps.get(step)!.ms = t;
    const total = zero();
    for (const c of steps.values()) for (const k of Object.keys(total) as (keyof StepCount)[]) total[k] += c[k];
    // Jobs of no operation while the run ran (runs are sequential, on a server of their own): what
    // an AnalyzePlan call started, e.g. Delta replaying its log to analyse a plan for the policy.
    const analysisJobs = untagged.filter((t) => t >= span[0] && t <= span[1]).length;
    return { run: name, total, analysisJobs, steps: Object.fromEntries(steps) };
  });
}

export const COLUMNS = ['ops', 'jobs', 'stages', 'tasks', 'scans', 'rows', 'analyses', 'ms'] as const;

/** Per run: a table of its steps and its total (Markdown). */
export function stepTables(result: readonly RunCount[]): string {
  const row = (name: string, c: StepCount) => `| ${name} | ${COLUMNS.map((k) => c[k]).join(' | ')} |`;
  let out = '';
  for (const r of result) {
    out += `\n### ${r.run}\n\n| step | ${COLUMNS.join(' | ')} |\n|---|${COLUMNS.map(() => '---:').join('|')}|\n`;
    for (const [step, c] of Object.entries(r.steps)) out += `${row(step, c)}\n`;
    out += `${row('**total**', r.total)}\n\nJobs of no operation during the run (started by AnalyzePlan): ${r.analysisJobs}\n`;
  }
  return out;
}
