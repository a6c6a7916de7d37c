import { z } from 'zod';
import { isSecretLikeName } from './hocon.js';
import { storageUriProblem } from '../naming.js';
import { catalogName, name, storageUri } from './validate.js';
import { nullPrototype } from './own.js';
import { LAYERS } from '../naming.js';
import { isUnderRoot } from '../tenant.js';

/**
 * The platform config (`--env`), owned by the platform team: where Spark is, which catalogs exist,
 * named JDBC connections, and which storage roots each tenant may use. Secrets appear here only as
 * references (`{ env = NAME }` or `{ file = /mounted/secret }`), resolved at the moment of use.
 */

export const secretRef = z.union([
  z
    .object({
      env: z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
        .describe('The environment variable holding the secret.'),
    })
    .strict(),
  z
    .object({
      file: z
        .string()
        .startsWith('/', 'a mounted file must be an absolute path')
        .describe('The mounted file holding the secret (e.g. a Kubernetes secret volume).'),
    })
    .strict(),
]);
export type SecretRef = z.infer<typeof secretRef>;

/** An environment variable job configs may read: never one that can hold a credential. */
const configEnvName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
  .refine((n) => !isSecretLikeName(n), {
    message:
      'names a variable that can hold a credential (TOKEN, PASSWORD, SECRET, KEY, CREDENTIAL, AUTH, SPARK_REMOTE): job configs may never read it; pass secrets as references',
  });

/**
 * Where OpenLineage run events go (docs/lineage.md). Trusted like the rest of this file: the
 * receiver's url and token are the platform team's. Without `lineage`, no event is built or sent.
 */
const lineageTransport = z.discriminatedUnion('type', [
  z.object({ type: z.literal('console') }).strict(),
  z.object({ type: z.literal('file'), path: z.string().startsWith('/', 'must be an absolute path') }).strict(),
  z
    .object({
      type: z.literal('http'),
      url: z.string().regex(/^https?:\/\/[^\s/@]+(\/[^\s]*)?$/, 'an http(s) url without credentials (give a token reference instead)'),
      endpoint: z
        .string()
        .regex(/^[A-Za-z0-9_./-]*$/, 'a url path')
        .default('api/v1/lineage'),
      token: secretRef.optional(),
    })
    .strict(),
]);

const lineageSchema = z
  .object({
    // The job namespace is `<namespace>.<tenant>`: one namespace per tenant on one platform.
    namespace: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/, 'letters, digits and _ . : -')
      .default('lakehouse-jobs'),
    // Each event's sending (all transports at once) ends after this long: lineage never holds a job up longer.
    'timeout-ms': z.number().int().min(1).max(60_000).default(5_000),
    transports: z.array(lineageTransport).default([]),
    // The OpenLineage namespace of a catalog's table names (the symlink of a table's location), e.g.
    // `hive://metastore:9083`; by default the catalog's name.
    'catalog-namespaces': z.record(catalogName(), z.string().min(1)).transform(nullPrototype).prefault({}),
  })
  .strict();

export type LineageConfig = z.infer<typeof lineageSchema>;

/**
 * The run ledger (docs/history.md, "The job_runs table"): every run that reached Spark appends its
 * status document as one row of this table. The platform's alone: no tenant's session may read or
 * write it, and a job config cannot name, enable, disable or redirect it (it has no key for it).
 */
const ledgerSchema = z
  .object({
    catalog: catalogName().describe('The catalog of the table (one of `catalogs`): Iceberg or Delta, as that catalog holds.'),
    table: z
      .string()
      .regex(/^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/, 'namespace.table, each [a-z][a-z0-9_]*')
      .refine((t) => !LAYERS.some((l) => t.split('.')[0]!.endsWith(`_${l}`)), {
        message: "must not be in a tenant's layer namespace (<tenant>_bronze|silver|gold)",
      })
      .default('platform.job_runs')
      .describe('namespace.table in that catalog; default platform.job_runs.'),
    location: storageUri().describe("Where the table's files live: outside every tenant's storage and read roots."),
  })
  .strict();
