// The bundle's protobuf descriptors, decoded at build time (issue 13, cold start).
//
// protobuf-es code embeds each .proto file as a base64 FileDescriptorProto: `fileDesc("Ch…", deps)`
// decodes it at import, in JavaScript on Node 20 (no native Uint8Array.fromBase64), with
// protobuf-es's reflective decoder, which first boots google/protobuf/descriptor.proto itself.
// `ping` paid ≈ 20 ms of CPU for that before its first RPC, every process, for bytes that never
// change. This esbuild plugin decodes them once, at build time, with the same protobuf-es, and
// writes the decoded FileDescriptorProto into the bundle as an object literal (each message
// object with the prototype of field defaults protobuf-es gives it, so field presence reads the
// same); at run time `embeddedFileDesc` does the rest of what `fileDesc` does (dependencies, the
// file registry). The generated sources stay untouched (tests and tsx run them as generated).
//
// Applies to every module of the bundle that calls protobuf-es's `fileDesc("…")`: our generated
// code under src/spark/proto/gen and the well-known types it imports from @bufbuild/protobuf.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
// protobuf-es's ES module build; its package exports hide the two private helpers used below
// (protobuf-es's own fileDesc uses them), hence the file paths.
const esm = join(dirname(require.resolve('@bufbuild/protobuf')), '../esm');
const RUNTIME = 'lakehouse-embedded-file-desc';

/** `fileDesc("<base64>"` as protoc-gen-es writes it; the base64 alphabet only, so no escapes. */
const CALL = /\bfileDesc\("([A-Za-z0-9+/=]*)"/g;

/**
 * The FileDescriptorProto of one base64 string as `fileDesc` builds it before its registry: decoded
 * by protobuf-es, JSON names restored (protoc leaves out the ones it can derive).
 */
export async function decodeFileDescriptor(base64) {
  const { fromBinary } = await import(pathToFileURL(join(esm, 'index.js')).href);
  const { FileDescriptorProtoSchema } = await import(pathToFileURL(join(esm, 'wkt/index.js')).href);
  const { restoreJsonNames } = await import(pathToFileURL(join(esm, 'codegenv2/restore-json-names.js')).href);
  const root = fromBinary(FileDescriptorProtoSchema, Buffer.from(base64, 'base64'));
  root.messageType.forEach(restoreJsonNames);
  return root;
}

/**
 * A JavaScript expression that recreates `value` (a decoded protobuf-es message): the same own
 * properties in the same order, and for messages with defaults on a prototype (proto2, e.g. every
 * descriptor message) that prototype, shared per message type as protobuf-es shares it: presence
 * of a proto2 field is an own property, which the registry reads (default values, JSON names).
 * `prototypes` collects the prototypes' declarations (`const P0 = {…}`), to put before the expression.
 */
export function literalOf(value, prototypes = new Map()) {
  if (value === undefined) return 'void 0';
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (Object.is(value, -0)) return '-0';
      if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'object':
      break;
    default:
      throw new Error(`embedded descriptors: cannot write a ${typeof value}`);
  }
  if (value instanceof Uint8Array) return `new Uint8Array([${value.join(',')}])`;
  if (Array.isArray(value)) return `[${value.map((v) => literalOf(v, prototypes)).join(',')}]`;
  const proto = Object.getPrototypeOf(value);
  const members = [];
  if (proto !== Object.prototype) {
    if (proto === null || Object.getPrototypeOf(proto) !== Object.prototype) {
      throw new Error('embedded descriptors: a message prototype that is not a plain object of defaults');
    }
    if (!prototypes.has(proto)) prototypes.set(proto, { name: `P${prototypes.size}`, text: literalOf({ ...proto }, prototypes) });
    members.push(`__proto__:${prototypes.get(proto).name}`);
  }
  for (const key of Reflect.ownKeys(value)) {
    // A symbol key or a data key "__proto__" could not be written back as it was.
    if (typeof key !== 'string' || key === '__proto__') throw new Error(`embedded descriptors: cannot write the key ${String(key)}`);
    members.push(`${JSON.stringify(key)}:${literalOf(value[key], prototypes)}`);
  }
  return `{${members.join(',')}}`;
}

/** Module text with every `fileDesc("<base64>", deps)` replaced by `embeddedFileDesc(<decoded>, deps)`. */
export async function embedDescriptors(text) {
  const found = [...text.matchAll(CALL)];
  if (found.length === 0) return undefined;
  const prototypes = new Map();
  const literals = [];
  for (const [, base64] of found) literals.push(literalOf(await decodeFileDescriptor(base64), prototypes));
  let i = 0;
  const replaced = text.replace(CALL, () => `embeddedFileDesc(${literals[i++]}`);
  const declarations = [...prototypes.values()].map((p) => `const ${p.name} = ${p.text};`).join(' ');
  // One line before the module's first: the prototypes are declared before the body reads them,
  // and the generated file keeps its line numbers in source maps.
  return `import { embeddedFileDesc } from ${JSON.stringify(RUNTIME)}; ${declarations} ${replaced}`;
}

/** What `fileDesc` does after decoding (protobuf-es codegenv2/file.js), for an already decoded file. */
const runtime = `import { createEmbeddedFileRegistry } from ${JSON.stringify(join(esm, 'registry.js'))};
export function embeddedFileDesc(root, imports) {
  root.dependency = imports?.map((f) => f.proto.name) ?? [];
  const reg = createEmbeddedFileRegistry(root, (protoFileName) => imports?.find((f) => f.proto.name === protoFileName));
  return reg.getFile(root.name);
}
`;

/** The esbuild plugin: every `*_pb.ts` / `*_pb.js` module with an embedded descriptor. */
export const embeddedDescriptors = {
  name: 'embedded-descriptors',
  setup(b) {
    b.onResolve({ filter: new RegExp(`^${RUNTIME}$`) }, () => ({ path: RUNTIME, namespace: RUNTIME }));
    b.onLoad({ filter: /.*/, namespace: RUNTIME }, () => ({ contents: runtime, loader: 'js', resolveDir: esm }));
    b.onLoad({ filter: /_pb\.(ts|js)$/ }, async (args) => {
      const contents = await embedDescriptors(await readFile(args.path, 'utf8'));
      return contents === undefined ? undefined : { contents, loader: args.path.endsWith('.ts') ? 'ts' : 'js' };
    });
  },
};
