import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { Secret } from '../secrets.js';
import { isSecretLikeName } from './hocon.js';
import { catalogName, name, storageUri } from './validate.js';

/**
 * The platform config (`--env`), owned by the platform team: where Spark is, which catalogs exist,
 * named JDBC connections, and which storage roots each tenant may use. Secrets appear here only as
 * references (`{ env = NAME }` or `{ file = /mounted/secret }`), resolved at the moment of use.
 */

export const secretRef = z.union([
  z.object({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name') }).strict(),
  z.object({ file: z.string().startsWith('/', 'a mounted file must be an absolute path') }).strict(),
]);
export type SecretRef = z.infer<typeof secretRef>;

/** An environment variable job configs may read: never one that can hold a credential. */
const configEnvName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
  .refine((n) => !isSecretLikeName(n), {
    message: 'names a variable that can hold a credential (TOKEN, PASSWORD, SECRET, KEY, CREDENTIAL, AUTH, SPARK_REMOTE): job configs may never read it; pass secrets as references',
  });

/** The platform's default retention floor for table maintenance: 7 days (Delta's own default check). */
export const RETENTION_FLOOR_HOURS = 168;

export const platformSchema = z
  .object({
    spark: z
      .object({
        remote: z.string().optional(),
        token: secretRef.optional(),
      })
      .strict()
      .default({}),
    catalogs: z
      .record(
        catalogName(),
        z
          .object({
            format: z.enum(['iceberg', 'delta']),
            default: z.boolean().default(false),
          })
          .strict(),
      )
      .default({}),
    tenants: z
      .record(
        name(),
        z
          .object({
            'storage-roots': z.array(storageUri()).min(1),
            // Read-only grants checked by the tenant read policy (src/spark/policy): shared
            // namespaces (`catalog.namespace`) and where their files live. Writes stay the templates'.
            'read-namespaces': z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*\.[a-z][a-z0-9_]*$/, 'a catalog.namespace')).default([]),
            'read-roots': z.array(storageUri()).default([]),
          })
          .strict(),
      )
      .optional(),
    jdbc: z
      .object({
        connections: z
          .record(
            name(),
            z.object({ url: z.string().startsWith('jdbc:'), user: z.string().optional(), password: secretRef.optional(), driver: z.string().optional() }).strict(),
          )
          .default({}),
        /**
         * Whether a job config may give its own `source.url`. An inline url makes the Spark server
         * open whatever the tenant names: any host it can reach, any SQLite file it can read (the
         * local stack's Iceberg catalog is one). Platforms that serve untrusted tenants keep `deny`
         * and name connections instead.
         */
        'inline-urls': z.enum(['deny', 'allow']).default('deny'),
      })
      .strict()
      .default({ connections: {}, 'inline-urls': 'deny' }),
    /** The environment variables job configs may read with `${VAR}` / `${?VAR}`: none unless listed. */
    'config-env': z.object({ allow: z.array(configEnvName).default([]) }).strict().default({ allow: [] }),
    /**
     * Table maintenance (the table-maintenance template): no snapshot, removed file or orphan younger
     * than this many hours is deleted, whatever a job config asks. A running job reads and writes files
     * its commit does not reference yet; only a retention longer than any job keeps them safe.
     */
    maintenance: z
      .object({ 'retention-floor-hours': z.number().int().min(0).max(87_600).default(RETENTION_FLOOR_HOURS) })
      .strict()
      .default({ 'retention-floor-hours': RETENTION_FLOOR_HOURS }),
    logging: z.object({ level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).optional() }).strict().default({}),
  })
  .strict();

export type PlatformConfig = z.infer<typeof platformSchema>;

/** Without `--env`: no tenant policy, and the local stack's catalogs. */
export const localPlatformDefaults: PlatformConfig = platformSchema.parse({
  // hms: the catalog the seed project's configs name (scripts/stack/spark-connect.conf defines it).
  catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' }, hms: { format: 'iceberg' } },
  // Without a platform config the runner serves one developer on their own machine.
  jdbc: { 'inline-urls': 'allow' },
});

/** Resolve a secret reference. The value never leaves the returned `Secret` unless revealed. */
export function resolveSecret(ref: SecretRef, path: string, env: Record<string, string | undefined>): Secret {
  if ('env' in ref) {
    const value = env[ref.env];
    if (value === undefined || value === '') throw new ConfigError(`environment variable ${ref.env} is not set`, { path });
    return new Secret(value);
  }
  try {
    return new Secret(readFileSync(ref.file, 'utf8').replace(/\r?\n$/, ''));
  } catch (e) {
    throw new ConfigError(`secret file ${ref.file} cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`, { path, cause: e });
  }
}
