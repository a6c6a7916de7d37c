/**
 * A Spark Connect session: one session id, one channel, one retry wrapper (`#rpc`) through which
 * every RPC goes. Queries and commands run as reattachable operations (execution.ts); results are
 * Arrow (arrow.ts); failures are SparkErrors classified in errors.ts.
 */
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { create, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import type { RecordBatch, Table } from 'apache-arrow';
import { createLogger, type Logger } from '../core/logger.js';
import { InternalError, LakehouseError, UsageError } from '../core/errors.js';
import { describeRemote, grpcAddress, isLoopback, type ConnectionSpec, type RemoteSpec } from './connection.js';
import { SparkError, failureFromGrpc, isGrpcCallError, isRetryableGrpcError, withErrorDetails, type SparkFailure, errorClassOf } from './errors.js';
import { Execution, ResultStream, loadArrow, type ExecuteOptions, type ExecuteSummary } from './execution.js';
import {
  AnalyzePlanRequestSchema,
  AnalyzePlanRequest_Explain_ExplainMode as ExplainModeEnum,
  ConfigRequest_GetAllSchema,
  ConfigRequest_GetOptionSchema,
  ConfigRequest_GetSchema,
  ConfigRequest_OperationSchema,
  ConfigRequest_SetSchema,
  ConfigRequest_UnsetSchema,
  ExecutePlanRequestSchema,
  FetchErrorDetailsRequestSchema,
  InterruptRequest_InterruptType as InterruptType,
  ReattachExecuteRequestSchema,
  ReleaseExecuteRequestSchema,
  ReleaseSessionRequestSchema,
  SparkConnectService,
  UserContextSchema,
  type AnalyzePlanResponse,
  type ConfigRequest_Operation,
  type ConfigResponse,
  type ExecutePlanResponse,
  type Plan,
  type UserContext,
} from './proto/gen/spark/connect/base_pb.js';
import type { DataType } from './proto/gen/spark/connect/types_pb.js';
import { RetryBudget, retryPolicy, systemClock, withRetry, type AttemptContext, type Clock, type RetryPolicy } from './retry.js';
import { Transport, type ServerStream } from './transport.js';
import { clientType } from './version.js';

export type { ExecuteOptions, ExecuteSummary } from './execution.js';
export { ResultStream } from './execution.js';

export interface ConnectOptions {
  /** Prefix of the announced client type (`<userAgent> lakehouse-jobs/<version>`); overrides the remote's user_agent. */
  userAgent?: string;
  /** Deadline of each unary call (ExecutePlan streams have none: use the signal). Default 5 minutes. */
  deadlineMs?: number;
  /** How long a call waits for the connection (the HTTP/2 handshake) before failing as UNAVAILABLE. Default 10 s. */
  connectTimeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /**
   * Wall-clock time all calls of this client together may spend retrying (default 2 minutes):
   * past it, a failing call fails (69 unreachable, 75 transient) instead of backing off again.
   */
  retryBudgetMs?: number;
  /**
   * The run's cancellation: when it aborts, every call in flight or waiting to retry ends at once.
   * Interrupt and release calls, which run after a cancellation, do not listen to it.
   */
  signal?: AbortSignal;
  logger?: Logger;
  /** Time source for the retry policy (tests). */
  clock?: Clock;
}

export interface ExecuteResult extends ExecuteSummary {
  /** All Arrow batches concatenated; absent when the operation returned no Arrow data (commands). */
  table?: Table;
}

/** Where `executeToSink` sends a result: Arrow record batches, in order, then `close` once. */
export interface BatchSink {
  /**
   * A batch is valid until `write` resolves: its memory is released right after (it then reads as
   * empty), so a sink that keeps data copies it.
   */
  write(batch: RecordBatch): void | Promise<void>;
  /** After the last batch of a complete result (not after a failure). */
  close?(summary: ExecuteSummary): void | Promise<void>;
}

export type ExplainMode = 'simple' | 'extended' | 'codegen' | 'cost' | 'formatted';

const explainModes: Record<ExplainMode, ExplainModeEnum> = {
  simple: ExplainModeEnum.SIMPLE,
  extended: ExplainModeEnum.EXTENDED,
  codegen: ExplainModeEnum.CODEGEN,
  cost: ExplainModeEnum.COST,
  formatted: ExplainModeEnum.FORMATTED,
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DEFAULT_DEADLINE_MS = 5 * 60_000;
/** Interrupt/release on the way out must not hold up a cancelled run. */
const QUICK_DEADLINE_MS = 3_000;
/** A retried attempt waits at least this long for an answer, even when little budget is left. */
const MIN_ATTEMPT_DEADLINE_MS = 1_000;
/** A Spark Connect server completes the HTTP/2 handshake in milliseconds; TLS through a proxy in a few seconds. */
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const method = SparkConnectService.method;

export class SparkConnectClient {
  readonly sessionId: string;
  /** Log-safe description of the server, e.g. `sc://host:15002 (token redacted)`. */
  readonly remote: string;
  readonly logger: Logger;
  /** Counters for status documents and tests. */
  readonly stats = { retries: 0, reattaches: 0, operations: 0 };
  readonly analyze: SparkAnalyze;
  readonly config: SparkConfig;

  readonly #transport: Transport;
  readonly #policy: RetryPolicy;
  readonly #budget: RetryBudget;
  readonly #signal: AbortSignal | undefined;
  readonly #clock: Clock;
  readonly #deadlineMs: number;
  readonly #connectTimeoutMs: number;
  readonly #clientType: string;
  readonly #userContext: UserContext;
  #serverSideSessionId: string | undefined;
  #closed = false;
  /** Aborted by close(): a call still retrying (a fire-and-forget release) must not keep the process alive. */
  readonly #closing = new AbortController();

  private constructor(spec: RemoteSpec, opts: ConnectOptions) {
    this.sessionId = spec.sessionId ?? randomUUID();
    this.remote = describeRemote(spec);
    this.logger = (opts.logger ?? createLogger('silent')).child({ component: 'spark', sessionId: this.sessionId });
    this.#policy = retryPolicy(opts.retry);
    this.#budget = new RetryBudget(opts.retryBudgetMs);
    this.#signal = opts.signal;
    this.#clock = opts.clock ?? systemClock;
    this.#deadlineMs = opts.deadlineMs ?? DEFAULT_DEADLINE_MS;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#clientType = clientType(opts.userAgent ?? spec.userAgent);
    const user = spec.userId ?? defaultUserId();
    this.#userContext = create(UserContextSchema, { userId: user, userName: user });
    this.#transport = new Transport({
      address: grpcAddress(spec),
      useSsl: spec.useSsl,
      ...(spec.token ? { token: spec.token } : {}),
      headers: spec.headers,
      userAgent: this.#clientType,
    });
    if (spec.token && !spec.useSsl && !isLoopback(spec.host)) {
      this.logger.warn({ event: 'spark.plaintext_token', remote: this.remote }, 'sending a token over a plaintext channel');
    }
    this.analyze = new SparkAnalyze(this);
    this.config = new SparkConfig(this);
  }

  /** A client for `spec`; no call is made until the first RPC. `local` must be resolved first. */
  static connect(spec: ConnectionSpec, opts: ConnectOptions = {}): SparkConnectClient {
    if (spec.kind === 'local') {
      throw new UsageError('the "local" remote must be resolved to the local server\'s sc:// address before connecting');
    }
    return new SparkConnectClient(spec, opts);
  }

  /** The server's id of our session, once a response carried it. */
  get serverSideSessionId(): string | undefined {
    return this.#serverSideSessionId;
  }

  // -------------------------------------------------------------------------------------------
  // The one retry wrapper

  /**
   * Run one RPC attempt function under the retry policy; whatever escapes is a LakehouseError.
   * @internal used by SparkAnalyze, SparkConfig and Execution
   */
  async rpc<T>(
    name: string,
    attempt: (n: number, context: AttemptContext) => Promise<T>,
    options: { signal?: AbortSignal; policy?: Partial<RetryPolicy>; cleanup?: boolean } = {},
  ): Promise<T> {
    if (this.#closed) throw new InternalError(`Spark Connect client is closed (${name})`);
    let attempts = 1;
    const signal = options.signal ? AbortSignal.any([options.signal, this.#closing.signal]) : this.#callSignal(options.cleanup);
    try {
      return await withRetry(
        attempt,
        {
          policy: options.policy ? { ...this.#policy, ...options.policy } : this.#policy,
          retryable: isRetryableGrpcError,
          clock: this.#clock,
          ...(signal ? { signal } : {}),
          ...(options.cleanup ? {} : { budget: this.#budget }),
          onRetry: ({ retry, delayMs, error }) => {
            this.stats.retries++;
            this.logger.warn(
              { event: 'spark.retry', rpc: name, retry, delayMs, grpcCode: isGrpcCallError(error) ? error.code : undefined },
              `retrying ${name}`,
            );
          },
        },
        (info) => (attempts = info.attempts),
      );
    } catch (e) {
      throw await this.#toError(e, name, attempts);
    }
  }

  async #toError(e: unknown, name: string, attempts: number): Promise<LakehouseError> {
    if (e instanceof LakehouseError) return e;
    if (!isGrpcCallError(e)) return new InternalError(`${name}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    let failure: SparkFailure = { ...failureFromGrpc(e), attempts };
    if (failure.errorId && !this.#closed) {
      // The status message may be truncated; the server keeps the full error under its id.
      try {
        const details = await this.#transport.unary(
          method.fetchErrorDetails,
          create(FetchErrorDetailsRequestSchema, { ...this.#common(), errorId: failure.errorId }),
          { deadlineMs: QUICK_DEADLINE_MS },
        );
        failure = withErrorDetails(failure, details);
      } catch (fetchError) {
        this.logger.debug({ event: 'spark.fetch_error_details_failed', err: String(fetchError) }, 'FetchErrorDetails failed');
      }
    }
    return new SparkError(failure, { cause: e });
  }

  /**
   * What ends a call early: closing the client always; the run's signal too, except for cleanup
   * calls (interrupt, release), which run after the run was cancelled and are bounded by their own
   * short policy instead of the run's budget.
   */
  #callSignal(cleanup: boolean | undefined): AbortSignal {
    return cleanup || !this.#signal ? this.#closing.signal : AbortSignal.any([this.#signal, this.#closing.signal]);
  }

  #common(): { sessionId: string; userContext: UserContext; clientType: string; clientObservedServerSideSessionId?: string } {
    return {
      sessionId: this.sessionId,
      userContext: this.#userContext,
      clientType: this.#clientType,
      ...(this.#serverSideSessionId ? { clientObservedServerSideSessionId: this.#serverSideSessionId } : {}),
    };
  }

  /** Remember the server-side session id; a different one means the server lost our session. */
  #observe(serverSideSessionId: string): void {
    if (!serverSideSessionId) return;
    if (this.#serverSideSessionId === undefined) {
      this.#serverSideSessionId = serverSideSessionId;
    } else if (this.#serverSideSessionId !== serverSideSessionId) {
      throw new SparkError({
        grpcCode: 13,
        errorClass: 'INVALID_HANDLE.SESSION_CHANGED',
        message: `the server replaced session ${this.sessionId} (server-side id ${this.#serverSideSessionId} → ${serverSideSessionId}); its state is lost`,
        messageParameters: {},
        classes: [],
        causes: [],
      });
    }
  }

  /** @internal a unary RPC under the retry wrapper, with the common request fields filled in. */
  async unary<I extends DescMessage, O extends DescMessage>(
    m: DescMethodUnary<I, O>,
    init: MessageInitShape<I>,
    options: { policy?: Partial<RetryPolicy>; deadlineMs?: number; cleanup?: boolean } = {},
  ): Promise<MessageShape<O>> {
    const request = create(m.input, { ...this.#common(), ...init } as MessageInitShape<I>);
    const deadline = options.deadlineMs ?? this.#deadlineMs;
    const signal = this.#callSignal(options.cleanup);
    const response = await this.rpc(
      m.name,
      // A retry waits for its answer only as long as retrying may still go on: against a server
      // that accepts connections and never answers, the budget, not the 5-minute deadline, ends it.
      async (n, { remainingMs }) => {
        const attemptDeadline = n === 0 ? deadline : Math.min(deadline, Math.max(remainingMs, MIN_ATTEMPT_DEADLINE_MS));
        await this.#transport.connected(Math.min(this.#connectTimeoutMs, attemptDeadline), signal);
        return this.#transport.unary(m, request, { deadlineMs: attemptDeadline, ...(signal ? { signal } : {}) });
      },
      { ...(options.policy ? { policy: options.policy } : {}), ...(options.cleanup ? { cleanup: true } : {}) },
    );
    const serverSide = (response as { serverSideSessionId?: unknown }).serverSideSessionId;
    if (typeof serverSide === 'string') this.#observe(serverSide);
    return response;
  }

  // -------------------------------------------------------------------------------------------
  // Execution

  /** Run a plan and collect everything: all Arrow batches as one table, plus the summary. */
  async execute(plan: Plan, opts: ExecuteOptions = {}): Promise<ExecuteResult> {
    const stream = this.executeStream(plan, opts);
    const batches: RecordBatch[] = [];
    for await (const batch of stream) batches.push(batch);
    const s = stream.summary;
    return { ...s, ...(s.arrowSchema ? { table: (await loadArrow()).concatBatches(s.arrowSchema, batches) } : {}) };
  }

  /**
   * Run a plan and hand its Arrow batches to `sink` as they arrive, one at a time and in order,
   * holding none: memory stays flat however large the result (the next batch is read only after
   * `write` resolved, so a slow sink holds back the server's stream instead of filling memory;
   * each message's memory is released once its batches are written, not left to V8's next full
   * collection). A sink that throws ends the operation on the server. Resolves with the summary.
   */
  async executeToSink(plan: Plan, sink: BatchSink, opts: ExecuteOptions = {}): Promise<ExecuteSummary> {
    const stream = this.#executeStream(plan, opts, true);
    for await (const batch of stream) await sink.write(batch);
    await sink.close?.(stream.summary);
    return stream.summary;
  }

  /**
   * Run a plan and receive its Arrow batches as they arrive (for results too big to hold twice).
   * `summary` is complete once iteration ended. Stopping early releases the operation.
   */
  executeStream(plan: Plan, opts: ExecuteOptions = {}): ResultStream {
    return this.#executeStream(plan, opts, false);
  }

  #executeStream(plan: Plan, opts: ExecuteOptions, releaseConsumed: boolean): ResultStream {
    const operationId = opts.operationId ?? randomUUID();
    if (!UUID.test(operationId)) throw new InternalError(`operation id must be a UUID, got ${JSON.stringify(operationId)}`);
    const tags = opts.tags ?? [];
    for (const tag of tags) {
      if (tag === '' || tag.includes(',')) throw new InternalError(`operation tag ${JSON.stringify(tag)} must be non-empty and without commas`);
    }
    this.stats.operations++;
    const execution = new Execution(
      {
        logger: this.logger,
        rpc: (name, attempt, o) => this.rpc(name, attempt, o ?? {}),
        openExecute: (id, t) => this.#openExecute(plan, id, t),
        openReattach: (id, last) => this.#openReattach(id, last),
        observe: (r: ExecutePlanResponse) => this.#observe(r.serverSideSessionId),
        releaseExecute: (id, until) => this.#releaseExecute(id, until),
        interruptForCancel: (id) => this.#interruptForCancel(id),
        onReattach: () => void this.stats.reattaches++,
      },
      operationId,
      tags,
      opts.signal ?? this.#signal,
    );
    return new ResultStream(execution, opts.onProgress, releaseConsumed);
  }

  #openExecute(plan: Plan, operationId: string, tags: readonly string[]): ServerStream<ExecutePlanResponse> {
    return this.#transport.serverStream(
      method.executePlan,
      create(ExecutePlanRequestSchema, {
        ...this.#common(),
        operationId,
        plan,
        tags: [...tags],
        requestOptions: [{ requestOption: { case: 'reattachOptions', value: { reattachable: true } } }],
      }),
    );
  }

  #openReattach(operationId: string, lastResponseId: string | undefined): ServerStream<ExecutePlanResponse> {
    return this.#transport.serverStream(
      method.reattachExecute,
      create(ReattachExecuteRequestSchema, {
        ...this.#common(),
        operationId,
        ...(lastResponseId ? { lastResponseId } : {}),
      }),
    );
  }

  #releaseExecute(operationId: string, until?: string): void {
    if (this.#closed) return;
    const init: MessageInitShape<typeof ReleaseExecuteRequestSchema> = until
      ? { operationId, release: { case: 'releaseUntil', value: { responseId: until } } }
      : { operationId, release: { case: 'releaseAll', value: {} } };
    this.unary(method.releaseExecute, init, CLEANUP_CALL).catch((e: unknown) =>
      // After the session is released (or the client closed) the server has dropped the operation
      // anyway, or will when the session expires: not worth a warning.
      this.logger[this.#closed || errorClassOf(e)?.startsWith('INVALID_HANDLE.SESSION') ? 'debug' : 'warn'](
        { event: 'spark.release_failed', operationId, releaseUntil: until, err: e instanceof Error ? e.message : String(e) },
        'ReleaseExecute failed',
      ),
    );
  }

  async #interruptForCancel(operationId: string): Promise<void> {
    try {
      await this.unary(
        method.interrupt,
        { interruptType: InterruptType.OPERATION_ID, interrupt: { case: 'operationId', value: operationId } },
        { policy: { maxRetries: 1, totalTimeoutMs: QUICK_DEADLINE_MS }, deadlineMs: QUICK_DEADLINE_MS, cleanup: true },
      );
    } catch (e) {
      this.logger.warn({ event: 'spark.interrupt_failed', operationId, err: e instanceof Error ? e.message : String(e) }, 'Interrupt failed');
    }
  }

  // -------------------------------------------------------------------------------------------
  // Interrupt, release, close

  /** Interrupt one operation; returns the ids the server interrupted (empty when it had finished). */
  async interruptOperation(operationId: string): Promise<string[]> {
    const r = await this.unary(
      method.interrupt,
      { interruptType: InterruptType.OPERATION_ID, interrupt: { case: 'operationId', value: operationId } },
      CLEANUP_CALL,
    );
    return r.interruptedIds;
  }

  async interruptTag(tag: string): Promise<string[]> {
    const r = await this.unary(method.interrupt, { interruptType: InterruptType.TAG, interrupt: { case: 'operationTag', value: tag } }, CLEANUP_CALL);
    return r.interruptedIds;
  }

  async interruptAll(): Promise<string[]> {
    const r = await this.unary(method.interrupt, { interruptType: InterruptType.ALL }, CLEANUP_CALL);
    return r.interruptedIds;
  }

  /** End the session on the server (its temp views, config and cached state go with it). */
  async releaseSession(): Promise<void> {
    const m = method.releaseSession;
    await this.rpc(
      m.name,
      () =>
        this.#transport.unary(
          m,
          create(ReleaseSessionRequestSchema, { sessionId: this.sessionId, userContext: this.#userContext, clientType: this.#clientType }),
          { deadlineMs: Math.min(this.#deadlineMs, QUICK_DEADLINE_MS) },
        ),
      { policy: CLEANUP_CALL.policy, cleanup: true },
    );
  }

  /** Close the channel. Pending calls fail; release the session first if it should end. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort(new InternalError('Spark Connect client closed'));
    this.#transport.close();
  }
}

/**
 * Interrupts and ReleaseSession run while a job is being cancelled or is already failing: they get a
 * few quick retries within 3 s, never the run's budget, and ignore the run's signal. A cancelled run
 * makes at most three of them in a row (interrupt by tag, interrupt of the running operation,
 * release), so a SIGTERM ends the pod within 20 s even when the server no longer answers.
 */
const CLEANUP_CALL = { policy: { maxRetries: 2, totalTimeoutMs: QUICK_DEADLINE_MS }, deadlineMs: QUICK_DEADLINE_MS, cleanup: true } as const;

function defaultUserId(): string {
  try {
    return process.env.USER ?? userInfo().username;
  } catch {
    return 'lakehouse-jobs';
  }
}

/** AnalyzePlan: schema, explain, version, DDL parsing. */
export class SparkAnalyze {
  constructor(private readonly client: SparkConnectClient) {}

  async #analyze(init: MessageInitShape<typeof AnalyzePlanRequestSchema>['analyze']): Promise<AnalyzePlanResponse['result']> {
    const r = await this.client.unary(method.analyzePlan, { analyze: init });
    return r.result;
  }

  async schema(plan: Plan): Promise<DataType> {
    const r = await this.#analyze({ case: 'schema', value: { plan } });
    if (r.case !== 'schema' || !r.value.schema) throw unexpected('schema', r.case);
    return r.value.schema;
  }

  async explain(plan: Plan, mode: ExplainMode = 'simple'): Promise<string> {
    const r = await this.#analyze({ case: 'explain', value: { plan, explainMode: explainModes[mode] } });
    if (r.case !== 'explain') throw unexpected('explain', r.case);
    return r.value.explainString;
  }

  /**
   * The files a plan reads, as the server lists them (best effort: file-based relations such as
   * parquet paths and Delta tables; Iceberg and JDBC relations report none). Analyses the plan.
   */
  async inputFiles(plan: Plan): Promise<string[]> {
    const r = await this.#analyze({ case: 'inputFiles', value: { plan } });
    if (r.case !== 'inputFiles') throw unexpected('inputFiles', r.case);
    return r.value.files;
  }

  async sparkVersion(): Promise<string> {
    const r = await this.#analyze({ case: 'sparkVersion', value: {} });
    if (r.case !== 'sparkVersion') throw unexpected('sparkVersion', r.case);
    return r.value.version;
  }

  /** Parse a DDL schema string such as `id BIGINT, name STRING` on the server. */
  async ddlParse(ddl: string): Promise<DataType> {
    const r = await this.#analyze({ case: 'ddlParse', value: { ddlString: ddl } });
    if (r.case !== 'ddlParse' || !r.value.parsed) throw unexpected('ddlParse', r.case);
    return r.value.parsed;
  }
}

function unexpected(asked: string, got: string | undefined): InternalError {
  return new InternalError(`AnalyzePlan ${asked}: the server answered ${got ?? 'nothing'}`);
}

/** The session's runtime configuration (`spark.conf`). */
export class SparkConfig {
  constructor(private readonly client: SparkConnectClient) {}

  async #config(op: ConfigRequest_Operation['opType']): Promise<ConfigResponse> {
    return this.client.unary(method.config, { operation: create(ConfigRequest_OperationSchema, { opType: op }) });
  }

  /** Set values; returns the server's warnings (e.g. static or deprecated keys). */
  async set(pairs: Readonly<Record<string, string>>): Promise<string[]> {
    const r = await this.#config({
      case: 'set',
      value: create(ConfigRequest_SetSchema, { pairs: Object.entries(pairs).map(([key, value]) => ({ key, value })) }),
    });
    return r.warnings;
  }

  /** Values of keys that are set or have a default; the server fails for unknown keys without one. */
  async get(keys: readonly string[]): Promise<Record<string, string>> {
    const r = await this.#config({ case: 'get', value: create(ConfigRequest_GetSchema, { keys: [...keys] }) });
    return Object.fromEntries(r.pairs.map((p) => [p.key, p.value ?? '']));
  }

  /** Values of keys, `undefined` for keys without a value. */
  async getOption(keys: readonly string[]): Promise<Record<string, string | undefined>> {
    const r = await this.#config({ case: 'getOption', value: create(ConfigRequest_GetOptionSchema, { keys: [...keys] }) });
    return Object.fromEntries(r.pairs.map((p) => [p.key, p.value]));
  }

  /** Every set value, optionally only keys starting with `prefix` (full keys: the server strips the prefix, we put it back). */
  async getAll(prefix?: string): Promise<Record<string, string>> {
    const r = await this.#config({ case: 'getAll', value: create(ConfigRequest_GetAllSchema, prefix !== undefined ? { prefix } : {}) });
    return Object.fromEntries(r.pairs.map((p) => [`${prefix ?? ''}${p.key}`, p.value ?? '']));
  }

  async unset(keys: readonly string[]): Promise<void> {
    await this.#config({ case: 'unset', value: create(ConfigRequest_UnsetSchema, { keys: [...keys] }) });
  }
}
