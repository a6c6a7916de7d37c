import type { StreamRead } from '../core/status.js';
import type { StepOf, StreamProgress } from '../jobs/steps.js';
import { alias, col, eq, fn, lit, not } from '../spark/plan/expressions.js';
import { Query } from '../spark/plan/query.js';
import type { Rel } from '../spark/plan/relations.js';
import { inputs, rewriteRel } from '../spark/plan/rewrite.js';
import { pathExists } from './table-guards.js';
import type { DiffRun } from './steps/kind.js';

/**
 * What the next run of a Kafka stream would read, for `diff` (docs/diff.md): the stream resumes
 * after its checkpoint's last committed micro-batch, at the offsets that batch ended at (its
 * `offsets/<batch>` entry), or at its starting offsets when nothing was committed, and reads to the
 * topics' end (availableNow). The same read as a batch, with the stream's own transformation over
 * it, counts what it would write and computes its observed metrics; nothing is written, the
 * checkpoint is only read.
 */

/** Offsets per topic and partition, as Spark's Kafka source writes them in a checkpoint. */
export type KafkaOffsets = Record<string, Record<string, number>>;

type Prediction = { read: StreamRead; progress: StreamProgress[] } | { reason: string };

export async function predictStream(step: StepOf<'stream'>, run: DiffRun): Promise<Prediction> {
  const cmd = step.command;
  const checkpoint = cmd.options.checkpointLocation;
  if (checkpoint === undefined) return { reason: 'the stream names no checkpoint' };
  const sources = streamingSources(cmd.input);
  const source = sources[0];
  if (sources.length !== 1 || source?.kind !== 'source' || source.format !== 'kafka') return { reason: 'only a stream of one Kafka source is predicted' };

  const committed = await batchIds(run, `${checkpoint}/commits`);
  const last = committed.length ? Math.max(...committed) : undefined;
  const from = last === undefined ? undefined : await endOffsets(run, `${checkpoint}/offsets`, last);
  if (last !== undefined && from === undefined) return { reason: `the checkpoint's offset log holds no entry for its committed batch ${last}` };

  const { maxOffsetsPerTrigger, ...options } = source.options;
  const starting = typeof options.startingOffsets === 'string' ? options.startingOffsets : 'latest';
  // A first run that starts at the end reads nothing (and a batch read cannot start at `latest`).
  if (!from && starting === 'latest') return { read: { step: step.id, checkpoint, from: starting, to: {}, rows: 0, batches: 0 }, progress: [] };
  const batch = Query.read('kafka', {
    options: { ...options, ...(from ? { startingOffsets: JSON.stringify(from) } : {}), endingOffsets: 'latest' },
  }).rel;
  const batchInput = rewriteRel(cmd.input, (n) => (n === source ? batch : undefined));

  let perPartition: { topic: string; partition: number; last: number }[];
  try {
    const { rows } = await run.rows(Query.of(batch).aggregate([col('topic'), col('partition')], [alias(fn('max', col('offset')), 'last')]).rel);
    perPartition = rows.map((r) => ({ topic: String(r.topic), partition: Number(r.partition), last: Number(r.last) }));
  } catch (e) {
    // Spark's Kafka source wants every partition of the topics in specific starting offsets: one
    // added since the checkpoint cannot be named without reading the topics from their start.
    if (from && /specify all TopicPartitions/i.test(String((e as Error)?.message ?? e)))
      return { reason: 'a partition was added to the topics since the checkpoint' };
    throw e;
  }
  const { rows: counted } = await run.rows(Query.of(batchInput).aggregate([], [alias(fn('count', lit(1)), 'rows')]).rel);
  const rows = Number(counted[0]?.rows ?? 0);
  const observed = await observedMetrics(run, batchInput);

  const to: KafkaOffsets = structuredClone(from ?? {});
  for (const p of perPartition) (to[p.topic] ??= {})[String(p.partition)] = p.last + 1;
  // availableNow with a rate limit splits the range into batches of at most that many records.
  const limit = typeof maxOffsetsPerTrigger === 'string' ? Number(maxOffsetsPerTrigger) : undefined;
  const batches = rows === 0 ? 0 : limit && limit > 0 ? Math.ceil(rows / limit) : 1;
  const read: StreamRead = {
    step: step.id,
    checkpoint,
    ...(last !== undefined ? { committedBatch: last } : {}),
    from: from ?? starting,
    to,
    rows,
    batches,
  };
  // One progress entry per predicted batch; the observed metrics are the whole read's, on the first.
  const progress: StreamProgress[] = [];
  for (let i = 0, left = rows; i < batches; i++) {
    const n = i === batches - 1 ? left : Math.min(left, limit ?? left);
    left -= n;
    progress.push({
      batchId: (last ?? -1) + 1 + i,
      numInputRows: n,
      sources: [{ description: 'kafka', ...(i === 0 ? { startOffset: read.from } : {}), ...(i === batches - 1 ? { endOffset: to } : {}), numInputRows: n }],
      ...(i === 0 && Object.keys(observed).length ? { observedMetrics: observed } : {}),
    });
  }
  return { read, progress };
}

