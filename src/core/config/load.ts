import { ConfigError, type ConfigIssue, UsageError } from '../errors.js';
import { isUnderRoot, tenantContext, type TenantContext } from '../tenant.js';
import { findTemplate } from '../../jobs/registry.js';
import type { CatalogRef, JdbcConnectionRef, JobContext, JobPlan, JobTemplate, TemplateVersion } from '../../jobs/template.js';
import { registerConnectionSecrets, Secret } from '../secrets.js';
import { parseHocon, readHoconFile } from './hocon.js';
import { localPlatformDefaults, type PlatformConfig, platformSchema, resolveSecret, type SecretRef } from './platform.js';
import { keysAt, toConfigIssues } from './validate.js';

/**
 * The one config loader: job config (+ `--set` overrides) and platform config → a validated job,
 * its tenant context and its plan. Every problem is collected and reported at once, each with its
 * path; nothing here talks to Spark.
 */

export interface LoadRequest {
  configFile: string;
  envFile?: string;
  job?: string;
  overrides?: string[];
  env: Record<string, string | undefined>;
  runId: string;
  logicalDate?: string;
}

export interface LoadedJob {
  template: JobTemplate;
  version: TemplateVersion;
  config: Record<string, any>;
  platform: PlatformConfig;
  tenant: TenantContext;
  context: JobContext;
  plan: JobPlan;
}

/** Parsed but not yet validated: enough to name the job in a status document when validation fails. */
export interface JobIdentity {
  template?: string;
  schemaVersion?: number;
  name?: string;
  tenant?: string;
}

export async function loadJob(req: LoadRequest, identity: JobIdentity = {}): Promise<LoadedJob> {
  // The platform config first: it says which environment variables the job config may read.
  const issues: ConfigIssue[] = [];
  const platform = req.envFile ? await loadPlatform(req.envFile, req.env, issues) : localPlatformDefaults;
  const allowed = new Set(platform['config-env'].allow);
  const raw = await parseHocon([await readHoconFile(req.configFile)], {
    env: req.env,
    envAllowList: (name) => allowed.has(name),
    envHint: req.envFile
      ? 'job configs read only the variables listed in the platform config\'s config-env.allow'
      : 'without a platform config (--env), job configs read no environment variables',
    overrides: req.overrides ?? [],
  });
  const job = isObject(raw.job) ? raw.job : {};
  const tenantRaw = isObject(raw.tenant) ? raw.tenant : {};
  identity.name = typeof job.name === 'string' ? job.name : undefined;
  identity.tenant = typeof tenantRaw.id === 'string' ? tenantRaw.id : undefined;

  const named = typeof job.template === 'string' ? job.template : undefined;
  if (req.job && named && req.job !== named)
    throw new ConfigError([{ path: 'job.template', message: `is "${named}" but --job says "${req.job}"` }]);
  const templateName = req.job ?? named;
  if (!templateName) throw new UsageError('no job template: pass --job <template> or set job.template in the config');
  identity.template = templateName;
  const template = findTemplate(templateName);

  const wanted = job['schema-version'];
  const supported = template.versions.map((v) => v.version);
  if (wanted === undefined)
    throw new ConfigError([{ path: 'job.schema-version', message: `is required (${template.name} supports ${supported.join(', ')})` }]);
  const version = template.versions.find((v) => v.version === wanted);
  if (!version)
    throw new ConfigError([
      { path: 'job.schema-version', message: `${typeof wanted === 'bigint' ? String(wanted) : JSON.stringify(wanted)} is not supported by ${template.name} (supported: ${supported.join(', ')})` },
    ]);
  identity.schemaVersion = version.version;

  const parsed = version.schema.safeParse(raw);
  if (!parsed.success) issues.push(...toConfigIssues(parsed.error, (p) => keysAt(version.schema, p)));
  issues.push(...tenantPolicy(raw, platform));
  if (!parsed.success || issues.length > 0) throw new ConfigError(dedupe(issues));
  const config = parsed.data as Record<string, any>;

  const tenant = tenantContext(config.tenant.id, config.tenant['storage-root']);
  const context: JobContext = {
    tenant,
    runId: req.runId,
    ...(req.logicalDate ? { logicalDate: req.logicalDate } : {}),
    catalog: (name, path) => resolveCatalog(platform, name, path),
    jdbcConnection: (name, path) => resolveJdbcConnection(platform, name, path, req.env),
    inlineJdbcUrls: platform.jdbc['inline-urls'] === 'allow',
    secret: (ref, path) => deferredSecret(ref, path, req.env),
  };
  // Templates may reject combinations only the plan reveals (an unknown catalog): still config errors.
  const plan = version.plan(context, config);
  return { template, version, config, platform, tenant, context, plan };
}

