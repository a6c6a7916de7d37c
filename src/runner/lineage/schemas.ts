import type { SparkConnectClient } from '../../spark/client.js';
import { compileRelationPlan } from '../../spark/plan/compile.js';
import { Query } from '../../spark/plan/query.js';
import { structFields } from '../../spark/types.js';
import type { SchemaReader } from './index.js';

/**
 * A dataset's columns as the run's Spark session sees them, analysed and never executed: a table by
 * its name, files by their format and path. Only names and types come back.
 */
export function sparkSchemaReader(client: SparkConnectClient): SchemaReader {
  return async (ref, format) => {
    const rel = ref.kind === 'table' ? Query.table(ref.table.split('.')).rel : Query.read(format ?? 'parquet', { paths: [ref.path] }).rel;
    return structFields(await client.analyze.schema(compileRelationPlan(rel, { reveal: false })));
  };
}
