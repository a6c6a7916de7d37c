import type { PlatformConfig } from '../../core/config/platform.js';
import { LAYERS, layerNamespace } from '../../core/naming.js';
import type { TenantContext } from '../../core/tenant.js';
import type { TenantReadPolicy } from './policy.js';

/**
 * The policy's inputs, from trusted sources only: the tenant's own layers in every catalog the
 * platform configures, its storage roots (the platform's list when it has one, else the job's
 * root), and the read-only namespaces and roots the platform config grants it
 * (`tenants.<id>.read-namespaces`, `tenants.<id>.read-roots`). Nothing here comes from the job config
 * except the tenant id and storage root, which the platform config has already vetted.
 */
export function tenantReadPolicy(platform: PlatformConfig, tenant: TenantContext): TenantReadPolicy {
  const own = Object.keys(platform.catalogs).flatMap((catalog) => LAYERS.map((layer) => `${catalog}.${layerNamespace(tenant.id, layer)}`));
  const grant = platform.tenants && Object.hasOwn(platform.tenants, tenant.id) ? platform.tenants[tenant.id] : undefined;
  return Object.freeze({
    tenant: tenant.id,
    namespaces: Object.freeze([...own, ...(grant?.['read-namespaces'] ?? [])]),
    roots: Object.freeze([...(grant?.['storage-roots'] ?? [tenant.storageRoot]), ...(grant?.['read-roots'] ?? [])]),
  });
}