export type LedgerConfig = z.infer<typeof ledgerSchema>;
/** An http(s) address without credentials in it (they belong in secret references). */
const httpUrl = z.url({ protocol: /^https?$/, error: 'an http:// or https:// URL' }).refine((u) => !/^[a-z]+:\/\/[^/]*@/i.test(u), {
  message: 'must not carry credentials (user:password@): give them as secret references',
});

/**
 * Iceberg catalog types and their settings (docs/catalogs.md). The Spark server owns its catalogs:
 * these describe a catalog so the runner can validate configs against it and, for REST, reach it
 * for checks (`ping`); the runner never defines a catalog on a Spark session. Without a type the
 * catalog is only a name the server knows.
 */
export const CATALOG_TYPES = {
  rest: { required: ['uri'], allowed: ['uri', 'warehouse', 'oauth2', 'token'] },
  jdbc: { required: ['uri', 'warehouse'], allowed: ['uri', 'warehouse', 'user', 'password'] },
  hadoop: { required: ['warehouse'], allowed: ['warehouse'] },
  hive: { required: ['uri'], allowed: ['uri', 'warehouse'] },
} as const;
export type CatalogType = keyof typeof CATALOG_TYPES;
const SETTINGS = ['uri', 'warehouse', 'oauth2', 'token', 'user', 'password'] as const;

const catalogSchema = z
  .object({
    format: z.enum(['iceberg', 'delta']),
    default: z.boolean().default(false),
    type: z.enum(Object.keys(CATALOG_TYPES) as [CatalogType, ...CatalogType[]]).optional(),
    /** rest: the catalog's base URL; jdbc: a jdbc: URL; hive: the metastore's thrift:// URI(s). */
    uri: z.string().min(1).optional(),
    /** The warehouse: a storage URI (jdbc, hadoop, hive), or for REST the name or location the server expects. */
    warehouse: z.string().min(1).optional(),
    /** REST: OAuth2 client credentials; the secret is a reference, resolved only to fetch a token. */
    oauth2: z
      .object({
        'client-id': z.string().min(1),
        'client-secret': secretRef,
        /** The token endpoint; default `<uri>/v1/oauth/tokens` (the REST spec's, deprecated there). */
        'server-uri': httpUrl.optional(),
        scope: z
          .string()
          .regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'OAuth2 scopes separated by single spaces')
          .optional(),
      })
      .strict()
      .optional(),
    /** REST: a bearer token, instead of oauth2. */
    token: secretRef.optional(),
    /** JDBC: the database user and password (a reference). */
    user: z.string().min(1).optional(),
    password: secretRef.optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.type === undefined) {
      for (const key of SETTINGS)
        if (c[key] !== undefined)
          ctx.addIssue({ code: 'custom', path: [key], message: `needs a catalog type (type = ${Object.keys(CATALOG_TYPES).join(' | ')})` });
      return;
    }
    if (c.format !== 'iceberg') {
      ctx.addIssue({ code: 'custom', path: ['type'], message: `catalog types are Iceberg's: a ${c.format} catalog has none` });
      return;
    }
    const { required, allowed } = CATALOG_TYPES[c.type];
    for (const key of required) if (c[key] === undefined) ctx.addIssue({ code: 'custom', path: [key], message: `is required for a ${c.type} catalog` });
    for (const key of SETTINGS)
      if (c[key] !== undefined && !(allowed as readonly string[]).includes(key))
        ctx.addIssue({ code: 'custom', path: [key], message: `is not a setting of a ${c.type} catalog (${allowed.join(', ')})` });
    if (c.oauth2 && c.token) ctx.addIssue({ code: 'custom', path: ['token'], message: 'give oauth2 or token, not both' });
    const uriProblem = c.uri === undefined ? undefined : catalogUriProblem(c.type, c.uri);
    if (uriProblem) ctx.addIssue({ code: 'custom', path: ['uri'], message: uriProblem });
    if (c.warehouse !== undefined && c.type !== 'rest') {
      const problem = storageUriProblem(c.warehouse);
      if (problem) ctx.addIssue({ code: 'custom', path: ['warehouse'], message: problem });
    }
  });

