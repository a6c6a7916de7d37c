import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { scrub } from '../../../src/core/secrets.js';
import { CatalogAuthError, CatalogUnavailableError, checkRestCatalogs } from '../../../src/runner/catalog-check.js';

/**
 * The REST catalog check against a small HTTP server speaking the two calls it makes: the OAuth2
 * token endpoint and v1/config. The real catalog (scripts/iceberg-rest) is exercised by
 * test/integration/runner/catalogs.test.ts.
 */
const SECRET = 'client-secret-4711';
const TOKEN = 'issued-token-0815';
let server: Server;
let base: string;
const seen: { method: string; url: string; auth?: string; body: string }[] = [];

async function body(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return text;
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void body(req).then((text) => {
      seen.push({ method: req.method!, url: req.url!, ...(req.headers.authorization ? { auth: req.headers.authorization } : {}), body: text });
      const form = new URLSearchParams(text);
      if (req.url === '/v1/oauth/tokens') {
        if (form.get('grant_type') !== 'client_credentials' || form.get('client_secret') !== SECRET)
          return res.writeHead(401).end('{"error":"invalid_client"}');
        return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: TOKEN, token_type: 'bearer' }));
      }
      if (req.url?.startsWith('/v1/config')) {
        if (req.headers.authorization !== `Bearer ${TOKEN}`) return res.writeHead(401).end();
        return res.writeHead(200, { 'content-type': 'application/json' }).end('{"defaults":{},"overrides":{}}');
      }
      if (req.url === '/broken/v1/config') return res.writeHead(503).end();
      if (req.url === '/html/v1/config') return res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const platform = (catalog: Record<string, unknown>) =>
  platformSchema.parse({ catalogs: { lake: { format: 'iceberg' }, cat: { format: 'iceberg', type: 'rest', ...catalog } } });

describe('checkRestCatalogs', () => {
  it('fetches a client-credentials token, then asks v1/config with it (warehouse as a parameter)', async () => {
    seen.length = 0;
    const r = await checkRestCatalogs(
      platform({ uri: `${base}/`, warehouse: 'wh one', oauth2: { 'client-id': 'jobs', 'client-secret': { env: 'CAT_SECRET' }, scope: 'PRINCIPAL_ROLE:ALL' } }),
      { CAT_SECRET: SECRET },
    );
    expect(r).toEqual({ cat: { type: 'rest', ok: true, ms: expect.any(Number) } });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /v1/oauth/tokens', 'GET /v1/config?warehouse=wh+one']);
    expect(Object.fromEntries(new URLSearchParams(seen[0]!.body))).toEqual({
      grant_type: 'client_credentials',
      client_id: 'jobs',
      client_secret: SECRET,
      scope: 'PRINCIPAL_ROLE:ALL',
    });
    expect(seen[1]!.auth).toBe(`Bearer ${TOKEN}`);
    // The issued token is a secret too: scrubbed from any text that might carry it.
    expect(scrub(`token ${TOKEN}`)).toBe('token [redacted]');
  });

  it('sends a bearer token given by reference', async () => {
    const r = await checkRestCatalogs(platform({ uri: base, token: { env: 'CAT_TOKEN' } }), { CAT_TOKEN: TOKEN });
    expect(r.cat?.ok).toBe(true);
  });

  it('refuses wrong client credentials with 77, naming the catalog and never the secret', async () => {
    const e = await checkRestCatalogs(platform({ uri: base, oauth2: { 'client-id': 'jobs', 'client-secret': { env: 'CAT_SECRET' } } }), {
      CAT_SECRET: 'wrong-secret-value',
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CatalogAuthError);
    expect((e as CatalogAuthError).exitCode).toBe(77);
    expect((e as Error).message).toContain('catalog cat');
    expect((e as Error).message).not.toContain('wrong-secret-value');
  });

  it('fails with 78 naming the platform path when the secret variable is unset', async () => {
    const e = await checkRestCatalogs(platform({ uri: base, token: { env: 'CAT_TOKEN' } }), {}).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).issues[0]!.path).toBe('(platform) catalogs.cat.token');
  });

  it.each([
    ['a server error', () => `${base}/broken/`, 'HTTP 503'],
    ['an answer that is not a catalog configuration', () => `${base}/html/`, 'is it an Iceberg REST catalog'],
    ['a closed port', () => 'http://127.0.0.1:9/', 'is unreachable'],
  ])('reports %s as unavailable (69)', async (_what, uri, message) => {
    const e = await checkRestCatalogs(platform({ uri: uri() }), {}).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CatalogUnavailableError);
    expect((e as CatalogUnavailableError).exitCode).toBe(69);
    expect((e as Error).message).toContain(message);
  });

  it('checks nothing when no catalog has type rest', async () => {
    expect(await checkRestCatalogs(platformSchema.parse({ catalogs: { lake: { format: 'iceberg' } } }), {})).toEqual({});
  });
});
