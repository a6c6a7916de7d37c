import type { z } from 'zod';
import { ConfigError, type ConfigIssue, type LocatedIssue } from '../errors.js';
import { isUnderRoot } from '../tenant.js';
import { registerConnectionSecrets } from '../secrets.js';
import { type FileIdentity, originOf, parseHocon, readHoconFile } from './hocon.js';
import { localPlatformDefaults, type PlatformConfig, platformSchema } from './platform.js';
import { formatPath, keysAt, toConfigIssues } from './validate.js';
import { closest } from './closest.js';
import { own } from './own.js';

/**
 * Config loading without templates: the platform config, a job config (+ `--set` overrides) parsed
 * under its environment allow-list, and validation against a schema and the tenant policy. Every
 * problem is collected and reported at once, each with its path; nothing here talks to Spark or
 * knows the job catalog (the runner layer, src/runner/load-job.ts, picks the template and builds the plan).
 */

export interface LoadRequest {
  configFile: string;
  envFile?: string;
  /**
   * The tenant the orchestrator binds the run to (`--tenant`, `LAKEHOUSE_TENANT`): trusted. The job
   * config's `tenant.id` is the tenant's own claim and must equal it.
   */
  tenant?: string;
  job?: string;
  overrides?: string[];
  env: Record<string, string | undefined>;
  runId: string;
  logicalDate?: string;
}

/** Parsed but not yet validated: enough to name the job in a status document when validation fails. */
export interface JobIdentity {
  template?: string;
  schemaVersion?: number;
  name?: string;
  tenant?: string;
}

/**
 * A job config parsed (not yet validated) under the platform's environment allow-list. It includes
 * only files of its own folder tree (after links and `..`), never one of `platformFiles` (the
 * platform config and the files it includes, by real path or identity, even in that tree), so no
 * include or substitution of it can reach a platform value.
 */
export async function readJobConfig(
  req: LoadRequest,
  platform: PlatformConfig,
  origins?: Map<string, string>,
  platformFiles: readonly FileIdentity[] = [],
): Promise<Record<string, unknown>> {
  const allowed = new Set(platform['config-env'].allow);
  return parseHocon([await readHoconFile(req.configFile)], {
    ...(origins ? { origins } : {}),
    forbidden: platformFiles,
    forbiddenReason: 'it is the platform config or a file the platform config includes (a job config cannot read platform values)',
    env: req.env,
    envAllowList: (name) => allowed.has(name),
    envHint: req.envFile
      ? "job configs read only the variables listed in the platform config's config-env.allow"
      : 'without a platform config (--env), job configs read no environment variables',
    overrides: req.overrides ?? [],
  });
}

/** What a parsed config says about itself: enough to name it in a status when validation fails. */
export function identify(raw: Record<string, unknown>, identity: JobIdentity): { named?: string; schemaVersion: unknown } {
  const job = isObject(raw.job) ? raw.job : {};
  const tenantRaw = isObject(raw.tenant) ? raw.tenant : {};
  identity.name = typeof job.name === 'string' ? job.name : undefined;
  identity.tenant = typeof tenantRaw.id === 'string' ? tenantRaw.id : undefined;
  return { ...(typeof job.template === 'string' ? { named: job.template } : {}), schemaVersion: job['schema-version'] };
}

/**
 * A parsed config against its template version's schema and the platform's tenant policy: the
 * validated config, or one ConfigError listing every problem with its path.
 */
export function validateJobConfig<C>(
  raw: Record<string, unknown>,
  schema: z.ZodType<C>,
  platform: PlatformConfig,
  origins?: ReadonlyMap<string, string>,
  bound?: string,
): C {
  const issues: LocatedIssue[] = [];
  const parsed = schema.safeParse(raw);
  const origin = origins && ((p: readonly PropertyKey[]) => originOf(origins, p));
  if (!parsed.success) issues.push(...toConfigIssues(parsed.error, (p) => keysAt(schema, p), origin, raw));
  for (const i of [...prototypeKeys(raw), ...tenantPolicy(raw, platform, bound)]) {
    const at = origin?.(i.path.split('.'));
    issues.push({ ...i, ...(at ? { at } : {}) });
  }
  if (!parsed.success || issues.length > 0) throw new ConfigError(dedupe(issues));
  return parsed.data;
}

/**
 * The platform config is trusted: it may read any environment variable except those that can hold a
 * credential (secrets stay `{ env = NAME }` references there too). A token inside its Spark remote is
 * registered for scrubbing at once, so `plan` and `validate` never print it either.
 */