function catalogUriProblem(type: CatalogType, uri: string): string | undefined {
  if (type === 'rest') {
    const r = httpUrl.safeParse(uri);
    return r.success ? undefined : r.error.issues[0]!.message;
  }
  if (type === 'jdbc') {
    if (!uri.startsWith('jdbc:')) return 'a jdbc: URL';
    // A password in the URL would reach logs and plans: it belongs in `password`, a reference.
    if (/[?&;:](password|pwd)=/i.test(uri)) return 'must not carry a password: give it as password = { env = NAME }';
    return undefined;
  }
  if (type === 'hive')
    return /^thrift:\/\/[A-Za-z0-9.-]+:\d+(,thrift:\/\/[A-Za-z0-9.-]+:\d+)*$/.test(uri) ? undefined : 'thrift://host:port, several separated by commas';
  return undefined;
}
/**
 * What a tenant's logic may allocate and how long its operations may run, enforced on the Spark
 * Connect server by the tenant policy (docs/security-policy.md, "Bounded allocation"): sizes of the
 * values and rows an expression or gold SQL can build are checked before the plan runs, row growth
 * and time by the server's watchdog while it runs.
 */
const LIMIT_DEFAULTS = {
  'value-chars': 1_000_000,
  'value-factor': 64,
  'collection-elements': 100_000,
  'generated-rows': 10_000_000,
  'row-growth': 1_000,
  'row-floor': 10_000_000,
  'step-seconds': 3_600,
  'plan-nodes': 100_000,
} as const;
const limitFields = {
  'value-chars': z
    .number()
    .int()
    .min(1)
    .max(2_000_000_000)
    .describe("Characters a value built by tenant logic may hold besides copies of the row (repeat, lpad, format_string's widths …); default 1,000,000."),
  'value-factor': z
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .describe('Times the row a value built by tenant logic may be (concat, nested repeats multiply); default 64.'),
  'collection-elements': z
    .number()
    .int()
    .min(1)
    .max(1_000_000_000)
    .describe('Elements of an array tenant logic builds (array_repeat, sequence); default 100,000.'),
  'generated-rows': z.number().int().min(1).max(1_000_000_000_000).describe('Rows a range() or stack() of tenant logic may produce; default 10,000,000.'),
  'row-growth': z
    .number()
    .int()
    .min(1)
    .max(1_000_000_000)
    .describe(
      "The watchdog cancels an operation (65) when an operator's output rows exceed this multiple of the rows it read (a join exploding); default 1,000.",
    ),
  'row-floor': z
    .number()
    .int()
    .min(1)
    .max(1_000_000_000_000)
    .describe("Rows an operator may always produce, whatever it read (the watchdog's floor); default 10,000,000."),
  'step-seconds': z.number().int().min(1).max(604_800).describe('The watchdog cancels an operation (75) that runs longer than this; default 3600.'),
  'plan-nodes': z
    .number()
    .int()
    .min(1)
    .max(100_000_000)
    .describe(
      'Plan and expression nodes tenant logic may expand to before the server analyses it (CTE references, grouping sets and repeated expressions counted as what they expand to); default 100,000.',
    ),
};
export const limitsSchema = z
  .object({
    'value-chars': limitFields['value-chars'].default(LIMIT_DEFAULTS['value-chars']),
    'value-factor': limitFields['value-factor'].default(LIMIT_DEFAULTS['value-factor']),
    'collection-elements': limitFields['collection-elements'].default(LIMIT_DEFAULTS['collection-elements']),
    'generated-rows': limitFields['generated-rows'].default(LIMIT_DEFAULTS['generated-rows']),
    'row-growth': limitFields['row-growth'].default(LIMIT_DEFAULTS['row-growth']),
    'row-floor': limitFields['row-floor'].default(LIMIT_DEFAULTS['row-floor']),
    'step-seconds': limitFields['step-seconds'].default(LIMIT_DEFAULTS['step-seconds']),
    'plan-nodes': limitFields['plan-nodes'].default(LIMIT_DEFAULTS['plan-nodes']),
  })
  .strict()
  .default(LIMIT_DEFAULTS);
