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

/** A Kafka topic name: letters, digits, `.`, `_` and `-`, at most 249 characters (Kafka's own rule). */
export const KAFKA_TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

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
    /**
     * Kafka clusters job configs may read from (kafka-bronze-ingest), by name. Everything that
     * connects (brokers, security, credentials) is here, never in a job config: a tenant naming its
     * own brokers or options could read another tenant's topics. `tenants.<id>` grants the topics
     * a tenant may read: exact names and name prefixes; nothing is granted by default.
     */
    kafka: z
      .object({
        clusters: z
          .record(
            name(),
            z
              .object({
                // A list, or one comma-separated string (which a `${?VAR}` override can replace).
                'bootstrap-servers': z
                  .union([z.string().transform((s) => s.split(',').map((x) => x.trim())), z.array(z.string())])
                  .pipe(z.array(z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$/, 'a host:port')).min(1)),
                default: z.boolean().default(false),
                'security-protocol': z.enum(['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL']).default('PLAINTEXT'),
                sasl: z
                  .object({ mechanism: z.enum(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']), username: z.string().min(1), password: secretRef })
                  .strict()
                  .optional(),
                tls: z
                  .object({
                    // Paths on the Spark server (where the Kafka consumers run).
                    'truststore-location': z.string().startsWith('/', 'an absolute path on the Spark server').optional(),
                    'truststore-type': z.enum(['PEM', 'JKS', 'PKCS12']).optional(),
                    'truststore-password': secretRef.optional(),
                  })
                  .strict()
                  .optional(),
                tenants: z
                  .record(
                    name(),
                    z
                      .object({
                        topics: z.array(z.string().regex(KAFKA_TOPIC, 'a Kafka topic name')).default([]),
                        'topic-prefixes': z.array(z.string().regex(KAFKA_TOPIC, 'a Kafka topic name prefix')).default([]),
                      })
                      .strict(),
                  )
                  .default({}),
              })
              .strict()
              .superRefine((c, ctx) => {
                const sasl = c['security-protocol'].startsWith('SASL_');
                if (sasl && !c.sasl) ctx.addIssue({ code: 'custom', path: ['sasl'], message: `is required with security-protocol ${c['security-protocol']}` });
                if (!sasl && c.sasl) ctx.addIssue({ code: 'custom', path: ['sasl'], message: `needs security-protocol SASL_PLAINTEXT or SASL_SSL` });
                if (c.tls && !c['security-protocol'].endsWith('SSL'))
                  ctx.addIssue({ code: 'custom', path: ['tls'], message: 'needs security-protocol SSL or SASL_SSL' });
              }),
          )
          .default({}),
      })
      .strict()
      .default({ clusters: {} }),
    /** The environment variables job configs may read with `${VAR}` / `${?VAR}`: none unless listed. */
    'config-env': z.object({ allow: z.array(configEnvName).default([]) }).strict().default({ allow: [] }),
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
