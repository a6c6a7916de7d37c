import { randomUUID } from 'node:crypto';
import { ConfigError, type ConfigIssue, UsageError } from '../core/errors.js';
import { identify, type JobIdentity, loadPlatform, type LoadRequest, readJobConfig, validateJobConfig } from '../core/config/load.js';
import type { FileIdentity } from '../core/config/hocon.js';
import { localPlatformDefaults, type PlatformConfig, resolveSecret, type SecretRef } from '../core/config/platform.js';
import { closest } from '../core/config/closest.js';
import { own } from '../core/config/own.js';
import { instantOfMillis, parseLogicalDate } from '../core/instant.js';
import { NAME_PATTERN } from '../core/naming.js';
import { Secret } from '../core/secrets.js';
import { tenantContext, type TenantContext } from '../core/tenant.js';
import { loadTemplate } from '../jobs/loaders.js';
import type { CatalogRef, JdbcConnectionRef, KafkaClusterRef, JobContext, JobPlan, JobTemplate, SchemaRegistryRef, TemplateVersion } from '../jobs/template.js';

/**
 * The one job loader: platform config, job config (+ `--set` overrides) → a validated job, its
 * tenant context and its plan. Config parsing and validation are core's (src/core/config/load.ts);
 * this layer knows the job catalog, so it picks the template and builds the plan.
 */

export type { JobIdentity, LoadRequest } from '../core/config/load.js';

export interface LoadedJob {
  template: JobTemplate;
  version: TemplateVersion;
  config: Record<string, any>;
  platform: PlatformConfig;
  tenant: TenantContext;
  context: JobContext;
  plan: JobPlan;
}

export async function loadJob(req: LoadRequest, identity: JobIdentity = {}): Promise<LoadedJob> {
  const clock = instantOfMillis(Date.now());
  const logicalDate = req.logicalDate === undefined ? undefined : parseLogicalDate(req.logicalDate);
  if (req.logicalDate !== undefined && !logicalDate)
    throw new UsageError(
      `--logical-date ${JSON.stringify(req.logicalDate)} is neither a date (2026-07-05) nor an ISO timestamp with an offset (2026-07-05T00:00:00+00:00)`,
    );
  // The platform config first: it says which environment variables the job config may read.
  const issues: ConfigIssue[] = [];
  // The files the platform config read: the job config may include none of them (by any path).
  const platformFiles: FileIdentity[] = [];
  const platform = req.envFile ? await loadPlatform(req.envFile, req.env, issues, platformFiles) : localPlatformDefaults;
  // A job config is judged under its platform config (its variables, catalogs, tenants): against a
  // broken one its problems would be guesses, so the platform's own problems come alone.
  if (issues.length) throw new ConfigError(issues);
  checkBinding(req.tenant, platform);
  const origins = new Map<string, string>();
  const raw = await readJobConfig(req, platform, origins, platformFiles);
  const { named, schemaVersion: wanted } = identify(raw, identity);
  // The status names the tenant the orchestrator bound the run to, not the config's claim.
  if (req.tenant !== undefined) identity.tenant = req.tenant;

  const template = await chooseTemplate(req.job, named);
  identity.template = template.name;
  const supported = template.versions.map((v) => v.version);
  if (wanted === undefined) throw new ConfigError([{ path: 'job.schema-version', message: `is required (${template.name} supports ${supported.join(', ')})` }]);
  const version = template.versions.find((v) => v.version === wanted);
  if (!version)
    throw new ConfigError([
      {
        path: 'job.schema-version',
        message: `${typeof wanted === 'bigint' ? String(wanted) : JSON.stringify(wanted)} is not supported by ${template.name} (supported: ${supported.join(', ')})`,
      },
    ]);
  identity.schemaVersion = version.version;

  const config = validateJobConfig(raw, version.schema, platform, origins, req.tenant) as Record<string, any>;
  const tenant = tenantContext(config.tenant.id, config.tenant['storage-root']);
  const grant = own(platform.tenants, tenant.id);
  const context: JobContext = {
    tenant,
    runId: req.runId,
    attempt: randomUUID(),
    ...(logicalDate ? { logicalDate } : {}),
    clock,
    catalog: (name, path) => resolveCatalog(platform, name, path),
    jdbcConnection: (name, path) => resolveJdbcConnection(platform, tenant.id, name, path, req.env),
    kafkaCluster: (name, path) => resolveKafkaCluster(platform, tenant.id, name, path, req.env),
    schemaRegistry: (name, path) => resolveSchemaRegistry(platform, name, path, req.env),
    inlineJdbcUrls: platform.jdbc['inline-urls'] === 'allow',
    retentionFloorHours: platform.maintenance['retention-floor-hours'],
    secret: (ref, path) => deferredSecret(grantedSecret(ref, path, req.envFile ? platform : undefined, tenant.id), path, req.env),
    ...(grant ? { access: { storageRoots: grant['storage-roots'], readNamespaces: grant['read-namespaces'], readRoots: grant['read-roots'] } } : {}),
  };
  // Templates may reject combinations only the plan reveals (an unknown catalog): still config errors.
  const plan = version.plan(context, config);
  return { template, version, config, platform, tenant, context, plan };
}