/** A tenant's own limits (`tenants.<id>.limits`): any of the platform's, overriding them. */
const tenantLimitsSchema = z.object(limitFields).partial().strict();
export type Limits = z.infer<typeof limitsSchema>;

/** The platform's default retention floor for table maintenance: 7 days (Delta's own default check). */
export const RETENTION_FLOOR_HOURS = 168;
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
    catalogs: z.record(catalogName(), catalogSchema).transform(nullPrototype).prefault({}),
    tenants: z
      .record(
        name(),
        z
          .object({
            'storage-roots': z.array(storageUri()).min(1),
            // Read-only grants checked by the tenant policy (src/spark/policy): shared
            // namespaces (`catalog.namespace`) and where their files live. Writes stay the templates'.
            'read-namespaces': z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*\.[a-z][a-z0-9_]*$/, 'a catalog.namespace')).default([]),
            'read-roots': z.array(storageUri()).default([]),
            limits: tenantLimitsSchema.optional().describe("This tenant's limits, overriding the platform's `limits` key by key."),
            // A Spark Connect server of the tenant's own, where a shared server's isolation is not
            // enough (docs/security.md): every run of the tenant goes there, never to spark.remote.
            spark: z
              .object({
                remote: z.string().min(1).describe("The tenant's own Spark Connect server (sc://…), used instead of spark.remote for its runs."),
                token: secretRef.optional().describe("That server's token, by reference (the platform's spark.token is never sent to it)."),
              })
              .strict()
              .optional(),
            // The secrets a job config of this tenant may name by reference (an inline JDBC url's
            // password): without a grant it names none, or it could send the runner's own
            // credentials (any variable, any mounted file) to a server of its choosing.
            secrets: z
              .object({
                env: z
                  .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'))
                  .default([])
                  .describe('Environment variables the tenant may name as { env = NAME }.'),
                'file-roots': z
                  .array(
                    z
                      .string()
                      .regex(/^(\/[A-Za-z0-9._-]+)+\/?$/, 'an absolute directory path')
                      .refine((p) => !p.split('/').some((s) => s === '.' || s === '..'), 'no . or .. segments'),
                  )
                  .default([])
                  .describe('Directories whose files the tenant may name as { file = /dir/file }.'),
              })
              .strict()
              .default({ env: [], 'file-roots': [] }),
          })
          .strict(),
      )
      .transform(nullPrototype)
      .optional(),
    /**
     * Who says which tenant a run is for. A job config's `tenant.id` is the tenant's own claim: under
     * a platform config that lists several tenants, a config could claim any of them. `required`:
     * every run must be bound by the orchestrator (`--tenant`, `LAKEHOUSE_TENANT`, from what the
     * platform controls, e.g. the pod template), and the config's tenant must be that one.
     * `optional`: a binding is checked when given. A platform config that lists only one tenant
     * (one per tenant's deployment) binds by itself.
     */
    'tenant-binding': z
      .enum(['optional', 'required'])
      .default('optional')
      .describe("required: every run needs the orchestrator's --tenant/LAKEHOUSE_TENANT, and the job config's tenant.id must equal it"),
    jdbc: z
      .object({
        connections: z
          .record(
            name(),
            z
              .object({
                url: z.string().startsWith('jdbc:'),
                user: z.string().optional(),
                password: secretRef.optional(),
                driver: z.string().optional(),
                /**
                 * The tenants whose job configs may name this connection. A connection is a
                 * database with the platform's credentials, hence some tenant's rows: without this
                 * list it is usable only where the platform config lists at most one tenant (one
                 * deployment per tenant), never by every tenant of a shared platform config.
                 */
                tenants: z.array(name()).optional(),
              })
              .strict(),
          )
          .transform(nullPrototype)
          .prefault({}),
        /**
         * Whether a job config may give its own `source.url`. An inline url makes the Spark server
         * open whatever the tenant names: any host it can reach, any SQLite file it can read (the
         * local stack's Iceberg catalog is one). Platforms that serve untrusted tenants keep `deny`
         * and name connections instead.
         */
        'inline-urls': z.enum(['deny', 'allow']).default('deny'),
      })
      .strict()
      .prefault({}),
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
                  .transform(nullPrototype)
                  .prefault({}),
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
          .transform(nullPrototype)
          .prefault({}),
      })
      .strict()
      .prefault({}),
    /**
     * Schema registries (the Confluent Schema Registry API) Avro values are read with
     * (kafka-bronze-ingest's value-format avro), by name. The URL may be a reference (it can carry
     * credentials); the password always is. A job reads only the subjects of the topics it may read
     * (`<topic>-value`), so a registry needs no tenant grant of its own.
     */
    'schema-registries': z
      .record(
        name(),
        z
          .object({
            url: z
              .union([z.string().regex(/^https?:\/\/[^\s]+$/, 'an http:// or https:// URL'), secretRef])
              .describe("The registry's Confluent-compatible API (e.g. http://registry:8080/apis/ccompat/v7), or a reference to it."),
            default: z.boolean().default(false),
            username: z.string().min(1).optional().describe('HTTP basic authentication user.'),
            password: secretRef.optional().describe('HTTP basic authentication password, by reference.'),
          })
          .strict()
          .superRefine((r, ctx) => {
            if ((r.username === undefined) !== (r.password === undefined))
              ctx.addIssue({ code: 'custom', path: [r.username === undefined ? 'username' : 'password'], message: 'username and password go together' });
          }),
      )
      .transform(nullPrototype)
      .prefault({}),
    /** The environment variables job configs may read with `${VAR}` / `${?VAR}`: none unless listed. */
    'config-env': z
      .object({ allow: z.array(configEnvName).default([]) })
      .strict()
      .default({ allow: [] }),
    lineage: lineageSchema.optional(),
    ledger: ledgerSchema.optional().describe("Append every run's status document to a platform table (off without this key)."),
    /**
     * Which log store the platform's Spark servers give Delta for s3:// and s3a:// tables
     * (docs/object-storage.md, "Delta on S3"): Delta's default `single-driver` makes a commit safe
     * only against the commits of the same server (JVM); `dynamodb` (S3DynamoDBLogStore on every
     * server) makes it safe across servers. The runner refuses what would have several servers
     * commit to one Delta table on S3 under `single-driver`.
     */
    delta: z
      .object({
        's3-log-store': z
          .enum(['single-driver', 'dynamodb'])
          .default('single-driver')
          .describe(
            "The log store of the platform's Spark servers for Delta tables on s3:// and s3a://: Delta's default single-driver (commits safe within one server only) or dynamodb (S3DynamoDBLogStore on every server).",
          ),
      })
      .strict()
      .default({ 's3-log-store': 'single-driver' }),
    limits: limitsSchema.describe("What tenants' logic may allocate and how long its operations may run (tenants.<id>.limits overrides)."),
    /**
     * Table maintenance (the table-maintenance template): no snapshot, removed file or orphan younger
     * than this many hours is deleted, whatever a job config asks. A running job reads and writes files
     * its commit does not reference yet; only a retention longer than any job keeps them safe.
     */
    maintenance: z
      .object({ 'retention-floor-hours': z.number().int().min(0).max(87_600).default(RETENTION_FLOOR_HOURS) })
      .strict()
      .default({ 'retention-floor-hours': RETENTION_FLOOR_HOURS }),
  })
  .strict()
  .superRefine((p, ctx) => {
    if (p.ledger) ledgerProblems(p, p.ledger).forEach((issue) => ctx.addIssue({ code: 'custom', ...issue }));
    // A grant to a tenant the platform config does not list is a typo that would grant nobody, or a
    // tenant added later without review.
    if (!p.tenants) return;
    const known = Object.keys(p.tenants);
    // A server of a tenant's own isolates it only if a job config cannot claim another tenant.
    const ownServers = known.filter((t) => p.tenants![t]!.spark !== undefined);
    if (ownServers.length && known.length > 1 && p['tenant-binding'] !== 'required')
      ctx.addIssue({
        code: 'custom',
        path: ['tenant-binding'],
        message: `must be required where tenants have Spark Connect servers of their own (${ownServers.map((t) => `tenants.${t}.spark`).join(', ')}): otherwise a job config chooses the server by the tenant it claims`,
      });
    for (const [name, c] of Object.entries(p.jdbc.connections))
      c.tenants?.forEach((t, i) => {
        if (!known.includes(t))
          ctx.addIssue({
            code: 'custom',
            path: ['jdbc', 'connections', name, 'tenants', i],
            message: `"${t}" is not a tenant of this platform config (tenants: ${known.join(', ')})`,
          });
      });
  });

