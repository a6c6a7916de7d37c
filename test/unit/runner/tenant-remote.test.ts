import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/core/errors.js';
import { chosenRemote, resolveRemote } from '../../../src/runner/remote.js';
import { platformSchema } from '../../../src/core/config/platform.js';
import { createLogger } from '../../../src/core/logger.js';

/**
 * A tenant's own Spark Connect server (`tenants.<id>.spark`, docs/security.md "A server of the
 * tenant's own"): the tenant's runs go there instead of `spark.remote`, an orchestrator's remote
 * naming another server is refused (64), and each server gets its own token only.
 */
const platform = platformSchema.parse({
  spark: { remote: 'sc://shared:15002', token: { env: 'SHARED_TOKEN' } },
  'tenant-binding': 'required',
  tenants: {
    acme: { 'storage-roots': ['file:///lake/acme'], spark: { remote: 'sc://acme-spark:15002', token: { env: 'ACME_TOKEN' } } },
    beta: { 'storage-roots': ['file:///lake/beta'] },
  },
});
const env = { SHARED_TOKEN: 'shared-secret', ACME_TOKEN: 'acme-secret' };
const logger = createLogger('silent');

describe("a tenant's own Spark Connect server", () => {
  it("is the tenant's remote, with its own token", async () => {
    expect(chosenRemote({ env, platform, tenant: 'acme' })).toMatchObject({
      text: 'sc://acme-spark:15002',
      origin: { kind: 'config', path: '(platform) tenants.acme.spark.remote' },
    });
    const spec = await resolveRemote({ env, platform, tenant: 'acme' }, logger);
    expect(spec).toMatchObject({ host: 'acme-spark', port: 15002 });
    expect(spec.token?.reveal()).toBe('acme-secret');
  });

  it("is not another tenant's: beta runs on the shared server with the platform's token", async () => {
    const spec = await resolveRemote({ env, platform, tenant: 'beta' }, logger);
    expect(spec).toMatchObject({ host: 'shared', port: 15002 });
    expect(spec.token?.reveal()).toBe('shared-secret');
  });

  it("never sends the platform's token to the tenant's server", async () => {
    const noToken = platformSchema.parse({
      spark: { remote: 'sc://shared:15002', token: { env: 'SHARED_TOKEN' } },
      tenants: { acme: { 'storage-roots': ['file:///lake/acme'], spark: { remote: 'sc://acme-spark:15002' } } },
    });
    const spec = await resolveRemote({ env, platform: noToken, tenant: 'acme' }, logger);
    expect(spec.host).toBe('acme-spark');
    expect(spec.token).toBeUndefined();
  });

  it('accepts --remote or SPARK_REMOTE naming the same server, and refuses another one (64)', async () => {
    const same = await resolveRemote({ option: 'sc://ACME-SPARK:15002/;user_id=ops', env, platform, tenant: 'acme' }, logger);
    expect(same.token?.reveal()).toBe('acme-secret');
    for (const src of [{ option: 'sc://shared:15002', env }, { env: { ...env, SPARK_REMOTE: 'sc://shared:15002/;token=t' } }]) {
      const e = (() => {
        try {
          chosenRemote({ ...src, platform, tenant: 'acme' });
        } catch (err) {
          return err;
        }
      })();
      expect(e).toBeInstanceOf(UsageError);
      expect((e as UsageError).message).toContain('tenants.acme.spark.remote');
      expect((e as UsageError).message).not.toContain('token=t');
    }
  });

  it('needs tenant-binding = required in a platform config of several tenants (else a config picks the server)', () => {
    const r = platformSchema.safeParse({
      tenants: {
        acme: { 'storage-roots': ['file:///lake/acme'], spark: { remote: 'sc://acme-spark:15002' } },
        beta: { 'storage-roots': ['file:///lake/beta'] },
      },
    });
    expect(r.success).toBe(false);
    expect(r.error!.issues).toEqual([expect.objectContaining({ path: ['tenant-binding'], message: expect.stringContaining('tenants.acme.spark') })]);
    // One tenant per platform config binds by itself.
    expect(platformSchema.safeParse({ tenants: { acme: { 'storage-roots': ['file:///lake/acme'], spark: { remote: 'sc://a:1' } } } }).success).toBe(true);
  });
});
