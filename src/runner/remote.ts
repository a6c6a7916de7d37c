import { UsageError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { PlatformConfig, SecretRef } from '../core/config/platform.js';
import { resolveSecret } from '../core/config/secret-ref.js';
import { parseConnectionString, type RemoteSpec } from '../spark/connection.js';
import { startLocalServer } from './local-server.js';

/**
 * The one remote resolution, for every command that talks to Spark (`run`, `plan --explain`,
 * `ping`): `--remote`, else `SPARK_REMOTE`, else the platform config's `spark.remote`, else `local`
 * (the embedded server, started or reused). Where the platform config gives the run's tenant a
 * server of its own (`tenants.<id>.spark.remote`), that server is the only one: it replaces
 * `spark.remote`, and `--remote` or `SPARK_REMOTE` naming another endpoint is a usage error (64),
 * so no default of the orchestrator's can put a tenant back on the shared server. A token applies
 * when the remote string carries none: the tenant's `tenants.<id>.spark.token` for its server, the
 * platform's `spark.token` otherwise (a credential of one server is never sent to another). Errors
 * name where the remote came from. Only the platform config's `spark` and `tenants` sections are
 * read, and none at all without one (`ping` without `--env` loads no config schema).
 */
export interface RemoteSources {
  option?: string;
  env: Record<string, string | undefined>;
  platform?: Pick<PlatformConfig, 'spark'> & Partial<Pick<PlatformConfig, 'tenants'>>;
  /** The run's tenant (validated against the platform config): its own server, if it has one. */
  tenant?: string;
}

type Origin = { kind: 'option'; name: string } | { kind: 'config'; path: string };

export function chosenRemote(src: RemoteSources): { text: string; origin: Origin; token?: { ref: SecretRef; path: string } } {
  const explicit: { text: string; origin: Origin } | undefined = src.option
    ? { text: src.option, origin: { kind: 'option', name: '--remote' } }
    : src.env.SPARK_REMOTE
      ? { text: src.env.SPARK_REMOTE, origin: { kind: 'option', name: 'SPARK_REMOTE' } }
      : undefined;
  const own = tenantServer(src);
  if (own) {
    const token = own.token ? { token: { ref: own.token, path: `${own.path}.token` } } : {};
    if (!explicit) return { text: own.remote, origin: { kind: 'config', path: `${own.path}.remote` }, ...token };
    if (sameEndpoint(explicit.text, own.remote)) return { ...explicit, ...token };
    const name = explicit.origin.kind === 'option' ? explicit.origin.name : 'the remote';
    throw new UsageError(
      `${name} names another Spark Connect server than the one the platform config gives tenant ${src.tenant} (${own.path}.remote): the tenant's runs go to its own server only`,
    );
  }
  if (explicit) return { ...explicit, ...platformToken(src) };
  return { text: src.platform?.spark.remote ?? 'local', origin: { kind: 'config', path: '(platform) spark.remote' }, ...platformToken(src) };
}

export async function resolveRemote(src: RemoteSources, logger: Logger): Promise<RemoteSpec> {
  const { text, origin, token } = chosenRemote(src);
  let spec = parseConnectionString(text, { origin });
  if (spec.kind === 'local') spec = parseConnectionString(await startLocalServer(logger));
  if (spec.kind !== 'remote') throw new Error('unreachable: local resolved to local');
  if (token && !spec.token) spec = { ...spec, token: resolveSecret(token.ref, token.path, src.env) };
  return spec;
}

/** The tenant's own server from the platform config, own keys only (a tenant named `constructor` has none). */
function tenantServer(src: RemoteSources): { remote: string; token?: SecretRef; path: string } | undefined {
  const tenants = src.platform?.tenants;
  if (src.tenant === undefined || !tenants || !Object.hasOwn(tenants, src.tenant)) return undefined;
  const spark = tenants[src.tenant]?.spark;
  if (spark?.remote === undefined) return undefined;
  return { remote: spark.remote, ...(spark.token ? { token: spark.token } : {}), path: `(platform) tenants.${src.tenant}.spark` };
}

function platformToken(src: RemoteSources): { token?: { ref: SecretRef; path: string } } {
  const token = src.platform?.spark.token;
  return token ? { token: { ref: token, path: '(platform) spark.token' } } : {};
}

/** Two remotes name the same server: host and port, or the same text when one does not parse. */
function sameEndpoint(a: string, b: string): boolean {
  const endpoint = (text: string) => {
    try {
      const s = parseConnectionString(text);
      return s.kind === 'local' ? 'local' : `${s.host.toLowerCase()}:${s.port}`;
    } catch {
      return text.trim();
    }
  };
  return endpoint(a) === endpoint(b);
}
