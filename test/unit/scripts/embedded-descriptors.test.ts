import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { create, toBinary, type DescFile, type DescMessage, type Message } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, file_google_protobuf_any, file_google_protobuf_duration } from '@bufbuild/protobuf/wkt';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- a build script (plain JavaScript, no declarations)
import * as embed from '../../../scripts/build/embedded-descriptors.mjs';
import * as base from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { file_spark_connect_commands } from '../../../src/spark/proto/gen/spark/connect/commands_pb.js';
import { file_spark_connect_expressions } from '../../../src/spark/proto/gen/spark/connect/expressions_pb.js';
import { file_spark_connect_relations } from '../../../src/spark/proto/gen/spark/connect/relations_pb.js';
import { file_spark_connect_types } from '../../../src/spark/proto/gen/spark/connect/types_pb.js';
import { file_google_rpc_status } from '../../../src/spark/proto/gen/google/rpc/status_pb.js';

/** scripts/build/embedded-descriptors.mjs: the bundle's descriptors, decoded at build time. */

const { decodeFileDescriptor, embedDescriptors, embeddedDescriptors, literalOf } = embed as {
  decodeFileDescriptor: (b64: string) => Promise<Message>;
  embedDescriptors: (text: string) => Promise<string | undefined>;
  embeddedDescriptors: import('esbuild').Plugin;
  literalOf: (value: unknown, prototypes?: Map<object, { name: string; text: string }>) => string;
};

const root = join(import.meta.dirname, '../../..');
const gen = join(root, 'src/spark/proto/gen');
const generated = [
  ...readdirSync(join(gen, 'spark/connect')).map((f) => join(gen, 'spark/connect', f)),
  ...readdirSync(join(gen, 'google/rpc')).map((f) => join(gen, 'google/rpc', f)),
].filter((f) => f.endsWith('_pb.ts'));
const sourceFiles: DescFile[] = [
  base.file_spark_connect_base,
  file_spark_connect_commands,
  file_spark_connect_expressions,
  file_spark_connect_relations,
  file_spark_connect_types,
  file_google_rpc_status,
  file_google_protobuf_any,
  file_google_protobuf_duration,
];

/** The value a literal stands for, its prototypes declared first (as the plugin writes them). */
function evaluate(value: unknown): unknown {
  const prototypes = new Map<object, { name: string; text: string }>();
  const expression = literalOf(value, prototypes);
  const declarations = [...prototypes.values()].map((p) => `const ${p.name} = ${p.text};`).join('\n');
  return new Function(`${declarations}\nreturn ${expression};`)() as unknown;
}

/** Same own keys in the same order, same values, same prototype of defaults, all the way down. */
function expectSameShape(actual: unknown, expected: unknown, path = '$'): void {
  if (typeof expected !== 'object' || expected === null) {
    expect(Object.is(actual, expected), `${path}: ${String(actual)} vs ${String(expected)}`).toBe(true);
    return;
  }
  expect(typeof actual, path).toBe('object');
  const a = actual as object;
  if (expected instanceof Uint8Array) {
    expect(a, path).toBeInstanceOf(Uint8Array);
    expect([...(a as Uint8Array)], path).toEqual([...expected]);
    return;
  }
  expect(Array.isArray(a), path).toBe(Array.isArray(expected));
  expect(Reflect.ownKeys(a), path).toEqual(Reflect.ownKeys(expected));
  for (const k of Reflect.ownKeys(expected) as string[])
    expectSameShape((a as Record<string, unknown>)[k], (expected as Record<string, unknown>)[k], `${path}.${k}`);
  const pe = Object.getPrototypeOf(expected) as object;
  const pa = Object.getPrototypeOf(a) as object;
  if (pe === Object.prototype || pe === Array.prototype) expect(pa, `${path} prototype`).toBe(pe);
  else expect({ ...pa }, `${path} prototype`).toEqual({ ...pe });
}

