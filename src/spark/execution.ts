/**
 * One reattachable operation: ExecutePlan with reattachable=true and a client-chosen operation id,
 * then ReattachExecute(last response id) whenever the stream ends before ResultComplete (servers
 * end streams every few minutes) or breaks with a retryable error, until ResultComplete; finally
 * ReleaseExecute(release_all). Every step runs inside the client's single retry wrapper.
 *
 * ExecutePlan itself is not idempotent, so it is re-sent only while no response has arrived, with
 * the same operation id: if the first attempt did reach the server after all, the server answers
 * INVALID_HANDLE.OPERATION_ALREADY_EXISTS and we reattach instead.
 */
import type { Logger } from '../core/logger.js';
import type { RecordBatch, Schema } from 'apache-arrow';
import { InternalError, LakehouseError } from '../core/errors.js';
import type { RowOptions } from './arrow.js';
import { formatUnscaled, isoMicros } from './values.js';

/** apache-arrow is loaded with the first Arrow batch: commands and `ping` never pay for it. */
let arrowModule: Promise<typeof import('./arrow.js')> | undefined;
export const loadArrow = (): Promise<typeof import('./arrow.js')> => (arrowModule ??= import('./arrow.js'));
import { OperationCancelledError, errorClassOf } from './errors.js';
import { systemClock } from './retry.js';
import type { ExecutePlanResponse, ExecutePlanResponse_ExecutionProgress, ExecutePlanResponse_Metrics } from './proto/gen/spark/connect/base_pb.js';
import type { Expression_Literal } from './proto/gen/spark/connect/expressions_pb.js';
import type { Relation } from './proto/gen/spark/connect/relations_pb.js';
import type { StreamingQueryCommandResult } from './proto/gen/spark/connect/commands_pb.js';
import type { DataType } from './proto/gen/spark/connect/types_pb.js';
import { releaseMessageBuffer, type ServerStream } from './transport.js';

/** What an Execution needs from the client. */
export interface ExecutionHost {
  readonly logger: Logger;
  /** The client's one retry wrapper (errors come out as LakehouseErrors). */
  rpc<T>(name: string, attempt: () => Promise<T>, options?: { signal?: AbortSignal }): Promise<T>;
  openExecute(operationId: string, tags: readonly string[]): ServerStream<ExecutePlanResponse>;
  openReattach(operationId: string, lastResponseId: string | undefined): ServerStream<ExecutePlanResponse>;
  /** Check a response's server-side session id; throws when the server lost our session. */
  observe(response: ExecutePlanResponse): void;
  /** Fire and forget: free buffered responses (up to `until`, or all and end the operation). */
  releaseExecute(operationId: string, until?: string): void;
  /** One quick Interrupt for a cancelled operation; failures are logged, not thrown. */
  interruptForCancel(operationId: string): Promise<void>;
  onReattach?(): void;
}

export interface ExecuteOptions {
  /** A UUID; generated when absent. */
  operationId?: string;
  /** Interrupt addresses operations by tag (e.g. the run id). */
  tags?: string[];
  /** Abort: Interrupt the operation and reject with the abort reason (a LakehouseError) or OperationCancelledError. */
  signal?: AbortSignal;
  onProgress?: (progress: SparkProgress) => void;
}

/**
 * Spark's progress of one operation, as the server streams it (ExecutePlanResponse's
 * ExecutionProgress, Spark Connect 4.x): the operation's stages so far, and its tasks running now.
 */
export interface SparkProgress {
  readonly stages: readonly { readonly id: number; readonly tasks: number; readonly tasksDone: number; readonly bytesRead: number; readonly done: boolean }[];
  readonly inflightTasks: number;
}

export function sparkProgress(p: ExecutePlanResponse_ExecutionProgress): SparkProgress {
  return {
    stages: p.stages.map((s) => ({
      id: Number(s.stageId),
      tasks: Number(s.numTasks),
      tasksDone: Number(s.numCompletedTasks),
      bytesRead: Number(s.inputBytesRead),
      done: s.done,
    })),
    inflightTasks: Number(p.numInflightTasks),
  };
}

/** One ExecutePlan or ReattachExecute call in progress. */
interface OpenStream {
  call: ServerStream<ExecutePlanResponse>;
  it: AsyncIterator<ExecutePlanResponse>;
  received: number;
  kind: 'execute' | 'reattach';
  openedAt: number;
}

/** An empty stream that ended faster than this is followed by a pause of this length. */
const EMPTY_STREAM_PACE_MS = 1000;

/** Release buffered responses on the server after this many consumed responses. */
const RELEASE_EVERY = 8;

export class Execution implements AsyncIterable<ExecutePlanResponse> {
  /** ReattachExecute calls made so far. */
  reattaches = 0;
  #started = false;
  #complete = false;
  #lastResponseId: string | undefined;
  #received = 0;
  #sinceRelease = 0;
  #stream: OpenStream | undefined;

