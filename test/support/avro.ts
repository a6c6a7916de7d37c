import avro from 'avsc';
import { requireNeed } from './needs.js';

/**
 * Avro records as a Confluent producer writes them (magic byte 0, the schema id as 4 big-endian
 * bytes, the Avro binary body, encoded by avsc), and the local schema registry
 * (scripts/schema-registry, Apicurio's Confluent-compatible API) they are registered in.
 */

/** The registry's Confluent-compatible API, as scripts/schema-registry start printed it. */
export function schemaRegistryUrl(): string {
  requireNeed('the schema registry', 'schema-registry');
  const url = process.env.LAKEHOUSE_SCHEMA_REGISTRY_URL;
  if (!url) throw new Error('LAKEHOUSE_SCHEMA_REGISTRY_URL is not set: the need schema-registry starts the registry');
  return url;
}

/** Register a writer schema under a subject (a new version, or the existing one's id): its schema id. */
export async function registerSchema(subject: string, schema: object): Promise<number> {
  const res = await fetch(`${schemaRegistryUrl()}/subjects/${encodeURIComponent(subject)}/versions`, {
    method: 'POST',
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
    body: JSON.stringify({ schema: JSON.stringify(schema) }),
  });
  const body = (await res.json()) as { id?: number };
  if (!res.ok || typeof body.id !== 'number') throw new Error(`the registry refused the schema for ${subject}: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

/** A record in the Confluent wire format: the header for `id`, then `value` in `schema`'s binary encoding. */
export function confluentAvro(id: number, schema: object, value: Record<string, unknown>): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(id, 1);
  return Buffer.concat([header, avro.Type.forSchema(schema as avro.Schema).toBuffer(value)]);
}

/** An Avro decimal's bytes: the unscaled value, big-endian two's complement, as few bytes as hold it. */
export function decimalBytes(unscaled: bigint): Buffer {
  const bytes: number[] = [];
  for (let v = unscaled; ; v >>= 8n) {
    bytes.unshift(Number(v & 0xffn));
    const top = bytes[0]! & 0x80;
    if ((v >> 8n === 0n && !top) || (v >> 8n === -1n && top)) break;
  }
  return Buffer.from(bytes);
}
