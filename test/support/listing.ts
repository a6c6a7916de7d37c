import { SparkError } from '../../src/spark/errors.js';
import { planToJson } from '../../src/spark/plan/json.js';
import type { Plan } from '../../src/spark/proto/gen/spark/connect/base_pb.js';

/**
 * For fake sessions: the path a plan lists when it is the executor's listing of a location (a
 * binaryFile read: probePaths, the empty-location check before a table is created), else undefined.
 */
export function listedPath(plan: Plan): string | undefined {
  const ds = (planToJson(plan) as { root?: { read?: { dataSource?: { format?: string; paths?: string[] } } } }).root?.read?.dataSource;
  return ds?.format === 'binaryFile' ? ds.paths?.[0] : undefined;
}

/** What Spark answers for a path that does not exist. */
export function pathNotFound(path: string): SparkError {
  return new SparkError({ grpcCode: 3, message: `[PATH_NOT_FOUND] ${path}`, errorClass: 'PATH_NOT_FOUND', messageParameters: {}, classes: [], causes: [] });
}
