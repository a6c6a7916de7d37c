import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fromBinary, fromJson, type JsonValue, toBinary, toJson } from '@bufbuild/protobuf';
import { limitsSchema } from '../../../src/core/config/platform.js';
import { compileBindTenantCommand, compileRelationPlan, extension } from '../../../src/spark/plan/compile.js';
import { fn, col, lit } from '../../../src/spark/plan/expressions.js';
import { pluginRegistry } from '../../../src/spark/plan/json.js';
import { Query } from '../../../src/spark/plan/query.js';
import { wrapTenantLogic } from '../../../src/spark/policy/index.js';
import type { Plan } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';

/**
 * The plugin messages' wire format (src/spark/proto/lakehouse/jobs/plugins.proto), pinned by shared
 * vectors: the runner's generated code encodes each vector's fields to exactly its bytes and back,
 * and the compiler's messages are those bytes; the server's decoder checks the same file when it is
 * built (spark-plugins/build, WireVectors).
 */
const vectors = JSON.parse(readFileSync(fileURLToPath(new URL('../../../spark-plugins/wire-vectors.json', import.meta.url)), 'utf8')) as {
  message: string;
  json: JsonValue;
  hex: string;
}[];
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const extensionValue = (plan: Plan) => {
  const v = plan.opType.value;
  const any = v && 'commandType' in v ? v.commandType.value : v && 'relType' in v ? v.relType.value : undefined;
  return any as { typeUrl: string; value: Uint8Array };
};

describe('plugin messages: the shared wire vectors', () => {
  it.each(vectors.map((v, i) => [`${i} ${v.message}`, v] as const))('%s encodes to its bytes and decodes to its fields', (_, v) => {
    const schema = pluginRegistry.getMessage(v.message)!;
    expect(schema, v.message).toBeDefined();
    expect(hex(toBinary(schema, fromJson(schema, v.json, { registry: pluginRegistry })))).toBe(v.hex);
    expect(toJson(schema, fromBinary(schema, Buffer.from(v.hex, 'hex')), { registry: pluginRegistry })).toEqual(v.json);
  });

  it('the runner sends these bytes: the binding, tenant logic and the zero-copy requests', () => {
    const [bind, , logic, , check] = vectors;
    const limits = { ...limitsSchema.parse(undefined) };
    const binding = compileBindTenantCommand({
      tenant: 'acme',
      readNamespaces: ['lake.acme_bronze', 'lake.acme_silver', 'lake.shared_ref'],
      writeNamespaces: ['lake.acme_bronze', 'lake.acme_silver'],
      readRoots: ['file:///lake/acme', 's3a://shared/ref'],
      writeRoots: ['file:///lake/acme'],
      kafka: [{ bootstrapServers: ['broker-1:9092', 'broker-2:9092'], topics: ['acme.orders'], topicPrefixes: ['acme.'] }],
      limits,
    });
    expect(extensionValue(binding).typeUrl).toBe('type.googleapis.com/lakehouse.jobs.BindTenant');
    expect(hex(extensionValue(binding).value)).toBe(bind!.hex);

    const jdbc = Query.read('jdbc', { options: { url: 'jdbc:sqlite:shop.db', dbtable: 'orders' } }).filter(fn('>', col('amount'), lit(10)));
    const wrapped = wrapTenantLogic(jdbc.rel, ['source.where', 'cdc.delete-when']);
    expect(hex(extensionValue(compileRelationPlan(wrapped, { reveal: true })).value)).toBe(logic!.hex);

    const zeroCopy = extension({
      typeUrl: 'type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCheck',
      fields: [
        { field: 1, name: 'source', value: '`lake`.`shared_ref`.`countries`' },
        { field: 2, name: 'target', value: '`lake`.`acme_silver`.`countries`' },
        { field: 3, name: 'allowed_roots', value: 'file:///lake/acme' },
        { field: 3, name: 'allowed_roots', value: 'file:///lake/shared' },
        { field: 4, name: 'run_id', value: 'manual__1' },
      ],
      reads: [],
      writes: [],
    });
    expect(hex(zeroCopy.value)).toBe(check!.hex);
  });

  it('an extension field the message does not have is a bug, not a silent drop', () => {
    expect(() =>
      extension({ typeUrl: 'type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCheck', fields: [{ field: 9, name: 'x', value: 'y' }], reads: [], writes: [] }),
    ).toThrow(/no string field 9/);
  });
});
