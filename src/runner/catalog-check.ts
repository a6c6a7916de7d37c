import { ExitCode, UnavailableError, LakehouseError } from '../core/errors.js';
import type { PlatformConfig } from '../core/config/platform.js';
import { resolveSecret } from '../core/config/secret-ref.js';
import { Secret } from '../core/secrets.js';

/**
 * Reachability checks of the platform's Iceberg REST catalogs (docs/catalogs.md), for `ping`: the
 * Spark server talks to its catalogs itself, but a pod whose jobs name a catalog the network or the
 * credentials do not reach is not ready either. One `GET <uri>/v1/config` per catalog (the REST
 * spec's first call of every client), after an OAuth2 client-credentials token when configured.
 * Secrets are resolved only here and sent only to the catalog's own endpoints.
 */

export interface CatalogCheck {
  type: 'rest';
  ok: true;
  ms: number;
}

/** A catalog that does not answer, or answers with a server error (69, retryable). */
export class CatalogUnavailableError extends UnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, code: 'CATALOG_UNAVAILABLE' });
  }
}

/** A catalog that refuses the credentials (77). */
export class CatalogAuthError extends LakehouseError {
  readonly exitCode = ExitCode.permission;
  readonly category = 'permission' as const;
  readonly code = 'CATALOG_AUTH';
}

type Fetch = typeof fetch;

/** Check every REST catalog of the platform config; the first failure is thrown. */
export async function checkRestCatalogs(
  platform: PlatformConfig,
  env: Record<string, string | undefined>,
  opts: { signal?: AbortSignal; fetch?: Fetch } = {},
): Promise<Record<string, CatalogCheck>> {
  const out: Record<string, CatalogCheck> = {};
  for (const [name, c] of Object.entries(platform.catalogs)) {
    if (c.type !== 'rest' || c.uri === undefined) continue;
    const started = performance.now();
    const base = c.uri.endsWith('/') ? c.uri : `${c.uri}/`;
    const path = `catalogs.${name}`;
    let bearer: Secret | undefined;
    if (c.token) bearer = resolveSecret(c.token, `(platform) ${path}.token`, env);
    else if (c.oauth2) {
      const secret = resolveSecret(c.oauth2['client-secret'], `(platform) ${path}.oauth2.client-secret`, env);
      bearer = await clientCredentialsToken(name, c.oauth2['server-uri'] ?? `${base}v1/oauth/tokens`, c.oauth2['client-id'], secret, c.oauth2.scope, opts);
    }
    const url = new URL('v1/config', base);
    if (c.warehouse !== undefined) url.searchParams.set('warehouse', c.warehouse);
    const res = await call(name, url.href, { headers: bearer ? { authorization: `Bearer ${bearer.reveal()}` } : {} }, opts);
    await expectOk(name, url.href, 'its configuration (GET v1/config)', res);
    const body: unknown = await res.json().catch(() => undefined);
    if (typeof body !== 'object' || body === null || !('defaults' in body || 'overrides' in body))
      throw new CatalogUnavailableError(
        `catalog ${name} at ${url.origin} did not answer v1/config with a catalog configuration: is it an Iceberg REST catalog?`,
      );
    out[name] = { type: 'rest', ok: true, ms: Math.round(performance.now() - started) };
  }
  return out;
}

async function clientCredentialsToken(
  name: string,
  endpoint: string,
  clientId: string,
  secret: Secret,
  scope: string | undefined,
  opts: { signal?: AbortSignal; fetch?: Fetch },
): Promise<Secret> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret.reveal(), scope: scope ?? 'catalog' });
  const res = await call(name, endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() }, opts);
  await expectOk(name, endpoint, 'a token for its OAuth2 client credentials', res);
  const body = (await res.json().catch(() => undefined)) as { access_token?: unknown } | undefined;
  if (typeof body?.access_token !== 'string' || body.access_token === '')
    throw new CatalogAuthError(`catalog ${name}: the token endpoint ${new URL(endpoint).origin} answered without an access_token`);
  // A Secret registers its value for scrubbing: the token never reaches a log either.
  return new Secret(body.access_token);
}

async function call(name: string, url: string, init: RequestInit, opts: { signal?: AbortSignal; fetch?: Fetch }): Promise<Response> {
  try {
    return await (opts.fetch ?? fetch)(url, { ...init, redirect: 'error', ...(opts.signal ? { signal: opts.signal } : {}) });
  } catch (e) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    // The origin only: a path or query could carry what the platform team considers private.
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
    throw new CatalogUnavailableError(`catalog ${name} at ${new URL(url).origin} is unreachable (${cause})`, { cause: e });
  }
}

async function expectOk(name: string, url: string, what: string, res: Response): Promise<void> {
  if (res.ok) return;
  await res.body?.cancel().catch(() => undefined);
  const origin = new URL(url).origin;
  if (res.status === 401 || res.status === 403)
    throw new CatalogAuthError(`catalog ${name} at ${origin} refused ${what}: HTTP ${res.status}; check the catalog's credentials in the platform config`);
  throw new CatalogUnavailableError(`catalog ${name} at ${origin} could not give ${what}: HTTP ${res.status}`);
}