export type PlatformConfig = z.infer<typeof platformSchema>;

/**
 * The ledger must be out of every tenant's reach: its catalog one the platform lists, its files
 * under no tenant's storage or read root (a tenant could read them as files), its namespace no
 * tenant's read grant.
 */
function ledgerProblems(
  p: Pick<z.infer<typeof platformSchema>, 'catalogs' | 'tenants' | 'delta'>,
  ledger: LedgerConfig,
): { path: (string | number)[]; message: string }[] {
  const out: { path: (string | number)[]; message: string }[] = [];
  if (!Object.hasOwn(p.catalogs, ledger.catalog))
    out.push({
      path: ['ledger', 'catalog'],
      message: `"${ledger.catalog}" is not a catalog of this platform config (catalogs: ${Object.keys(p.catalogs).join(', ')})`,
    });
  // Every run appends on its own remote: with tenants on servers of their own, several servers
  // commit to the ledger, which Delta's single-driver log store on S3 does not make safe (a commit
  // of one server can replace another's at the same version: a run's row silently lost).
  const ownServers = Object.entries(p.tenants ?? {})
    .filter(([, t]) => t.spark)
    .map(([id]) => id);
  if (p.catalogs[ledger.catalog]?.format === 'delta' && /^s3a?:\/\//i.test(ledger.location) && ownServers.length && p.delta['s3-log-store'] === 'single-driver')
    out.push({
      path: ['ledger', 'catalog'],
      message: `is a Delta catalog and the ledger is on S3 (${ledger.location}), where Delta's default log store makes a commit safe only against the same Spark server's, and the runs of tenants ${ownServers.join(', ')} append to it from servers of their own: a row could be lost. Put the ledger in an Iceberg catalog, or give every server Delta's DynamoDB log store and set delta.s3-log-store = dynamodb (docs/object-storage.md, "Delta on S3")`,
    });
  const namespace = `${ledger.catalog}.${ledger.table.split('.')[0]}`.toLowerCase();
  for (const [id, t] of Object.entries(p.tenants ?? {})) {
    if ([...t['storage-roots'], ...t['read-roots']].some((root) => isUnderRoot(ledger.location, [root]) || isUnderRoot(root, [ledger.location])))
      out.push({
        path: ['ledger', 'location'],
        message: `overlaps the storage or read roots of tenant ${id}: the ledger's files must be out of every tenant's reach`,
      });
    if (t['read-namespaces'].some((n) => n.toLowerCase() === namespace))
      out.push({ path: ['tenants', id, 'read-namespaces'], message: `grants ${namespace}, the run ledger's namespace: no tenant may read the ledger` });
  }
  return out;
}

/** Without `--env`: no tenant policy, and the local stack's catalogs. */
export const localPlatformDefaults: PlatformConfig = platformSchema.parse({
  // hms: the catalog the seed project's configs name (scripts/stack/spark-connect.conf defines it).
  catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' }, hms: { format: 'iceberg' } },
  // Without a platform config the runner serves one developer on their own machine.
  jdbc: { 'inline-urls': 'allow' },
});

// Secret resolution needs no schema: it lives apart, so `ping` resolves a token without zod.
export { resolveSecret } from './secret-ref.js';
