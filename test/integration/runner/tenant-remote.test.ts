import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { freshTenant, readIcebergWithPyIceberg, remote, runCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * A tenant's own Spark Connect server (docs/security.md, "A server of the tenant's own"): with the
 * platform's shared remote unreachable, the tenant's runs and pings go to its own server (here the
 * stack's), and an orchestrator's --remote naming another server is refused (64) before anything
 * is sent. The run's gold table is read back by PyIceberg.
 */
const tenant = freshTenant();
const other = freshTenant();
const UNREACHABLE = 'sc://127.0.0.1:9';

const dir = tempFiles({
  'platform.conf': `
spark.remote = "${UNREACHABLE}"
tenant-binding = required
catalogs { lake { format = iceberg, default = true } }
tenants {
  ${tenant.id} { storage-roots = ["${tenant.root}"], spark { remote = "${remote()}" } }
  ${other.id} { storage-roots = ["${other.root}"] }
}`,
  'job.conf': `
job       { template = "gold-publish", schema-version = 1, name = "it-own-server" }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "VALUES (1, 'a'), (2, 'b') AS t(id, v)" }
target    { table = "own_server", grain = ["id"], mode = full-refresh }`,
});
const platform = join(dir, 'platform.conf');
/** The test run's own SPARK_REMOTE (the global setup's) must not choose for the CLI here. */
const NO_REMOTE = { SPARK_REMOTE: '' };

describe("a tenant's own Spark Connect server", () => {
  it('ping --tenant reaches it while the shared remote is unreachable; another tenant pings the shared one', async () => {
    const own = await runCli(['ping', '--env', platform, '--tenant', tenant.id, '--timeout', '60'], NO_REMOTE);
    expect(own.code, own.stdout + own.stderr).toBe(0);
    expect(JSON.parse(own.stdout)).toMatchObject({
      ok: true,
      remote: expect.stringContaining(
        remote()
          .replace(/^sc:\/\//, '')
          .split('/')[0]!,
      ),
    });
    const shared = await runCli(['ping', '--env', platform, '--tenant', other.id, '--timeout', '5'], NO_REMOTE);
    expect(shared.code).toBe(69);
  });

  it("runs the tenant's job there (a bare VALUES transform into gold), and refuses --remote naming another server (64)", async () => {
    // No --remote, no SPARK_REMOTE: the platform config decides, and it names the tenant's own server.
    const r = await runCli(['--config', join(dir, 'job.conf'), '--env', platform, '--tenant', tenant.id], NO_REMOTE);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { spark: { remote: string } }).spark.remote).toContain(
      remote()
        .replace(/^sc:\/\//, '')
        .split('/')[0]!,
    );
    expect(readIcebergWithPyIceberg(`${tenant.id}_gold`, 'own_server').sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ]);
    const elsewhere = await runCli(['--config', join(dir, 'job.conf'), '--env', platform, '--tenant', tenant.id, '--remote', UNREACHABLE], NO_REMOTE);
    expect(elsewhere.code).toBe(64);
    expect(elsewhere.stdout + elsewhere.stderr).toContain(`tenants.${tenant.id}.spark.remote`);
  });
});
