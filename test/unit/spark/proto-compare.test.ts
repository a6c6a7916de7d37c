// The comparator behind proto-conformance.test.ts must notice every kind of wire difference.
import { clone, create } from '@bufbuild/protobuf';
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorSetSchema, type FileDescriptorSet } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { file_spark_connect_base } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { file_spark_connect_commands } from '../../../src/spark/proto/gen/spark/connect/commands_pb.js';
import { file_spark_connect_expressions } from '../../../src/spark/proto/gen/spark/connect/expressions_pb.js';
import { file_spark_connect_relations } from '../../../src/spark/proto/gen/spark/connect/relations_pb.js';
import { file_spark_connect_types } from '../../../src/spark/proto/gen/spark/connect/types_pb.js';
import { compareDescriptorSets, countElements } from '../../support/proto-compare.js';

/** Our schema, from the descriptors embedded in the generated code. */
const ours: FileDescriptorSet = create(FileDescriptorSetSchema, {
  file: [file_spark_connect_types, file_spark_connect_expressions, file_spark_connect_relations, file_spark_connect_commands, file_spark_connect_base].map(
    (f) => f.proto,
  ),
});

function mutated(change: (set: FileDescriptorSet) => void): FileDescriptorSet {
  const copy = clone(FileDescriptorSetSchema, ours);
  change(copy);
  return copy;
}

function message(set: FileDescriptorSet, file: string, name: string) {
  const m = set.file.find((f) => f.name === `spark/connect/${file}.proto`)?.messageType.find((x) => x.name === name);
  if (!m) throw new Error(`no ${name}`);
  return m;
}

describe('compareDescriptorSets', () => {
  it('finds nothing when both sides agree', () => {
    expect(compareDescriptorSets(ours, ours)).toEqual([]);
    expect(countElements(ours).methods).toBe(8);
  });

  it('catches a wrong field number', () => {
    const theirs = mutated((s) => {
      const limit = message(s, 'relations', 'Limit').field.find((f) => f.name === 'limit');
      if (limit) limit.number = 3;
    });
    expect(compareDescriptorSets(ours, theirs)).toEqual(['field .spark.connect.Limit.limit = 2: no field with that number (theirs is limit = 3)']);
  });

  it('catches a renamed field, a changed type, label and optional', () => {
    const theirs = mutated((s) => {
      const fields = message(s, 'relations', 'Range').field;
      fields[1]!.name = 'stop';
      fields[2]!.type = FieldDescriptorProto_Type.INT32;
      fields[2]!.label = FieldDescriptorProto_Label.REPEATED;
      fields[0]!.proto3Optional = false;
    });
    const problems = compareDescriptorSets(ours, theirs);
    expect(problems).toContain('field .spark.connect.Range.end = 2: name is end, theirs stop');
    expect(problems).toContain('field .spark.connect.Range.step = 3: type is INT64, theirs INT32');
    expect(problems).toContain('field .spark.connect.Range.step = 3: label is OPTIONAL, theirs REPEATED');
    expect(problems).toContain('field .spark.connect.Range.start = 1: optional is true, theirs false');
  });

  it('catches oneof membership and message type names', () => {
    const theirs = mutated((s) => {
      const rel = message(s, 'relations', 'Relation');
      rel.oneofDecl[0]!.name = 'kind';
      const filter = message(s, 'relations', 'Filter').field.find((f) => f.name === 'condition');
      if (filter) filter.typeName = '.spark.connect.Relation';
    });
    const problems = compareDescriptorSets(ours, theirs);
    expect(problems).toContain('field .spark.connect.Relation.read = 2: oneof is rel_type, theirs kind');
    expect(problems).toContain('field .spark.connect.Filter.condition = 2: type_name is .spark.connect.Expression, theirs .spark.connect.Relation');
  });

  it('catches enum values, missing messages and rpc shapes', () => {
    const theirs = mutated((s) => {
      const join = message(s, 'relations', 'Join');
      join.enumType[0]!.value.find((v) => v.name === 'JOIN_TYPE_CROSS')!.number = 8;
      const base = s.file.find((f) => f.name === 'spark/connect/base.proto')!;
      base.messageType = base.messageType.filter((m) => m.name !== 'KeyValue');
      const rpc = base.service[0]!.method.find((m) => m.name === 'ReattachExecute')!;
      rpc.serverStreaming = false;
    });
    const problems = compareDescriptorSets(ours, theirs);
    expect(problems).toContain('enum value .spark.connect.Join.JoinType.JOIN_TYPE_CROSS: number 7, theirs 8');
    expect(problems).toContain("message .spark.connect.KeyValue: not in the server's schema");
    expect(problems).toContain('rpc .spark.connect.SparkConnectService.ReattachExecute: server_streaming is true, theirs false');
  });
});
