import type { Limits, PlatformConfig } from '../../core/config/platform.js';
import { limitsSchema } from '../../core/config/platform.js';
import { LAYERS, layerNamespace } from '../../core/naming.js';
import type { TenantContext } from '../../core/tenant.js';

/**
 * What one run's Spark Connect session may touch, sent to the server once before any step
 * (lakehouse.jobs.BindTenant, docs/security-policy.md): the server keeps it in its plugin's state
 * and judges every plan of the session against it. From trusted sources only: the platform config
 * and the tenant it vetted; nothing here comes from the job config but the tenant's id and root.
 */
export interface TenantBinding {
  readonly tenant: string;
  /** `catalog.namespace`: the tenant's own layers in every catalog, plus the namespaces granted for reading. */
  readonly readNamespaces: readonly string[];
  /** The tenant's own layers in every catalog: everything a run writes, creates or drops is in one. */
  readonly writeNamespaces: readonly string[];
  /** Storage roots files may be read from: the tenant's, plus the roots of granted data. */
  readonly readRoots: readonly string[];
  /** The tenant's storage roots: every file written and every table location lies under one. */
  readonly writeRoots: readonly string[];
  /** Per Kafka cluster of the platform, the topics granted to the tenant. */
  readonly kafka: readonly { readonly bootstrapServers: readonly string[]; readonly topics: readonly string[]; readonly topicPrefixes: readonly string[] }[];
  readonly limits: Limits;
}

export function tenantBinding(platform: PlatformConfig, tenant: TenantContext): TenantBinding {
  const own = Object.keys(platform.catalogs).flatMap((catalog) => LAYERS.map((layer) => `${catalog}.${layerNamespace(tenant.id, layer)}`));
  const grant = platform.tenants && Object.hasOwn(platform.tenants, tenant.id) ? platform.tenants[tenant.id] : undefined;
  const roots = grant?.['storage-roots'] ?? [tenant.storageRoot];
  const kafka = Object.values(platform.kafka.clusters).flatMap((c) => {
    const g = Object.hasOwn(c.tenants, tenant.id) ? c.tenants[tenant.id] : undefined;
    return g ? [{ bootstrapServers: [...c['bootstrap-servers']], topics: [...g.topics], topicPrefixes: [...g['topic-prefixes']] }] : [];
  });
  return Object.freeze({
    tenant: tenant.id,
    readNamespaces: Object.freeze([...own, ...(grant?.['read-namespaces'] ?? [])]),
    writeNamespaces: Object.freeze(own),
    readRoots: Object.freeze([...roots, ...(grant?.['read-roots'] ?? [])]),
    writeRoots: Object.freeze([...roots]),
    kafka: Object.freeze(kafka),
    limits: Object.freeze({ ...(platform.limits ?? limitsSchema.parse(undefined)), ...(grant?.limits ?? {}) }),
  });
}
