import type { Logger } from '../core/logger.js';
import type { PlatformConfig } from '../core/config/platform.js';
import { resolveSecret } from '../core/config/secret-ref.js';
import { parseConnectionString, type RemoteSpec } from '../spark/connection.js';
import { startLocalServer } from './local-server.js';

/**
 * The one remote resolution, for every command that talks to Spark (`run`, `plan --explain`,
 * `ping`): `--remote`, else `SPARK_REMOTE`, else the platform config's `spark.remote`, else `local`
 * (the embedded server, started or reused). The platform's `spark.token` applies when the remote
 * string carries none. Errors name where the remote came from. Only the platform config's `spark`
 * section is read, and none at all without one (`ping` without `--env` loads no config schema).
 */
export interface RemoteSources {
  option?: string;
  env: Record<string, string | undefined>;
  platform?: Pick<PlatformConfig, 'spark'>;
}

export function chosenRemote(src: RemoteSources): { text: string; origin: { kind: 'option'; name: string } | { kind: 'config'; path: string } } {
  if (src.option) return { text: src.option, origin: { kind: 'option', name: '--remote' } };
  if (src.env.SPARK_REMOTE) return { text: src.env.SPARK_REMOTE, origin: { kind: 'option', name: 'SPARK_REMOTE' } };
  return { text: src.platform?.spark.remote ?? 'local', origin: { kind: 'config', path: '(platform) spark.remote' } };
}

export async function resolveRemote(src: RemoteSources, logger: Logger): Promise<RemoteSpec> {
  const { text, origin } = chosenRemote(src);
  let spec = parseConnectionString(text, { origin });
  if (spec.kind === 'local') spec = parseConnectionString(await startLocalServer(logger));
  if (spec.kind !== 'remote') throw new Error('unreachable: local resolved to local');
  const token = src.platform?.spark.token;
  if (token && !spec.token) spec = { ...spec, token: resolveSecret(token, '(platform) spark.token', src.env) };
  return spec;
}
