import { ExitCode, UnavailableError, InputMissingError, LakehouseError } from '../core/errors.js';
import { registerSecretValue } from '../core/secrets.js';
import type { RegisteredSchema } from '../jobs/steps.js';
import { inlineReferences } from '../jobs/bronze/kafka-avro.js';
import type { SchemaRegistryRef } from '../jobs/template.js';

/**
 * The runner's client of a schema registry (the Confluent Schema Registry API: Confluent's,
 * Apicurio's `/apis/ccompat/v7`, Karapace): every version of a subject, with its schema id and
 * writer schema (its references inlined), asked before the run's first step (executor.ts). The URL and password are revealed here
 * only; an error names the registry by its platform name, never its URL.
 */

/** A registry that does not answer, or answers with a server error (69, retryable). */
export class RegistryUnavailableError extends UnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, code: 'SCHEMA_REGISTRY_UNAVAILABLE' });
  }
}

/** A registry that refuses the credentials (77). */
export class RegistryAuthError extends LakehouseError {
  readonly exitCode = ExitCode.permission;
  readonly category = 'permission' as const;
  readonly code = 'SCHEMA_REGISTRY_AUTH';
}

/** How long one request may take. */
const REQUEST_MS = 30_000;

type Fetch = typeof fetch;

/** Every version of each subject (ascending), Avro only: a version of another schema type is left out. */
export async function subjectSchemas(
  ref: SchemaRegistryRef,
  subjects: readonly string[],
  configPath: string,
  opts: { signal?: AbortSignal; fetch?: Fetch } = {},
): Promise<RegisteredSchema[]> {
  // Credentials in the URL (https://user:password@host/…) become basic authentication: fetch sends
  // none from a URL, and they are scrubbed like every secret.
  const url = new URL(ref.url.reveal());
  let auth = ref.basicAuth ? `${ref.basicAuth.username}:${ref.basicAuth.password.reveal()}` : undefined;
  if (url.username || url.password) {
    for (const v of [url.password, decodeURIComponent(url.password)]) if (v) registerSecretValue(v);
    auth ??= `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    url.username = '';
    url.password = '';
  }
  const base = url.href.replace(/\/+$/, '');
  const headers: Record<string, string> = { accept: 'application/vnd.schemaregistry.v1+json, application/json' };
  if (auth) headers.authorization = `Basic ${Buffer.from(auth, 'utf8').toString('base64')}`;
  const where = `schema registry "${ref.name}"`;
  const get = async (path: string, subject: string, hint = "the topic's values are registered as <topic>-value"): Promise<unknown> => {
    let res: Response;
    try {
      const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(REQUEST_MS)]) : AbortSignal.timeout(REQUEST_MS);
      res = await (opts.fetch ?? fetch)(`${base}${path}`, { headers, signal });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      // The cause's code only (ECONNREFUSED, a timeout): its text may name the URL.
      const cause = (e as { cause?: { code?: unknown } }).cause?.code;
      throw new RegistryUnavailableError(`${configPath}: ${where} did not answer (${typeof cause === 'string' ? cause : (e as Error).name})`);
    }
    if (res.status === 401 || res.status === 403)
      throw new RegistryAuthError(`${configPath}: ${where} refused the platform's credentials (HTTP ${res.status})`);
    if (res.status === 404) throw new InputMissingError(`${configPath}: subject "${subject}" does not exist in ${where} (${hint})`);
    if (!res.ok) throw new RegistryUnavailableError(`${configPath}: ${where} answered HTTP ${res.status} for subject "${subject}"`);
    try {
      return await res.json();
    } catch {
      throw new RegistryUnavailableError(`${configPath}: ${where} answered subject "${subject}" with something that is not JSON`);
    }
  };
  // A version's references (the Confluent API's `references`: schemas of other subjects it names),
  // each read once and inlined, so every schema handed on is self-contained.
  const docs = new Map<string, Promise<string>>();
  const resolved = (subject: string, version: number, chain: readonly string[]): Promise<string> => {
    const key = `${subject}\u0000${version}`;
    if (chain.includes(key))
      throw new RegistryUnavailableError(`${configPath}: ${where} has schemas that reference each other in a cycle (subject "${subject}")`);
    if (chain.length > MAX_REFERENCE_DEPTH)
      throw new RegistryUnavailableError(`${configPath}: ${where} has references nested deeper than ${MAX_REFERENCE_DEPTH} (subject "${subject}")`);
    let doc = docs.get(key);
    if (!doc) {
      doc = (async () => {
        const d = (await get(
          `/subjects/${encodeURIComponent(subject)}/versions/${version}`,
          subject,
          'a schema of the topic references it',
        )) as VersionDoc | null;
        if (!d || typeof d.schema !== 'string')
          throw new RegistryUnavailableError(`${configPath}: ${where} answered version ${version} of subject "${subject}" without a schema`);
        return inline(d, [...chain, key]);
      })();
      docs.set(key, doc);
    }
    return doc;
  };
  const inline = async (d: VersionDoc, chain: readonly string[]): Promise<string> => {
    const refs = Array.isArray(d.references) ? d.references : [];
    const named = new Map<string, string>();
    for (const r of refs) {
      if (!r || typeof r.name !== 'string' || typeof r.subject !== 'string' || !Number.isInteger(r.version))
        throw new RegistryUnavailableError(`${configPath}: ${where} answered a reference without a name, a subject and a version`);
      named.set(r.name, await resolved(r.subject, r.version as number, chain));
    }
    try {
      return inlineReferences(d.schema as string, named);
    } catch {
      throw new RegistryUnavailableError(`${configPath}: ${where} answered a schema that is not JSON`);
    }
  };
  const out: RegisteredSchema[] = [];
  for (const subject of subjects) {
    const s = encodeURIComponent(subject);
    const versions = await get(`/subjects/${s}/versions`, subject);
    if (!Array.isArray(versions) || !versions.every((v) => Number.isInteger(v)))
      throw new RegistryUnavailableError(`${configPath}: ${where} answered the versions of subject "${subject}" with something that is not a list of versions`);
    for (const v of [...(versions as number[])].sort((a, b) => a - b)) {
      const doc = (await get(`/subjects/${s}/versions/${v}`, subject)) as VersionDoc | null;
      if (!doc || !Number.isInteger(doc.id) || typeof doc.schema !== 'string')
        throw new RegistryUnavailableError(`${configPath}: ${where} answered version ${v} of subject "${subject}" without an id and a schema`);
      if (doc.schemaType !== undefined && doc.schemaType !== 'AVRO') continue;
      out.push({ subject, version: v, id: doc.id as number, schema: await inline(doc, [`${subject}\u0000${v}`]) });
    }
  }
  return out;
}

/** A subject's version as the registry answers it. */
interface VersionDoc {
  readonly id?: unknown;
  readonly schema?: unknown;
  readonly schemaType?: unknown;
  readonly references?: readonly ({ readonly name?: unknown; readonly subject?: unknown; readonly version?: unknown } | null)[];
}

/** How deep references may nest (a schema naming one naming one …). */
const MAX_REFERENCE_DEPTH = 16;