/**
 * The orchestrator's tenant binding (`--tenant`) is a usage matter: 64 when it is malformed, or
 * missing where the platform config requires one. Whether the job config's tenant matches it is the
 * config's (78 at tenant.id, with the other tenant rules).
 */
function checkBinding(bound: string | undefined, platform: PlatformConfig): void {
  if (bound === undefined) {
    if (platform['tenant-binding'] === 'required')
      throw new UsageError(
        'the platform config requires every run to be bound to its tenant by the orchestrator: pass --tenant <id> (or LAKEHOUSE_TENANT) from what the platform controls, e.g. the pod template',
      );
    return;
  }
  if (!NAME_PATTERN.test(bound)) throw new UsageError(`--tenant ${JSON.stringify(bound)} is not a tenant id (${NAME_PATTERN.source})`);
  if (platform.tenants && !own(platform.tenants, bound)) throw new UsageError(`--tenant ${bound} is not a tenant of the platform config`);
}

/**
 * The template from `--job` and the config's `job.template`. An unknown `--job` is a usage error
 * (64); an unknown or disagreeing `job.template` is the config's error (78, at job.template). Both
 * suggest the closest template name. The named template loads alone (src/jobs/loaders.ts); the
 * whole catalog only for the errors, which list and suggest names.
 */
export async function chooseTemplate(option: string | undefined, named: string | undefined): Promise<JobTemplate> {
  if (option === undefined || named === undefined || option === named) {
    const wanted = option ?? named;
    const alone = wanted === undefined ? undefined : await loadTemplate(wanted);
    if (alone) return alone;
  }
  const { findTemplate, templates } = await import('../jobs/registry.js');
  const names = templates.map((t) => t.name);
  const near = (name: string) => (names.includes(name) ? undefined : closest(name, names));
  if (option !== undefined && named !== undefined && option !== named) {
    const fix = near(option) ? `; did you mean --job ${near(option)}?` : near(named) ? `; did you mean job.template = "${near(named)}"?` : '';
    throw new ConfigError([{ path: 'job.template', message: `is "${named}" but --job says "${option}"${fix}` }]);
  }
  if (option !== undefined) return findTemplate(option);
  if (named === undefined) throw new UsageError('no job template: pass --job <template> or set job.template in the config');
  if (!names.includes(named))
    throw new ConfigError([
      { path: 'job.template', message: `unknown template "${named}"${near(named) ? `; did you mean "${near(named)}"?` : ''} (known: ${names.join(', ')})` },
    ]);
  return findTemplate(named);
}

function resolveCatalog(platform: PlatformConfig, name: string | undefined, path: string): CatalogRef {
  const entries = Object.entries(platform.catalogs);
  if (name === undefined) {
    const def = entries.find(([, c]) => c.default);
    if (!def) throw new ConfigError([{ path, message: 'is required: the platform config names no default catalog' }]);
    return { name: def[0], format: def[1].format };
  }
  const found = own(platform.catalogs, name);
  if (!found)
    throw new ConfigError([
      { path, message: `catalog "${name}" is not configured by the platform${knownNames(name, Object.keys(platform.catalogs), 'configured')}` },
    ]);
  return { name, format: found.format };
}

/** ` (<list>: a, b; did you mean "a"?)`: what a config could have named instead of an unknown name. */
function knownNames(name: string, known: readonly string[], list: string): string {
  const near = closest(name, known);
  return ` (${list}: ${known.join(', ') || 'none'})${near ? `; did you mean "${near}"?` : ''}`;
}

/**
 * A platform connection, if granted to the tenant: listed in its `tenants`, or, without that list,
 * where the platform config lists at most one tenant. A connection is a database opened with the
 * platform's credentials: under a shared platform config it holds some tenant's rows, and a job
 * config naming another tenant's connection (with `source.query`, any of its tables) would copy
 * them into its own bronze.
 */
function resolveJdbcConnection(
  platform: PlatformConfig,
  tenant: string,
  name: string,
  path: string,
  env: Record<string, string | undefined>,
): JdbcConnectionRef {
  const c = own(platform.jdbc.connections, name);
  if (!c)
    throw new ConfigError([
      {
        path,
        message: `connection "${name}" is not configured by the platform${knownNames(name, Object.keys(platform.jdbc.connections), 'jdbc.connections')}`,
      },
    ]);
  const tenants = Object.keys(platform.tenants ?? {});
  if (c.tenants ? !c.tenants.includes(tenant) : tenants.length > 1)
    throw new ConfigError([
      {
        path,
        message: `connection "${name}" is not granted to tenant ${tenant} (jdbc.connections.${name}.tenants${
          c.tenants ? `: ${c.tenants.join(', ') || 'none'}` : ': not set, and a platform config of several tenants must name the tenants of each connection'
        })`,
      },
    ]);
  return {
    name,
    url: c.url,
    ...(c.user === undefined ? {} : { user: c.user }),
    ...(c.driver === undefined ? {} : { driver: c.driver }),
    ...(c.password === undefined ? {} : { password: deferredSecret(c.password, `(platform) jdbc.connections.${name}.password`, env) }),
  };
}

