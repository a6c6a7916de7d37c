/**
 * Compares our Spark Connect schema subset with the server's own descriptors, element by element.
 * Everything we declare must exist on their side with the same wire facts; what we leave out is
 * fine (a decoder skips unknown fields). Used by test/integration/spark/proto-conformance.test.ts.
 */
import { isFieldSet } from '@bufbuild/protobuf';
import {
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  FieldDescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  type FileDescriptorSet,
  type ServiceDescriptorProto,
} from '@bufbuild/protobuf/wkt';

interface Index {
  messages: Map<string, DescriptorProto>;
  enums: Map<string, EnumDescriptorProto>;
  services: Map<string, ServiceDescriptorProto>;
}

function index(set: FileDescriptorSet, onlyPackage?: string): Index {
  const idx: Index = { messages: new Map(), enums: new Map(), services: new Map() };
  const addMessage = (m: DescriptorProto, scope: string): void => {
    const name = `${scope}.${m.name}`;
    idx.messages.set(name, m);
    for (const n of m.nestedType) addMessage(n, name);
    for (const e of m.enumType) idx.enums.set(`${name}.${e.name}`, e);
  };
  for (const file of set.file) {
    if (onlyPackage !== undefined && file.package !== onlyPackage) continue;
    const scope = file.package ? `.${file.package}` : '';
    for (const m of file.messageType) addMessage(m, scope);
    for (const e of file.enumType) idx.enums.set(`${scope}.${e.name}`, e);
    for (const s of file.service) idx.services.set(`${scope}.${s.name}`, s);
  }
  return idx;
}

/** The real (non-synthetic) oneof a field belongs to, or '' when none. */
function oneofOf(m: DescriptorProto, f: FieldDescriptorProto): string {
  if (f.proto3Optional || !isFieldSet(f, FieldDescriptorProtoSchema.field.oneofIndex)) return '';
  return m.oneofDecl[f.oneofIndex]?.name ?? `#${f.oneofIndex}`;
}

function describeField(m: DescriptorProto, f: FieldDescriptorProto): Record<string, string> {
  return {
    name: f.name,
    type: FieldDescriptorProto_Type[f.type] ?? String(f.type),
    label: FieldDescriptorProto_Label[f.label] ?? String(f.label),
    optional: String(f.proto3Optional),
    type_name: f.typeName,
    oneof: oneofOf(m, f),
  };
}

/**
 * Every difference between the elements of `ours` (restricted to `pkg`) and `theirs`, as one
 * readable line each. Empty means wire compatible.
 */
export function compareDescriptorSets(ours: FileDescriptorSet, theirs: FileDescriptorSet, pkg = 'spark.connect'): string[] {
  const mine = index(ours, pkg);
  const ref = index(theirs);
  const problems: string[] = [];

  for (const [name, m] of mine.messages) {
    const t = ref.messages.get(name);
    if (!t) {
      problems.push(`message ${name}: not in the server's schema`);
      continue;
    }
    if (Boolean(m.options?.mapEntry) !== Boolean(t.options?.mapEntry)) {
      problems.push(`message ${name}: map entry ${Boolean(m.options?.mapEntry)}, theirs ${Boolean(t.options?.mapEntry)}`);
    }
    for (const f of m.field) {
      const tf = t.field.find((x) => x.number === f.number);
      if (!tf) {
        const byName = t.field.find((x) => x.name === f.name);
        problems.push(`field ${name}.${f.name} = ${f.number}: no field with that number` + (byName ? ` (theirs is ${byName.name} = ${byName.number})` : ''));
        continue;
      }
      const a = describeField(m, f);
      const b = describeField(t, tf);
      for (const key of Object.keys(a)) {
        if (a[key] !== b[key]) problems.push(`field ${name}.${f.name} = ${f.number}: ${key} is ${a[key]}, theirs ${b[key]}`);
      }
    }
  }

  for (const [name, e] of mine.enums) {
    const t = ref.enums.get(name);
    if (!t) {
      problems.push(`enum ${name}: not in the server's schema`);
      continue;
    }
    for (const v of e.value) {
      const tv = t.value.find((x) => x.name === v.name);
      if (!tv) problems.push(`enum value ${name}.${v.name}: not in the server's schema`);
      else if (tv.number !== v.number) problems.push(`enum value ${name}.${v.name}: number ${v.number}, theirs ${tv.number}`);
    }
  }

  for (const [name, s] of mine.services) {
    const t = ref.services.get(name);
    if (!t) {
      problems.push(`service ${name}: not in the server's schema`);
      continue;
    }
    for (const method of s.method) {
      const tm = t.method.find((x) => x.name === method.name);
      if (!tm) {
        problems.push(`rpc ${name}.${method.name}: not in the server's schema`);
        continue;
      }
      const facts = (x: typeof method) => ({
        input: x.inputType,
        output: x.outputType,
        client_streaming: String(x.clientStreaming),
        server_streaming: String(x.serverStreaming),
      });
      const a = facts(method);
      const b = facts(tm);
      for (const key of Object.keys(a) as (keyof typeof a)[]) {
        if (a[key] !== b[key]) problems.push(`rpc ${name}.${method.name}: ${key} is ${a[key]}, theirs ${b[key]}`);
      }
    }
  }
  return problems;
}

/** How many elements of `pkg` `set` declares (so a test can show it compared something). */
export function countElements(set: FileDescriptorSet, pkg = 'spark.connect'): { messages: number; fields: number; enums: number; methods: number } {
  const idx = index(set, pkg);
  let fields = 0;
  for (const m of idx.messages.values()) fields += m.field.length;
  let methods = 0;
  for (const s of idx.services.values()) methods += s.method.length;
  return { messages: idx.messages.size, fields, enums: idx.enums.size, methods };
}
