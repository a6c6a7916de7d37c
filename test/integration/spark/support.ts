/** Shared bits of the Spark Connect integration tests: the remote, a client, SQL plans. */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { SparkConnectClient, type ConnectOptions } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { requireNeed } from '../../support/needs.js';
import { PlanSchema, type Plan } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import type { ExpressionSchema } from '../../../src/spark/proto/gen/spark/connect/expressions_pb.js';

export const remote = (): string => {
  requireNeed('the shared Spark Connect server', 'spark', 'spark-cluster');
  return process.env.SPARK_REMOTE ?? 'sc://127.0.0.1:15002';
};

export function connect(opts: ConnectOptions = {}, address = remote()): SparkConnectClient {
  return SparkConnectClient.connect(parseConnectionString(address), opts);
}

type ExpressionInit = MessageInitShape<typeof ExpressionSchema>;

/** A query plan running `query`, with named parameters bound as expressions (`:name`). */
export function sql(query: string, named: Record<string, ExpressionInit> = {}): Plan {
  return create(PlanSchema, { opType: { case: 'root', value: { relType: { case: 'sql', value: { query, namedArguments: named } } } } });
}

export const literal = {
  string: (value: string): ExpressionInit => ({ exprType: { case: 'literal', value: { literalType: { case: 'string', value } } } }),
  long: (value: bigint): ExpressionInit => ({ exprType: { case: 'literal', value: { literalType: { case: 'long', value } } } }),
  decimal: (value: string, precision: number, scale: number): ExpressionInit => ({
    exprType: { case: 'literal', value: { literalType: { case: 'decimal', value: { value, precision, scale } } } },
  }),
  date: (iso: string): ExpressionInit => ({
    exprType: { case: 'literal', value: { literalType: { case: 'date', value: Math.round(Date.parse(`${iso}T00:00:00Z`) / 86_400_000) } } },
  }),
};

/** A statement so slow it only ends when interrupted (2 cores, 10^11 rows). */
export const NEVER_ENDING = 'SELECT count(*) FROM range(0, 100000000000)';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