/** The streaming sources of a relation: the leaves a micro-batch reads. */
function streamingSources(rel: Rel): Rel[] {
  if (rel.kind === 'source') return rel.streaming ? [rel] : [];
  return inputs(rel).flatMap(streamingSources);
}

/** The batch ids of one of a checkpoint's logs (`commits/`, `offsets/`): its files' names. */
async function batchIds(run: DiffRun, dir: string): Promise<number[]> {
  if (!(await pathExists(run, dir))) return [];
  const { rows } = await run.rows(
    Query.read('binaryFile', { paths: [dir] })
      .select(alias(fn('regexp_extract', col('path'), lit('([0-9]+)$'), lit(1)), 'id'))
      .filter(not(eq(col('id'), lit('')))).rel,
    { reveal: false },
  );
  return rows.map((r) => Number(r.id)).filter(Number.isSafeInteger);
}

/** The offsets a committed batch ended at: the source line of its entry in the offset log. */
async function endOffsets(run: DiffRun, dir: string, batch: number): Promise<KafkaOffsets | undefined> {
  const { rows } = await run.rows(
    Query.read('text', { paths: [`${dir}/${batch}`] })
      .select(col('value'))
      .filter(fn('startswith', col('value'), lit('{'))).rel,
    { reveal: false },
  );
  for (const r of rows) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(String(r.value));
    } catch {
      continue;
    }
    if (isKafkaOffsets(parsed)) return parsed;
  }
  return undefined;
}

/** `{"topic": {"0": 42}}`, not the entry's metadata line (`batchWatermarkMs`, `conf`). */
function isKafkaOffsets(v: unknown): v is KafkaOffsets {
  if (!v || typeof v !== 'object' || Array.isArray(v) || 'batchWatermarkMs' in v) return false;
  const topics = Object.values(v as Record<string, unknown>);
  return (
    topics.length > 0 &&
    topics.every((p) => p !== null && typeof p === 'object' && !Array.isArray(p) && Object.values(p as object).every((o) => typeof o === 'number'))
  );
}

/** The stream's observed aggregates over the whole read, as a micro-batch's progress reports them. */
async function observedMetrics(run: DiffRun, rel: Rel): Promise<Record<string, Record<string, unknown>>> {
  const out: Record<string, Record<string, unknown>> = {};
  const walk = async (r: Rel): Promise<void> => {
    if (r.kind === 'observe') {
      const { rows } = await run.rows(Query.of(r.input).aggregate([], [...r.metrics]).rel);
      out[r.name] = { ...(rows[0] ?? {}) };
    }
    for (const x of inputs(r)) await walk(x);
  };
  await walk(rel);
  return out;
}
