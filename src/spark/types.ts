import type { DataType } from './proto/gen/spark/connect/types_pb.js';

/**
 * Spark SQL type names from a schema the server sent (`AnalyzePlan.schema`), e.g. for
 * `ALTER TABLE … ADD COLUMNS`: the types come from Spark itself, never from config text.
 */
/** A Spark data type as the server describes it (a schema is a struct type). */
export type SparkType = DataType;

export interface Field {
  readonly name: string;
  readonly type: string;
}

export function structFields(t: DataType): Field[] {
  if (t.kind.case !== 'struct') return [];
  return t.kind.value.fields.map((f) => ({ name: f.name, type: f.dataType ? sqlType(f.dataType) : 'void' }));
}

export function sqlType(t: DataType): string {
  const k = t.kind;
  switch (k.case) {
    case 'null':
      return 'void';
    case 'binary':
      return 'binary';
    case 'boolean':
      return 'boolean';
    case 'byte':
      return 'tinyint';
    case 'short':
      return 'smallint';
    case 'integer':
      return 'int';
    case 'long':
      return 'bigint';
    case 'float':
      return 'float';
    case 'double':
      return 'double';
    case 'decimal':
      return `decimal(${k.value.precision ?? 10},${k.value.scale ?? 0})`;
    case 'string':
    case 'char':
    case 'varChar':
      return 'string';
    case 'date':
      return 'date';
    case 'timestamp':
      return 'timestamp';
    case 'timestampNtz':
      return 'timestamp_ntz';
    case 'array':
      return `array<${k.value.elementType ? sqlType(k.value.elementType) : 'void'}>`;
    case 'map':
      return `map<${k.value.keyType ? sqlType(k.value.keyType) : 'void'},${k.value.valueType ? sqlType(k.value.valueType) : 'void'}>`;
    case 'struct':
      return `struct<${k.value.fields.map((f) => `\`${f.name.replaceAll('`', '``')}\`:${f.dataType ? sqlType(f.dataType) : 'void'}`).join(',')}>`;
    default:
      return k.case ?? 'void';
  }
}