  constructor(
    private readonly host: ExecutionHost,
    readonly operationId: string,
    private readonly tags: readonly string[],
    private readonly signal?: AbortSignal,
  ) {}

  get complete(): boolean {
    return this.#complete;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ExecutePlanResponse> {
    const signal = this.signal;
    const onAbort = (): void => this.#stream?.call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      while (!this.#complete) {
        let response: ExecutePlanResponse;
        try {
          if (signal?.aborted) throw signal.reason;
          response = await this.host.rpc('ExecutePlan', () => this.#nextOnce(), { signal });
        } catch (e) {
          if (signal?.aborted) throw await this.#cancelled(signal.reason);
          throw e;
        }
        yield response;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#drop();
      // After ResultComplete this frees the buffered results; before it (consumer stopped early,
      // error, abort) it also ends the operation on the server.
      this.host.releaseExecute(this.operationId);
    }
  }

  async #cancelled(reason: unknown): Promise<LakehouseError> {
    await this.host.interruptForCancel(this.operationId);
    return reason instanceof LakehouseError ? reason : new OperationCancelledError(this.operationId, reason);
  }

  #open(): OpenStream {
    const kind = this.#started ? 'reattach' : 'execute';
    let call: ServerStream<ExecutePlanResponse>;
    if (kind === 'reattach') {
      this.reattaches++;
      this.host.onReattach?.();
      this.host.logger.info(
        { event: 'spark.reattach', operationId: this.operationId, lastResponseId: this.#lastResponseId, reattaches: this.reattaches },
        'reattaching to the operation',
      );
      call = this.host.openReattach(this.operationId, this.#lastResponseId);
    } else {
      call = this.host.openExecute(this.operationId, this.tags);
    }
    const stream: OpenStream = { call, it: call.responses[Symbol.asyncIterator](), received: 0, kind, openedAt: Date.now() };
    this.#stream = stream;
    return stream;
  }

  #drop(): void {
    const s = this.#stream;
    this.#stream = undefined;
    s?.call.cancel();
  }

  /** One step: the next response, opening or reopening a stream as needed. Throws raw errors. */
  async #nextOnce(): Promise<ExecutePlanResponse> {
    for (let switches = 0; ;) {
      const s = this.#stream ?? this.#open();
      let r: IteratorResult<ExecutePlanResponse>;
      try {
        r = await s.it.next();
      } catch (e) {
        this.#drop();
        const cls = errorClassOf(e);
        if (s.kind === 'execute' && cls === 'INVALID_HANDLE.OPERATION_ALREADY_EXISTS' && switches++ < 3) {
          // An earlier ExecutePlan of ours reached the server after all: continue that one.
          this.#started = true;
          continue;
        }
        if (s.kind === 'reattach' && cls === 'INVALID_HANDLE.OPERATION_NOT_FOUND' && this.#received === 0 && switches++ < 3) {
          // Nothing ever arrived and the server does not know the operation: it never got it.
          this.#started = false;
          continue;
        }
        throw e;
      }
      if (r.done) {
        this.#drop();
        this.#started = true;
        // Servers end idle streams too (a long query without output yet): that is normal and not
        // a retry. Only a stream that ends empty at once is paced, so a confused server cannot
        // make us spin.
        if (s.received === 0 && Date.now() - s.openedAt < EMPTY_STREAM_PACE_MS) await systemClock.sleep(EMPTY_STREAM_PACE_MS, this.signal);
        continue;
      }
      s.received++;
      this.#received++;
      this.#started = true;
      const response = r.value;
      this.host.observe(response);
      if (response.responseId) this.#lastResponseId = response.responseId;
      if (response.responseType.case === 'resultComplete') {
        this.#complete = true;
      } else if (++this.#sinceRelease >= RELEASE_EVERY && this.#lastResponseId) {
        this.#sinceRelease = 0;
        this.host.releaseExecute(this.operationId, this.#lastResponseId);
      }
      return response;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Results

/** A streaming query command's answer (status, recent progress, awaited termination), as the server sends it. */
export type StreamingQueryResult = StreamingQueryCommandResult;

export interface ExecuteSummary {
  operationId: string;
  /** Rows received in Arrow batches. */
  rowCount: number;
  /** The Spark schema of the result, when the server sent one. */
  schema?: DataType;
  /** The Arrow schema of the first batch. */
  arrowSchema?: Schema;
  /** The streaming query a `WriteStreamOperationStart` started. */
  streamingQuery?: { id: string; runId: string };
  /** What a `StreamingQueryCommand` answered. */
  streamingQueryResult?: StreamingQueryCommandResult;
  /** An eager SQL command's result relation (e.g. SHOW TABLES rows as a LocalRelation). */
  sqlCommandResult?: Relation;
  /** The id of the rows a `CheckpointCommand` kept on the server (a CachedRemoteRelation). */
  checkpointRelationId?: string;
  metrics?: ExecutePlanResponse_Metrics;
  /** `observe()` metrics by name, each a record of metric name → value. */
  observedMetrics: Record<string, unknown>;
  reattaches: number;
  complete: boolean;
}

/** The Arrow batches of an operation as they arrive; the summary fills in meanwhile. */
export class ResultStream implements AsyncIterable<RecordBatch> {
  readonly summary: ExecuteSummary;

  constructor(
    private readonly execution: Execution,
    private readonly onProgress?: (p: SparkProgress) => void,
    /**
     * The consumer is done with each batch when it asks for the next one (`executeToSink`): the
     * memory of a message whose batches were all consumed is released at once (see
     * `releaseMessageBuffer`) and those batches read as empty afterwards.
     */
    private readonly releaseConsumed = false,
  ) {
    this.summary = { operationId: execution.operationId, rowCount: 0, observedMetrics: {}, reattaches: 0, complete: false };
  }

  get operationId(): string {
    return this.execution.operationId;
  }

  /**
   * The result's rows as plain values (see arrow.ts), batch by batch: only the batch being read is
   * in memory, however many rows the result has.
   */
  async *rows(options: RowOptions = {}): AsyncGenerator<Record<string, unknown>> {
    for await (const batch of this) {
      const { rows } = await loadArrow();
      yield* rows(batch, options);
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<RecordBatch> {
    const s = this.summary;
    try {
      for await (const response of this.execution) {
        if (response.schema) s.schema = response.schema;
        if (response.metrics) s.metrics = response.metrics;
        for (const om of response.observedMetrics) {
          s.observedMetrics[om.name] = Object.fromEntries(om.keys.map((k, i) => [k, literalValue(om.values[i])]));
        }
        const r = response.responseType;
        switch (r.case) {
          case 'arrowBatch': {
            const batch = r.value;
            if (batch.startOffset !== undefined && batch.startOffset !== BigInt(s.rowCount)) {
              throw new InternalError(
                `operation ${s.operationId}: Arrow batch starts at row ${batch.startOffset}, expected ${s.rowCount} (lost or repeated rows)`,
              );
            }
            const { schema, batches } = (await loadArrow()).decodeArrowBatch(batch.data);
            s.arrowSchema ??= schema;
            const rows = batches.reduce((n, b) => n + b.numRows, 0);
            if (BigInt(rows) !== batch.rowCount) {
              throw new InternalError(`operation ${s.operationId}: Arrow batch announces ${batch.rowCount} rows, holds ${rows}`);
            }
            s.rowCount += rows;
            for (const b of batches) if (b.numRows > 0) yield b;
            if (this.releaseConsumed) releaseMessageBuffer(batch.data);
            break;
          }
          case 'sqlCommandResult':
            s.sqlCommandResult = r.value.relation;
            break;
          case 'checkpointCommandResult':
            if (r.value.relation) s.checkpointRelationId = r.value.relation.relationId;
            break;
          case 'writeStreamOperationStartResult':
            if (r.value.queryId) s.streamingQuery = { id: r.value.queryId.id, runId: r.value.queryId.runId };
            break;
          case 'streamingQueryCommandResult':
            s.streamingQueryResult = r.value;
            break;
          case 'executionProgress':
            this.onProgress?.(sparkProgress(r.value));
            break;
          case 'resultComplete':
            s.complete = true;
            break;
          default:
            break;
        }
      }
    } finally {
      s.reattaches = this.execution.reattaches;
    }
  }
}

/** A literal from the protocol (observed metrics) as a plain value, like `rows()` does for Arrow. */
export function literalValue(lit: Expression_Literal | undefined): unknown {
  if (!lit) return null;
  const t = lit.literalType;
  switch (t.case) {
    case undefined:
    case 'null':
      return null;
    case 'date':
      return new Date(t.value * 86_400_000).toISOString().slice(0, 10);
    case 'timestamp':
      return isoMicros(t.value, true);
    case 'timestampNtz':
      return isoMicros(t.value, false);
    case 'decimal': {
      const { value, scale } = t.value;
      if (scale === undefined || !/^-?\d+(\.\d+)?$/.test(value)) return value;
      const [int, frac = ''] = value.replace('-', '').split('.');
      const unscaled = BigInt(`${int}${frac.padEnd(scale, '0').slice(0, scale)}`);
      return formatUnscaled(value.startsWith('-') ? -unscaled : unscaled, scale);
    }
    case 'array':
      return t.value.elements.map(literalValue);
    case 'map':
      return Object.fromEntries(t.value.keys.map((k, i) => [String(literalValue(k)), literalValue(t.value.values[i])]));
    case 'struct': {
      const type = t.value.structType ?? lit.dataType;
      const fields = type?.kind.case === 'struct' ? type.kind.value.fields.map((f) => f.name) : undefined;
      const values = t.value.elements.map(literalValue);
      return fields && fields.length === values.length ? Object.fromEntries(fields.map((f, i) => [f, values[i]])) : values;
    }
    default:
      return t.value;
  }
}
