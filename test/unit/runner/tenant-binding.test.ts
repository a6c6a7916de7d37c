import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/core/errors.js';
import { configIssues, loadConfig, refusal } from '../../support/load.js';

/**
 * A job config's tenant.id is the tenant's own claim. Under a platform config shared by several
 * tenants, only the orchestrator's binding (--tenant, trusted) says whom a run is for: a config
 * for another tenant, with that tenant's own storage root, must not load.
 */
const config = (tenant: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "orders" }
tenant { id = "${tenant}", storage-root = "file:///lake/${tenant}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = ["ts"] }
target { table = "orders", catalog = "lake" }
`;

const shared = (binding = '') => `
catalogs { lake { format = iceberg, default = true } }
tenants {
  acme   { storage-roots = ["file:///lake/acme"] }
  globex { storage-roots = ["file:///lake/globex"] }
}
${binding}
`;

const usage = async (text: string, opts: Parameters<typeof loadConfig>[1]) => (await refusal(text, opts ?? {}, UsageError, 64)).message;

describe("the orchestrator's tenant binding", () => {
  it('without a binding, a shared platform config lets a config claim any listed tenant (why platforms set tenant-binding = required)', async () => {
    expect((await loadConfig(config('globex'), { platform: shared() })).tenant.id).toBe('globex');
  });

  it("refuses a config for another tenant, with that tenant's own root: 78 at tenant.id, naming both", async () => {
    const issues = await configIssues(config('globex'), { platform: shared(), tenant: 'acme' });
    expect(issues).toEqual([
      {
        path: 'tenant.id',
        message: 'is "globex", but the orchestrator runs this job for tenant "acme" (--tenant): a job config cannot choose its tenant',
      },
    ]);
  });

  it('loads the bound tenant’s own config, with or without a platform config', async () => {
    expect((await loadConfig(config('acme'), { platform: shared('tenant-binding = required'), tenant: 'acme' })).tenant.id).toBe('acme');
    expect((await loadConfig(config('acme'), { tenant: 'acme' })).tenant.id).toBe('acme');
    expect((await configIssues(config('globex'), { tenant: 'acme' })).map((i) => i.path)).toEqual(['tenant.id']);
  });

  it('a --set cannot move a bound run to another tenant', async () => {
    const issues = await configIssues(config('acme'), {
      platform: shared(),
      tenant: 'acme',
      set: ['tenant.id="globex"', 'tenant.storage-root="file:///lake/globex"'],
    });
    expect(issues.map((i) => i.path)).toEqual(['tenant.id']);
  });

  it('tenant-binding = required: a run without a binding is a usage error (64), whatever the config claims', async () => {
    expect(await usage(config('acme'), { platform: shared('tenant-binding = required') })).toMatch(/requires every run to be bound.*--tenant <id>/);
  });

  it('a malformed binding, or one the platform config does not list, is a usage error (64)', async () => {
    expect(await usage(config('acme'), { platform: shared(), tenant: 'Acme; DROP' })).toMatch(/is not a tenant id/);
    expect(await usage(config('acme'), { platform: shared(), tenant: 'initech' })).toMatch(/--tenant initech is not a tenant of the platform config/);
  });

  it('refuses any other value of tenant-binding in the platform config (78)', async () => {
    const issues = await configIssues(config('acme'), { platform: shared('tenant-binding = off') });
    expect(issues.map((i) => i.path)).toEqual(['(platform) tenant-binding']);
  });
});
