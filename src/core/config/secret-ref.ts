import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { Secret } from '../secrets.js';

/**
 * Secret references of the platform config (`{ env = NAME }` or `{ file = /mounted/secret }`) and
 * their resolution, apart from the platform config's zod schema (src/core/config/platform.ts, which
 * re-exports them): `ping` resolves a Spark token without building any schema (cold start, issue 13).
 */
export type SecretRef = { env: string } | { file: string };

/** Resolve a secret reference. The value never leaves the returned `Secret` unless revealed. */
export function resolveSecret(ref: SecretRef, path: string, env: Record<string, string | undefined>): Secret {
  if ('env' in ref) {
    // An own key: `process.env` answers `constructor` and `toString` from its prototype.
    const value = Object.hasOwn(env, ref.env) ? env[ref.env] : undefined;
    if (typeof value !== 'string' || value === '') throw new ConfigError(`environment variable ${ref.env} is not set`, { path });
    return new Secret(value);
  }
  try {
    return new Secret(readFileSync(ref.file, 'utf8').replace(/\r?\n$/, ''));
  } catch (e) {
    throw new ConfigError(`secret file ${ref.file} cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`, { path, cause: e });
  }
}
