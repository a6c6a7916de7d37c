import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { icebergRestUri, remote, runCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'iceberg-rest');

/**
 * `ping` reaches the platform's REST catalogs: the stack's real Iceberg REST catalog
 * (scripts/iceberg-rest), through its OAuth2 client-credentials endpoint, with the secret never printed.
 */
const platform = (catalog: string) =>
  tempFiles({ 'platform.conf': `catalogs { lake { format = iceberg }, rest { format = iceberg, type = rest, ${catalog} } }` });

describe('ping and the REST catalog', () => {
  it('answers ok with the catalog reached through OAuth2 client credentials, never printing the secret', async () => {
    const secret = `cs-${Math.random().toString(36).slice(2)}-do-not-print`;
    const dir = platform(`uri = "${icebergRestUri()}", oauth2 { client-id = "lakehouse-jobs", client-secret = { env = REST_CLIENT_SECRET } }`);
    const r = await runCli(['ping', '--env', join(dir, 'platform.conf'), '--remote', remote(), '--log-level', 'debug'], { REST_CLIENT_SECRET: secret });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, catalogs: { rest: { type: 'rest', ok: true } } });
    expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('exits 69 naming the catalog when its address does not answer', async () => {
    const dir = platform('uri = "http://127.0.0.1:9/"');
    const r = await runCli(['ping', '--env', join(dir, 'platform.conf'), '--remote', remote()]);
    expect(r.code).toBe(69);
    expect(JSON.parse(r.stdout)).toMatchObject({
      ok: false,
      exitCode: 69,
      error: { code: 'CATALOG_UNAVAILABLE', message: expect.stringContaining('catalog rest') },
    });
  });

  it('exits 78 naming the platform path when the client secret variable is unset', async () => {
    const dir = platform(`uri = "${icebergRestUri()}", oauth2 { client-id = "lakehouse-jobs", client-secret = { env = REST_CLIENT_SECRET_UNSET } }`);
    const r = await runCli(['ping', '--env', join(dir, 'platform.conf'), '--remote', remote()]);
    expect(r.code).toBe(78);
    expect(r.stdout).toContain('(platform) catalogs.rest.oauth2.client-secret');
  });
});