/**
 * The platform config is trusted: it may read any environment variable except those that can hold a
 * credential (secrets stay `{ env = NAME }` references there too). A token inside its Spark remote is
 * registered for scrubbing at once, so `plan` and `validate` never print it either.
 */
export async function loadPlatform(file: string, env: Record<string, string | undefined>, issues: ConfigIssue[]): Promise<PlatformConfig> {
  const raw = await parseHocon([await readHoconFile(file)], { env, envAllowList: () => true });
  const parsed = platformSchema.safeParse(raw);
  if (parsed.success) registerConnectionSecrets(parsed.data.spark.remote);
  else if (isObject(raw.spark) && typeof raw.spark.remote === 'string') registerConnectionSecrets(raw.spark.remote);
  if (parsed.success) return parsed.data;
  for (const i of toConfigIssues(parsed.error, (p) => keysAt(platformSchema, p)))
    issues.push({ path: `(platform) ${i.path}`, message: i.message });
  return localPlatformDefaults;
}

function resolveCatalog(platform: PlatformConfig, name: string | undefined, path: string): CatalogRef {
  const entries = Object.entries(platform.catalogs);
  if (name === undefined) {
    const def = entries.find(([, c]) => c.default);
    if (!def) throw new ConfigError([{ path, message: 'is required: the platform config names no default catalog' }]);
    return { name: def[0], format: def[1].format };
  }
  const found = platform.catalogs[name];
  if (!found)
    throw new ConfigError([{ path, message: `catalog "${name}" is not configured by the platform (configured: ${entries.map(([n]) => n).join(', ') || 'none'})` }]);
  return { name, format: found.format };
}

function resolveJdbcConnection(platform: PlatformConfig, name: string, path: string, env: Record<string, string | undefined>): JdbcConnectionRef {
  const c = platform.jdbc.connections[name];
  if (!c) {
    const known = Object.keys(platform.jdbc.connections);
    throw new ConfigError([{ path, message: `connection "${name}" is not configured by the platform (jdbc.connections: ${known.join(', ') || 'none'})` }]);
  }
  return {
    name,
    url: c.url,
    ...(c.user === undefined ? {} : { user: c.user }),
    ...(c.driver === undefined ? {} : { driver: c.driver }),
    ...(c.password === undefined ? {} : { password: deferredSecret(c.password, `(platform) jdbc.connections.${name}.password`, env) }),
  };
}

/**
 * Secrets are resolved at the moment of use (the executor reveals them), not when the config is
 * loaded: `validate` and `plan` need no secrets, and a missing one fails the run with its path (78).
 */
function deferredSecret(ref: SecretRef, path: string, env: Record<string, string | undefined>): Secret {
  let resolved: Secret | undefined;
  return new (class extends Secret {
    override reveal(): string {
      return (resolved ??= resolveSecret(ref, path, env)).reveal();
    }
  })('');
}

/** A tenant may only use the storage roots the platform allows it (when the platform lists tenants). */
function tenantPolicy(config: Record<string, unknown>, platform: PlatformConfig): ConfigIssue[] {
  if (!platform.tenants) return [];
  const tenant = isObject(config.tenant) ? config.tenant : {};
  const id = tenant.id;
  const root = tenant['storage-root'];
  if (typeof id !== 'string') return [];
  const allowed = platform.tenants[id];
  if (!allowed) return [{ path: 'tenant.id', message: `tenant "${id}" is not known to the platform config` }];
  if (typeof root === 'string' && !isUnderRoot(root, allowed['storage-roots']))
    return [{ path: 'tenant.storage-root', message: `is outside the storage roots the platform allows tenant "${id}" (${allowed['storage-roots'].join(', ')})` }];
  return [];
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function dedupe(issues: ConfigIssue[]): ConfigIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.path}\u0000${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
