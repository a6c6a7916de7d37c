/**
 * The gRPC channel to a Spark Connect server: grpc-js with protobuf-es serializers, 128 MiB
 * message limits, TLS when asked, and the bearer token plus any extra headers as call metadata on
 * every call (grpc-js refuses call credentials on plaintext channels, and local servers run
 * plaintext with a token).
 */
import * as grpc from '@grpc/grpc-js';
import { fromBinary, toBinary, type DescMessage, type DescMethod, type MessageShape } from '@bufbuild/protobuf';
import type { Secret } from '../core/secrets.js';
import { ExecutePlanResponseSchema, SparkConnectService, type ExecutePlanResponse } from './proto/gen/spark/connect/base_pb.js';

export const MAX_MESSAGE_BYTES = 128 * 1024 * 1024;

export interface TransportOptions {
  address: string;
  useSsl: boolean;
  token?: Secret;
  headers?: Readonly<Record<string, string>>;
  userAgent?: string;
}

export interface CallOptions {
  deadlineMs?: number;
  /** Cancels the call (the server sees a cancelled stream); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface ServerStream<O> {
  responses: AsyncIterable<O>;
  cancel(): void;
}

type Method = (typeof SparkConnectService.method)[keyof typeof SparkConnectService.method];

function path(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function serializer<D extends DescMessage>(schema: D): (m: MessageShape<D>) => Buffer {
  return (m) => Buffer.from(toBinary(schema, m));
}

function deserializer<D extends DescMessage>(schema: D): (b: Buffer) => MessageShape<D> {
  if ((schema as DescMessage) === ExecutePlanResponseSchema) return executeResponseDeserializer as unknown as (b: Buffer) => MessageShape<D>;
  return (b) => fromBinary(schema, b, { readUnknownFields: false });
}

/**
 * Results: protobuf-es decodes `bytes` as a view into the message buffer (no copy), so an Arrow
 * batch's IPC stream sits wherever the protobuf framing put it, 7 times in 8 not 8-byte aligned,
 * and apache-arrow then copies every record batch body to align it. Aligning the data in place
 * instead saves that allocation and copy of every result byte.
 */
function executeResponseDeserializer(b: Buffer): ExecutePlanResponse {
  const response = fromBinary(ExecutePlanResponseSchema, b, { readUnknownFields: false });
  const r = response.responseType;
  // Observed metrics may hold binary literals, views into the same buffer: leave those messages be.
  if (r.case === 'arrowBatch' && response.observedMetrics.length === 0) {
    r.value.data = alignInPlace(r.value.data, b);
    // grpc-js concatenates each message with its 5-byte gRPC frame header into a Buffer of its own
    // and hands us the message after the header. Small Buffers may share Node's Buffer pool, and
    // small messages do not matter for memory: only large whole-message buffers are released.
    const buffer = b.buffer;
    if (buffer.byteLength >= MIN_RELEASABLE_BYTES && b.byteOffset <= GRPC_FRAME_HEADER_BYTES && b.byteOffset + b.byteLength === buffer.byteLength) {
      releasable.add(buffer);
    }
  }
  return response;
}

const GRPC_FRAME_HEADER_BYTES = 5;
const MIN_RELEASABLE_BYTES = 64 * 1024;

/**
 * ArrayBuffers that hold exactly one ArrowBatch response (and its gRPC frame header) and nothing else, so that the batch's
 * `data` (and the record batches decoded from it) is their only user.
 */
const releasable = new WeakSet<ArrayBufferLike>();

/**
 * Hand the memory of a consumed ArrowBatch message back now instead of at V8's next full
 * collection: `data` is the batch's IPC stream and the caller guarantees that nothing reads it,
 * or any record batch decoded from it, any more (they are detached: zero bytes long). Why: a
 * streamed result allocates its size in message buffers, and those a scavenge happens to find
 * alive (in flight, being decoded) move to the old generation, where only a full collection
 * frees them; V8 starts one when the external memory has grown by 64 MB, so the peak RSS of a
 * long result grew with its length and the machine's load. Transferring the buffer moves its
 * memory to a new ArrayBuffer that nothing references: the next scavenge frees it whatever the
 * old one's age. Returns whether the buffer was released (only buffers of one whole message are).
 */
export function releaseMessageBuffer(data: Uint8Array): boolean {
  const buffer = data.buffer;
  if (!releasable.delete(buffer) || !(buffer instanceof ArrayBuffer)) return false;
  structuredClone(buffer, { transfer: [buffer] });
  return true;
}

/**
 * Move `data`, a view into `message`, down to the nearest 8-byte-aligned address inside the same
 * buffer and return the view there. The at most 7 bytes it overwrites precede `data` in the
 * message: the field's own tag and length and the scalars before it, all decoded already, never
 * another view (the caller makes sure `data` is the message's only view). Returns `data` itself
 * when it is aligned or when there is no room before it inside `message`.
 */
export function alignInPlace(data: Uint8Array, message: Uint8Array): Uint8Array {
  const shift = data.byteOffset % 8;
  if (shift === 0 || data.buffer !== message.buffer || data.byteOffset - shift < message.byteOffset) return data;
  if (data.byteOffset + data.byteLength > message.byteOffset + message.byteLength) return data;
  const region = new Uint8Array(data.buffer, data.byteOffset - shift, data.byteLength + shift);
  region.copyWithin(0, shift);
  return region.subarray(0, data.byteLength);
}

/**
 * grpc-js definition of SparkConnectService from our generated descriptors: used by the client
 * and by the fake servers of the tests.
 */
export const sparkConnectServiceDefinition: grpc.ServiceDefinition = Object.fromEntries(
  Object.values(SparkConnectService.method).map((m: Method) => [
    m.localName,
    {
      path: path(m),
      // Our schema has no client-streaming RPCs.
      requestStream: false,
      responseStream: m.methodKind === 'server_streaming',
      requestSerialize: serializer(m.input),
      requestDeserialize: deserializer(m.input),
      responseSerialize: serializer(m.output),
      responseDeserialize: deserializer(m.output),
    },
  ]),
);

export class Transport {
  readonly #client: grpc.Client;
  readonly #token: Secret | undefined;
  readonly #headers: Readonly<Record<string, string>>;

