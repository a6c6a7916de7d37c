import { asLakehouseError } from '../../src/core/errors.js';
import { loadJob, type LoadRequest } from '../../src/runner/load-job.js';
import { createLogger } from '../../src/core/logger.js';
import type { Step } from '../../src/jobs/template.js';
import { type ExecutionReport, emptyReport, executePlan } from '../../src/runner/executor.js';
import { commitMetadata, sessionSettings, tagFor } from '../../src/runner/run.js';
import { outputMetricsUndefined, releaseSession, runSession } from './stack.js';

/** What a run in this process ended with: its exit code (0 or the error's) and the steps it began. */
export interface Outcome {
  code: number;
  steps: string[];
  /** What the executor reported: outputs (with an incremental read's position), skip reason. */
  report: ExecutionReport;
  /** The error's code (e.g. SOURCE_POSITION_LOST) and message, when the run failed. */
  error?: { code?: string; message: string };
}

/**
 * One run, in this process, on its own Spark session, as `runJob` executes it (session settings,
 * operation tags, the session bound to its tenant), with the executor's `beforeStep` hook exposed so a test
 * can pause it between steps. Errors become their exit code, as the CLI would exit.
 */
export async function runInProcess(
  req: Omit<LoadRequest, 'runId'> & { runId?: string },
  beforeStep?: (s: Step) => Promise<void>,
  /** The run's log lines (info and up), when a test reads them; silent otherwise. */
  log?: (line: string) => void,
): Promise<Outcome> {
  const runId = req.runId ?? `it-${Math.random().toString(36).slice(2, 10)}`;
  const steps: string[] = [];
  const report = emptyReport();
  let loaded: Awaited<ReturnType<typeof loadJob>>;
  try {
    loaded = await loadJob({ ...req, runId });
  } catch (e) {
    // A config the loader refuses ends the run before Spark, as the CLI exits (78, 66, 64).
    return failed(e, steps, report);
  }
  const client = await runSession(loaded.platform, loaded.tenant);
  try {
    await client.config.set(sessionSettings(loaded, runId, req.logicalDate));
    await executePlan(loaded.plan, {
      session: client,
      logger: log ? createLogger('info', {}, log) : createLogger('silent'),
      tags: [tagFor(runId)],
      signal: new AbortController().signal,
      report,
      stamps: (extra) => commitMetadata(loaded, runId, req.logicalDate, extra),
      beforeStep: async (s) => {
        steps.push(s.id);
        await beforeStep?.(s);
      },
    });
    return { code: 0, steps, report: documented(report) };
  } catch (e) {
    return failed(e, steps, report);
  } finally {
    await releaseSession(client);
  }
}

function failed(e: unknown, steps: string[], report: ExecutionReport): Outcome {
  const error = asLakehouseError(e);
  return {
    code: error.exitCode,
    steps,
    report: documented(report),
    error: { ...('code' in error ? { code: String(error.code) } : {}), message: error.message },
  };
}

/** Every report a test gets is held to the documented metrics (src/core/metrics.ts). */
function documented(report: ExecutionReport): ExecutionReport {
  const undefinedMetrics = outputMetricsUndefined(report.outputs);
  if (undefinedMetrics.length) throw new Error(`a run reported metrics that docs/contracts.md does not define: ${undefinedMetrics.join(', ')}`);
  return report;
}

/**
 * A pause point for deterministic interleavings: `hold(stepId)` is a beforeStep hook that stops the
 * run before that step until `release()`; `reached` resolves when it got there.
 */
export function pausePoint(): { hold: (stepId: string) => (s: Step) => Promise<void>; reached: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let arrived!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  return {
    hold: (stepId) => async (s) => {
      if (s.id !== stepId) return;
      arrived();
      await gate;
    },
    reached,
    release,
  };
}

/**
 * A barrier for `n` runs at once: run i's hook `hold(i)` stops it before each of `stepIds` until
 * every run has got there or ended (`end(i)`), then releases them together, so their creates race
 * for certain instead of by luck. `reached(id)` counts the runs that got to a step.
 */
export function barrier(
  n: number,
  stepIds: readonly string[],
): { hold: (i: number) => (s: Step) => Promise<void>; end: (i: number) => void; reached: (id: string) => number } {
  const runs = Array.from({ length: n }, () => ({ reached: new Set<string>(), ended: false }));
  const waiting: { id: string; go: () => void }[] = [];
  const open = (id: string) => runs.every((r) => r.ended || r.reached.has(id));
  const check = () => {
    for (const w of [...waiting])
      if (open(w.id)) {
        waiting.splice(waiting.indexOf(w), 1);
        w.go();
      }
  };
  return {
    hold: (i) => async (s) => {
      if (!stepIds.includes(s.id)) return;
      runs[i]!.reached.add(s.id);
      await new Promise<void>((go) => {
        waiting.push({ id: s.id, go });
        check();
      });
    },
    end: (i) => {
      runs[i]!.ended = true;
      check();
    },
    reached: (id) => runs.filter((r) => r.reached.has(id)).length,
  };
}