export async function loadPlatform(
  file: string,
  env: Record<string, string | undefined>,
  issues: LocatedIssue[],
  files?: FileIdentity[],
): Promise<PlatformConfig> {
  const origins = new Map<string, string>();
  const envReads = new Map<string, string[]>();
  const raw = await parseHocon([await readHoconFile(file)], { env, envAllowList: () => true, origins, envReads, ...(files ? { files } : {}) }).catch(
    (e: unknown) => {
      // A problem in the platform file (syntax, a refused substitution) names a platform path, as its schema's problems do.
      if (!(e instanceof ConfigError)) throw e;
      throw new ConfigError(
        e.issues.map((i, n) => ({
          path: i.path ? `(platform) ${i.path}` : '(platform)',
          message: i.message,
          ...(e.locations[n] ? { at: e.locations[n] } : {}),
        })),
        { cause: e.cause },
      );
    },
  );
  const parsed = platformSchema.safeParse(raw);
  if (parsed.success) registerConnectionSecrets(parsed.data.spark.remote);
  else if (isObject(raw.spark) && typeof raw.spark.remote === 'string') registerConnectionSecrets(raw.spark.remote);
  const shared = sharedVariables(parsed.success ? parsed.data['config-env'].allow : [], envReads);
  const protoKeys = prototypeKeys(raw);
  if (parsed.success && !shared.length && !protoKeys.length) return parsed.data;
  if (!parsed.success)
    for (const i of toConfigIssues(
      parsed.error,
      (p) => keysAt(platformSchema, p),
      (p) => originOf(origins, p),
      raw,
    ))
      issues.push({ ...i, path: `(platform) ${i.path}` });
  for (const i of [...protoKeys, ...shared]) {
    const at = originOf(origins, i.path.split('.'));
    issues.push({ ...i, path: `(platform) ${i.path}`, ...(at ? { at } : {}) });
  }
  return localPlatformDefaults;
}

/**
 * Where the platform config reads a variable a job config may read too (`config-env.allow`), a job
 * config's `${VAR}` would resolve to that platform value (another tenant's JDBC url, a broker
 * list). Only the tenants' storage roots may share one (the tenant's own config names its root).
 */
function sharedVariables(allow: readonly string[], reads: ReadonlyMap<string, readonly string[]>): ConfigIssue[] {
  const shareable = /^tenants\.[^.]+\.(storage-roots|read-roots)$/;
  return allow.flatMap((name, i) => {
    const where = (reads.get(name) ?? []).filter((p) => !shareable.test(p));
    if (!where.length) return [];
    return [
      {
        path: `config-env.allow[${i}]`,
        message: `${name} is also read by the platform config at ${where.join(', ')}: a job config reading it would see that platform value (give job configs a variable of their own)`,
      },
    ];
  });
}

/**
 * Keys named `__proto__`: zod drops them from records without a word (a record key of that name
 * would replace the prototype), so a config that has one is refused where it is written.
 */
export function prototypeKeys(v: unknown, at: readonly (string | number)[] = []): ConfigIssue[] {
  if (Array.isArray(v)) return v.flatMap((x, i) => prototypeKeys(x, [...at, i]));
  if (!isObject(v)) return [];
  return Object.keys(v).flatMap((k) =>
    k === '__proto__'
      ? [{ path: formatPath([...at, k]), message: 'is not a valid key (__proto__ names the prototype of a JavaScript object)' }]
      : prototypeKeys(v[k], [...at, k]),
  );
}

/**
 * A job is for the tenant the orchestrator bound it to, when it did (`bound`: trusted, unlike the
 * config's claim), and a tenant may only use the storage roots the platform allows it (when the
 * platform lists tenants).
 */
function tenantPolicy(config: Record<string, unknown>, platform: PlatformConfig, bound?: string): ConfigIssue[] {
  const tenant = isObject(config.tenant) ? config.tenant : {};
  const id = tenant.id;
  const root = tenant['storage-root'];
  if (typeof id !== 'string') return [];
  if (bound !== undefined && id !== bound)
    return [
      { path: 'tenant.id', message: `is "${id}", but the orchestrator runs this job for tenant "${bound}" (--tenant): a job config cannot choose its tenant` },
    ];
  if (!platform.tenants) return [];
  const allowed = own(platform.tenants, id);
  if (!allowed) {
    const known = Object.keys(platform.tenants);
    const near = closest(id, known);
    return [{ path: 'tenant.id', message: `tenant "${id}" is not known to the platform config${near ? `; did you mean "${near}"?` : ''}` }];
  }
  if (typeof root === 'string' && !isUnderRoot(root, allowed['storage-roots']))
    return [
      { path: 'tenant.storage-root', message: `is outside the storage roots the platform allows tenant "${id}" (${allowed['storage-roots'].join(', ')})` },
    ];
  return [];
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function dedupe<I extends ConfigIssue>(issues: I[]): I[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.path}\u0000${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