  constructor(opts: TransportOptions) {
    const credentials = opts.useSsl ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    this.#client = new grpc.Client(opts.address, credentials, {
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      // grpc-js defaults to a 64 KiB HTTP/2 window: the server would wait for window updates between
      // Arrow batches. 16 MiB lets a result stream at the server's pace (measured: collect -10..25 %).
      'grpc-node.flow_control_window': 16 * 1024 * 1024,
      ...(opts.userAgent ? { 'grpc.primary_user_agent': opts.userAgent } : {}),
    });
    this.#token = opts.token;
    this.#headers = opts.headers ?? {};
  }

  /** Fresh metadata per call: the token is revealed only here, on its way to the server. */
  #metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.#headers)) md.set(k, v);
    if (this.#token) md.set('authorization', `Bearer ${this.#token.reveal()}`);
    return md;
  }

  #callOptions(opts: CallOptions): grpc.CallOptions {
    return opts.deadlineMs !== undefined ? { deadline: new Date(Date.now() + opts.deadlineMs) } : {};
  }

  unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethod & { input: I; output: O },
    request: MessageShape<I>,
    opts: CallOptions = {},
  ): Promise<MessageShape<O>> {
    const signal = opts.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      // A call waiting for a connection (a silent or unreachable server) waits until its deadline;
      // an abort must not: cancel the call and answer with the abort's reason at once.
      const onAbort = (): void => {
        call.cancel();
        reject(signal?.reason);
      };
      const call = this.#client.makeUnaryRequest(
        path(method),
        serializer(method.input),
        deserializer(method.output),
        request,
        this.#metadata(),
        this.#callOptions(opts),
        (err, res) => {
          signal?.removeEventListener('abort', onAbort);
          if (err || res === undefined) reject(err ?? new Error('empty response'));
          else resolve(res);
        },
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  serverStream<I extends DescMessage, O extends DescMessage>(
    method: DescMethod & { input: I; output: O },
    request: MessageShape<I>,
    opts: CallOptions = {},
  ): ServerStream<MessageShape<O>> {
    const call = this.#client.makeServerStreamRequest(
      path(method),
      serializer(method.input),
      deserializer(method.output),
      request,
      this.#metadata(),
      this.#callOptions(opts),
    );
    return {
      responses: call as AsyncIterable<MessageShape<O>>,
      cancel: () => call.cancel(),
    };
  }

  /**
   * Resolve once the channel is connected (HTTP/2 handshake done). A server that accepts TCP and
   * never speaks HTTP/2 would otherwise hold a call until its deadline (minutes): this fails with
   * UNAVAILABLE after `timeoutMs`, so the retry policy and its budget apply. A refused connection
   * fails at once, as the call itself would.
   */
  connected(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const channel = this.#client.getChannel();
    const unavailable = (details: string) => Object.assign(new Error(details), { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() });
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const deadline = Date.now() + timeoutMs;
      let done = false;
      const finish = (error?: unknown): void => {
        if (done) return;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = (): void => finish(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const check = (): void => {
        if (done) return;
        const state = channel.getConnectivityState(true);
        if (state === grpc.connectivityState.READY) return finish();
        if (state === grpc.connectivityState.TRANSIENT_FAILURE) return finish(unavailable('failed to connect (connection refused or reset)'));
        if (state === grpc.connectivityState.SHUTDOWN) return finish(unavailable('channel closed'));
        if (Date.now() >= deadline) return finish(unavailable(`no connection within ${timeoutMs} ms (the server accepted TCP but did not answer)`));
        channel.watchConnectivityState(state, deadline, () => check());
      };
      check();
    });
  }

  close(): void {
    this.#client.close();
  }
}