describe('literalOf', () => {
  it('writes every decoded descriptor back as the same objects: own fields (presence), defaults on the shared prototype, same bytes', async () => {
    expect(generated.length).toBeGreaterThanOrEqual(6);
    for (const file of generated) {
      const [, b64] = /\bfileDesc\("([A-Za-z0-9+/=]*)"/.exec(readFileSync(file, 'utf8'))!;
      const decoded = await decodeFileDescriptor(b64!);
      const copy = evaluate(decoded) as typeof decoded;
      expectSameShape(copy, decoded);
      expect(toBinary(FileDescriptorProtoSchema, copy as never)).toEqual(toBinary(FileDescriptorProtoSchema, decoded as never));
    }
  });

  it('shares one prototype per message type, as protobuf-es does', async () => {
    const [, b64] = /\bfileDesc\("([A-Za-z0-9+/=]*)"/.exec(readFileSync(join(gen, 'spark/connect/base_pb.ts'), 'utf8'))!;
    const copy = evaluate(await decodeFileDescriptor(b64!)) as { messageType: { field: object[] }[] };
    const fields = copy.messageType.flatMap((m) => m.field);
    expect(fields.length).toBeGreaterThan(10);
    expect(new Set(fields.map((f) => Object.getPrototypeOf(f) as object)).size).toBe(1);
  });

  it('writes bigints, bytes, negative zero and non-finite numbers; refuses what it could not write back', () => {
    const v = { a: 12345678901234567890n, b: new Uint8Array([0, 255]), c: -0, d: Number.NaN, e: -Infinity, f: [undefined, null, 'x"y'] };
    expectSameShape(evaluate(v), v);
    expect(() => literalOf({ [Symbol('s')]: 1 })).toThrow(/cannot write the key/);
    expect(() => literalOf(JSON.parse('{"__proto__": 1}'))).toThrow(/cannot write the key __proto__/);
    expect(() => literalOf({ f: () => 1 })).toThrow(/cannot write a function/);
    expect(() => literalOf(Object.create(new Map()))).toThrow(/not a plain object of defaults/);
  });

  it('leaves a module without an embedded descriptor alone', async () => {
    expect(await embedDescriptors('export const x = 1;\n')).toBeUndefined();
  });
});

describe('the esbuild plugin', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-embed-'));
  let bundled: Record<string, unknown>;
  let inputs: string[];
  let text: string;

  beforeAll(async () => {
    // The generated modules as the CLI bundle builds them, with the plugin.
    const result = await build({
      absWorkingDir: root,
      stdin: {
        contents: [
          "export * from './src/spark/proto/gen/spark/connect/base_pb.ts';",
          "export { file_spark_connect_commands } from './src/spark/proto/gen/spark/connect/commands_pb.ts';",
          "export { file_spark_connect_expressions } from './src/spark/proto/gen/spark/connect/expressions_pb.ts';",
          "export { file_spark_connect_relations } from './src/spark/proto/gen/spark/connect/relations_pb.ts';",
          "export { file_spark_connect_types } from './src/spark/proto/gen/spark/connect/types_pb.ts';",
          "export { file_google_rpc_status } from './src/spark/proto/gen/google/rpc/status_pb.ts';",
          "export { file_google_protobuf_any, file_google_protobuf_duration } from '@bufbuild/protobuf/wkt';",
          "export { create, toBinary, fromBinary } from '@bufbuild/protobuf';",
        ].join('\n'),
        resolveDir: root,
        loader: 'ts',
      },
      outfile: join(scratch, 'protos.mjs'),
      bundle: true,
      format: 'esm',
      platform: 'node',
      plugins: [embeddedDescriptors],
      metafile: true,
      logLevel: 'silent',
    });
    // What the output holds (esbuild parses the tree-shaken modules too, but writes none of their code).
    inputs = Object.values(result.metafile.outputs).flatMap((o) =>
      Object.entries(o.inputs)
        .filter(([, i]) => i.bytesInOutput > 0)
        .map(([f]) => f),
    );
    text = readFileSync(join(scratch, 'protos.mjs'), 'utf8');
    bundled = (await import(pathToFileURL(join(scratch, 'protos.mjs')).href)) as Record<string, unknown>;
  }, 60_000);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('decodes nothing at run time: no base64 descriptor, no descriptor.proto in the bundle', () => {
    expect(text).not.toMatch(/fileDesc\("/);
    expect(inputs.filter((i) => /descriptor_pb|codegenv2[\\/](file|boot)\.js/.test(i))).toEqual([]);
    expect(inputs.some((i) => i.endsWith('any_pb.js'))).toBe(true);
  });

  it('builds the same files as the generated code: every message, field, enum and service with the same facts', () => {
    const facts = (f: DescFile) => ({
      proto: toBinary(FileDescriptorProtoSchema, f.proto),
      dependencies: f.dependencies.map((d) => d.name),
      messages: [...walk(f.messages)].map((m) => ({
        typeName: m.typeName,
        fields: m.fields.map((x) => [
          x.name,
          x.number,
          x.localName,
          x.jsonName,
          x.fieldKind,
          x.presence,
          x.message?.typeName,
          x.enum?.typeName,
          x.fieldKind === 'list' ? x.packed : undefined,
          (x as { delimitedEncoding?: boolean }).delimitedEncoding,
        ]),
        oneofs: m.oneofs.map((o) => [o.name, o.fields.map((x) => x.name)]),
      })),
      enums: f.enums.map((e) => [e.typeName, e.values.map((v) => [v.name, v.number, v.localName])]),
      services: f.services.map((s) => [s.typeName, s.methods.map((m) => [m.name, m.methodKind, m.input.typeName, m.output.typeName])]),
    });
    const bundledFiles = [
      bundled.file_spark_connect_base,
      bundled.file_spark_connect_commands,
      bundled.file_spark_connect_expressions,
      bundled.file_spark_connect_relations,
      bundled.file_spark_connect_types,
      bundled.file_google_rpc_status,
      bundled.file_google_protobuf_any,
      bundled.file_google_protobuf_duration,
    ] as DescFile[];
    bundledFiles.forEach((f, i) => expect(facts(f)).toEqual(facts(sourceFiles[i]!)));
  });

  it('encodes a request byte for byte as the generated code does', () => {
    const init = {
      sessionId: '00112233-4455-6677-8899-aabbccddeeff',
      userContext: { userId: 'u' },
      clientType: 'lakehouse-jobs',
      analyze: { case: 'sparkVersion' as const, value: {} },
    };
    const ours = toBinary(base.AnalyzePlanRequestSchema, create(base.AnalyzePlanRequestSchema, init));
    const b = bundled as { create: typeof create; toBinary: typeof toBinary; AnalyzePlanRequestSchema: DescMessage };
    expect(b.toBinary(b.AnalyzePlanRequestSchema, b.create(b.AnalyzePlanRequestSchema, init))).toEqual(ours);
    expect(ours.length).toBeGreaterThan(40);
  });
});

function* walk(messages: readonly DescMessage[]): Generator<DescMessage> {
  for (const m of messages) {
    yield m;
    yield* walk(m.nestedMessages);
  }
}