function resolveKafkaCluster(
  platform: PlatformConfig,
  tenant: string,
  name: string | undefined,
  path: string,
  env: Record<string, string | undefined>,
): KafkaClusterRef {
  const clusters = platform.kafka.clusters;
  const known = Object.keys(clusters);
  let chosen = name;
  if (chosen === undefined) {
    const defaults = known.filter((k) => clusters[k]!.default);
    chosen = defaults.length === 1 ? defaults[0] : known.length === 1 ? known[0] : undefined;
    if (chosen === undefined)
      throw new ConfigError([
        {
          path,
          message: `is required: the platform config has ${known.length ? `no single default among kafka.clusters (${known.join(', ')})` : 'no kafka.clusters'}`,
        },
      ]);
  }
  const c = own(clusters, chosen);
  if (!c)
    throw new ConfigError([{ path, message: `Kafka cluster "${chosen}" is not configured by the platform${knownNames(chosen, known, 'kafka.clusters')}` }]);
  const where = `(platform) kafka.clusters.${chosen}`;
  const grant = own(c.tenants, tenant);
  const tls = c.tls;
  return {
    name: chosen,
    bootstrapServers: c['bootstrap-servers'],
    securityProtocol: c['security-protocol'],
    ...(c.sasl
      ? { sasl: { mechanism: c.sasl.mechanism, username: c.sasl.username, password: deferredSecret(c.sasl.password, `${where}.sasl.password`, env) } }
      : {}),
    ...(tls
      ? {
          tls: {
            ...(tls['truststore-location'] === undefined ? {} : { truststoreLocation: tls['truststore-location'] }),
            ...(tls['truststore-type'] === undefined ? {} : { truststoreType: tls['truststore-type'] }),
            ...(tls['truststore-password'] === undefined
              ? {}
              : { truststorePassword: deferredSecret(tls['truststore-password'], `${where}.tls.truststore-password`, env) }),
          },
        }
      : {}),
    grant: { topics: grant?.topics ?? [], prefixes: grant?.['topic-prefixes'] ?? [] },
  };
}

function resolveSchemaRegistry(platform: PlatformConfig, name: string | undefined, path: string, env: Record<string, string | undefined>): SchemaRegistryRef {
  const registries = platform['schema-registries'];
  const known = Object.keys(registries);
  let chosen = name;
  if (chosen === undefined) {
    const defaults = known.filter((k) => registries[k]!.default);
    chosen = defaults.length === 1 ? defaults[0] : known.length === 1 ? known[0] : undefined;
    if (chosen === undefined)
      throw new ConfigError([
        {
          path,
          message: `is required: the platform config has ${known.length ? `no single default among schema-registries (${known.join(', ')})` : 'no schema-registries'}`,
        },
      ]);
  }
  const r = own(registries, chosen);
  if (!r)
    throw new ConfigError([
      { path, message: `schema registry "${chosen}" is not configured by the platform${knownNames(chosen, known, 'schema-registries')}` },
    ]);
  const where = `(platform) schema-registries.${chosen}`;
  // A literal URL is a secret too: it may carry credentials, and it is never in a plan or a log.
  const url = typeof r.url === 'string' ? new Secret(r.url) : deferredSecret(r.url, `${where}.url`, env);
  return {
    name: chosen,
    url,
    ...(r.username !== undefined && r.password !== undefined
      ? { basicAuth: { username: r.username, password: deferredSecret(r.password, `${where}.password`, env) } }
      : {}),
  };
}

/**
 * A job config is untrusted, so the secrets it names by reference are only those the platform
 * grants its tenant (`tenants.<id>.secrets`): the runner's environment and mounts hold the
 * platform's own credentials (the Spark token, connections' passwords), and a config naming one as
 * the password of a url it chose would send it to that server. Without a platform config (one
 * developer's machine, nothing shared) every reference resolves.
 */
function grantedSecret(ref: SecretRef, path: string, platform: PlatformConfig | undefined, tenant: string): SecretRef {
  if (!platform) return ref;
  const grant = own(platform.tenants, tenant)?.secrets;
  const where = `tenants.${tenant}.secrets`;
  if ('env' in ref) {
    if (grant?.env.includes(ref.env)) return ref;
    throw new ConfigError([
      {
        path,
        message: `{ env = "${ref.env}" } is not a secret the platform config grants tenant "${tenant}" (${where}.env lists those a job config may name)`,
      },
    ]);
  }
  const segments = ref.file.split('/');
  const under = (root: string) => ref.file.startsWith(root.endsWith('/') ? root : `${root}/`);
  if (!segments.some((s) => s === '.' || s === '..') && grant?.['file-roots'].some(under)) return ref;
  throw new ConfigError([
    {
      path,
      message: `{ file = "${ref.file}" } is not under a directory the platform config grants tenant "${tenant}" (${where}.file-roots lists those a job config may name)`,
    },
  ]);
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
