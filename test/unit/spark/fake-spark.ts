/**
 * A tiny fake Spark Connect server (grpc-js, plaintext, 127.0.0.1) for transport edge cases a real
 * server cannot produce on demand: dropped streams, UNAVAILABLE, header checks. Handlers return
 * responses or throw `{ code, details, metadata? }`; streaming handlers yield responses.
 */
import * as grpc from '@grpc/grpc-js';
import { create, isMessage, toBinary, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { Int64, Table, tableToIPC, vectorFromArray } from 'apache-arrow';
import { ErrorInfoSchema, StatusSchema } from '../../../src/spark/proto/gen/google/rpc/status_pb.js';
import { ExecutePlanResponseSchema, SparkConnectService, type ExecutePlanResponse } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { sparkConnectServiceDefinition } from '../../../src/spark/transport.js';

export interface RecordedCall {
  method: string;
  request: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  metadata: grpc.Metadata;
}

type Unary = (request: any, call: RecordedCall) => unknown | Promise<unknown>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Streaming = (request: any, call: RecordedCall & { cancelled: () => boolean }) => AsyncIterable<unknown> | Iterable<unknown>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface FakeHandlers {
  executePlan?: Streaming;
  reattachExecute?: Streaming;
  analyzePlan?: Unary;
  config?: Unary;
  interrupt?: Unary;
  releaseExecute?: Unary;
  releaseSession?: Unary;
  fetchErrorDetails?: Unary;
}

export interface FakeSpark {
  remote: string;
  port: number;
  calls: RecordedCall[];
  callsOf(method: string): RecordedCall[];
  stop(): Promise<void>;
}

/** A status error as a Spark server sends it, optionally with ErrorInfo. */
export function statusError(code: grpc.status, details: string, info?: Record<string, string>): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  if (info) {
    const st = create(StatusSchema, {
      code,
      message: details,
      details: [anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: 'org.apache.spark.SparkException', domain: 'org.apache.spark', metadata: info }))],
    });
    metadata.set('grpc-status-details-bin', Buffer.from(toBinary(StatusSchema, st)));
  }
  return Object.assign(new Error(details), { code, details, metadata });
}

export const SERVER_SIDE_SESSION = 'server-side-1';

export function response(init: MessageInitShape<typeof ExecutePlanResponseSchema>): ExecutePlanResponse {
  return create(ExecutePlanResponseSchema, { serverSideSessionId: SERVER_SIDE_SESSION, ...init });
}

/** An ArrowBatch response holding `ids` in one BIGINT column `id`. */
export function arrowResponse(operationId: string, responseId: string, ids: number[], startOffset: number): ExecutePlanResponse {
  const data = tableToIPC(new Table({ id: vectorFromArray(ids.map(BigInt), new Int64()) }), 'stream');
  return response({
    operationId,
    responseId,
    responseType: { case: 'arrowBatch', value: { rowCount: BigInt(ids.length), data, startOffset: BigInt(startOffset) } },
  });
}

export function completeResponse(operationId: string, responseId: string): ExecutePlanResponse {
  return response({ operationId, responseId, responseType: { case: 'resultComplete', value: {} } });
}

export async function startFakeSpark(handlers: FakeHandlers): Promise<FakeSpark> {
  const server = new grpc.Server();
  const calls: RecordedCall[] = [];
  const impl: grpc.UntypedServiceImplementation = {};
  for (const [name, def] of Object.entries(sparkConnectServiceDefinition)) {
    const handler = handlers[name as keyof FakeHandlers];
    const output: DescMessage = SparkConnectService.method[name as keyof typeof SparkConnectService.method].output;
    // Handlers may answer with plain init objects.
    const message = (r: unknown) => (isMessage(r) ? r : create(output, r as MessageInitShape<DescMessage>));
    if (def.responseStream) {
      impl[name] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
        const rec: RecordedCall = { method: name, request: call.request, metadata: call.metadata };
        calls.push(rec);
        if (!handler) return call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: name });
        let cancelled = false;
        call.on('cancelled', () => (cancelled = true));
        void (async () => {
          try {
            for await (const r of (handler as Streaming)(call.request, { ...rec, cancelled: () => cancelled })) {
              if (cancelled) return;
              call.write(message(r));
            }
            call.end();
          } catch (e) {
            call.emit('error', e);
          }
        })();
      };
    } else {
      impl[name] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const rec: RecordedCall = { method: name, request: call.request, metadata: call.metadata };
        calls.push(rec);
        if (!handler) return callback({ code: grpc.status.UNIMPLEMENTED, details: name });
        Promise.resolve()
          .then(() => (handler as Unary)(call.request, rec))
          .then(
            (r) => callback(null, message(r)),
            (e: grpc.ServiceError) => callback(e),
          );
      };
    }
  }
  server.addService(sparkConnectServiceDefinition, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    remote: `sc://127.0.0.1:${port}`,
    port,
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method),
    stop: async () => server.forceShutdown(),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
