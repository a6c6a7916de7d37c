import { InternalError } from '../../core/errors.js';
import type { StepOf, StreamProgress } from '../../jobs/steps.js';
import { formatCmd } from '../../spark/plan/format.js';
import { cmdTouches } from '../../spark/plan/touches.js';
import { predictStream } from '../stream-preview.js';
import type { StepKindModule, StepRun } from './kind.js';

/** How often a failed streaming query is started: once more, from its checkpoint. */
const STREAM_ATTEMPTS = 2;

/** How long one wait for a streaming query's end may take: well inside a call's answer deadline. */
const STREAM_WAIT_MS = 30_000;

/**
 * Run a streaming query (availableNow) until it ends by itself, then interpret its micro-batches'
 * progress. A query that failed on the server (not the connection, not a cancel) is started once
 * more from its checkpoint, which lands nothing twice: it clears a failure of the first batch after
 * a restart that Spark 4.1's Kafka source hits once that batch is committed (SPARK-55271: its
 * progress metrics read offsets only a fresh batch sets). A real fault fails again.
 */
export const stream: StepKindModule<StepOf<'stream'>> = {
  async run(step, run) {
    const progress: StreamProgress[] = [];
    // The executor built the command from a registry's answer already (executor.ts).
    if (step.registry) throw new InternalError(`step ${step.id}: its schema registry was not asked before it ran`);
    const command = step.command;
    for (let attempt = 1; ; attempt++) {
      const started = await run.send({ command });
      const query = started.streamingQuery;
      if (!query) throw new InternalError(`step ${step.id}: the server answered the stream's start without a query id`);
      run.logger.info({ step: step.id, streamingQuery: query, attempt }, 'streaming query started');
      try {
        progress.push(...(await awaitStreamingQuery(query, run)));
        break;
      } catch (e) {
        if (attempt >= STREAM_ATTEMPTS || run.signal.aborted || run.errorClass(e) !== 'STREAM_FAILED') throw e;
        // A bad value fails the same batch again: no second start. (The code, not instanceof
        // SparkError: plan and validate load this module, and must not load gRPC.)
        if ((e as { code?: unknown } | null)?.code === 'SOURCE_BAD_VALUE') throw e;
        run.logger.warn({ step: step.id, streamingQuery: query, err: e }, 'streaming query failed; restarting it once from its checkpoint');
      }
    }
    return run.effect(step.interpret(progress));
  },
  async diff(step, run) {
    // Its sink is recorded as a write, so later reads of it are stale; what it would read is its
    // checkpoint's offsets to the sources' end, read as a batch (src/runner/stream-preview.ts).
    run.wouldWrite(step, step.command);
    const predicted = await predictStream(step, run);
    if ('reason' in predicted) {
      run.notPredicted(step, predicted.reason);
      return undefined;
    }
    run.wouldRead(predicted.read);
    return run.effect(step.interpret(predicted.progress));
  },
  plan: (step) => ({ command: step.command }),
  view: (step) => formatCmd(step.command),
  touches: (step) => cmdTouches(step.command),
  explainable: (step) => step.command.input,
};

/**
 * Wait until a streaming query ends (availableNow ends it once it caught up), then read its
 * micro-batches' progress. A failed query makes the wait throw the query's error. When the run is
 * cancelled or the wait fails otherwise, the query is stopped: it must not go on writing after the
 * run that owns it ended (its checkpoint lets the next run resume where it stopped).
 */
async function awaitStreamingQuery(query: { id: string; runId: string }, run: StepRun): Promise<StreamProgress[]> {
  try {
    for (;;) {
      const answer = await run.streaming(query, { await: { timeoutMs: STREAM_WAIT_MS } });
      if (answer.terminated) break;
      run.logger.debug({ streamingQuery: query.id }, 'streaming query still running');
    }
  } catch (e) {
    try {
      // Bounded: a cancelled run must still end within its grace period, answered or not.
      const stop = run.streaming(query, 'stop');
      await Promise.race([stop, new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5_000).unref())]);
      run.logger.info({ streamingQuery: query }, 'streaming query stopped');
    } catch (stopError) {
      run.logger.warn({ streamingQuery: query, err: stopError }, 'could not stop the streaming query');
    }
    throw e;
  }
  const answer = await run.streaming(query, 'recentProgress');
  const docs = answer.recentProgress ?? [];
  run.logger.info({ streamingQuery: query.id, batches: docs.length, answer: answer.recentProgress ? 'recentProgress' : 'none' }, 'streaming query ended');
  return docs.map(parseProgress).filter((p) => p.numInputRows > 0 || p.sources.length > 0);
}

function parseProgress(doc: string): StreamProgress {
  const p = JSON.parse(doc) as {
    batchId?: number;
    numInputRows?: number;
    sources?: { description?: string; startOffset?: unknown; endOffset?: unknown; numInputRows?: number }[];
    observedMetrics?: Record<string, unknown>;
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
    ...(p.observedMetrics && typeof p.observedMetrics === 'object' ? { observedMetrics: observedRows(p.observedMetrics) } : {}),
  };
}

/**
 * Observed metrics by name, each as `{ column: value }`. Spark writes a row either so, or (Spark
 * Connect's progress) as `{ values: [...], schema: { fields: [{ name }, ...] } }`.
 */
function observedRows(metrics: Record<string, unknown>): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, row] of Object.entries(metrics)) {
    const r = row as { values?: unknown[]; schema?: { fields?: { name?: string }[] } } | null;
    if (r && Array.isArray(r.values) && Array.isArray(r.schema?.fields))
      out[name] = Object.fromEntries(r.schema.fields.map((f, i) => [String(f.name), r.values![i]]));
    else if (r && typeof r === 'object') out[name] = r as Record<string, unknown>;
  }
  return out;
}
