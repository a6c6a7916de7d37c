import { z } from 'zod';
import { ConfigError } from '../../core/errors.js';
import { secretRef } from '../../core/config/platform.js';
import { columnName, expression, isoDate, name, tableName } from '../../core/config/validate.js';
import { alias, col, eq, fn, lit } from '../../spark/plan/expressions.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import { Query } from '../../spark/plan/query.js';
import type { OptionValue } from '../../spark/plan/relations.js';
import type { JobContext, JobPlan } from '../template.js';
import { queryStep } from '../steps.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import {
  BRONZE_SESSION_CONF,
  BRONZE_STAMPS,
  SNAPSHOT_DATE,
  bronzeFormatKeys,
  bronzeOutput,
  bronzeRef,
  bronzeShape,
  bronzeShapeKeys,
  checkBronzeCatalog,
  checkBronzePartitionBy,
  readBronze,
  stampBronze,
  writeBronze,
} from '../layers/bronze.js';

/**
 * jdbc-snapshot-ingest: snapshot one RDBMS table (or the tenant's own query) through Spark's JDBC
 * source into the tenant's bronze layer, as metadata-stamped parquet under
 * `<storage-root>/bronze/<target.table>` partitioned by `_snapshot_date` (+ `target.partition-by`).
 *
 * A rerun of the same snapshot date replaces exactly that date's partition (Spark's dynamic partition
 * overwrite); other dates are never touched. Schema-version 1 is the seed project's shape, with one
 * deliberate break: a literal `source.password` is refused (exit 78). Passwords are references
 * (`{ env = NAME }` or `{ file = /mounted/secret }`) or come from a named platform connection.
 */

const TEMPLATE = 'jdbc-snapshot-ingest';

/**
 * JDBC sub-protocols an inline `source.url` may use, each with the driver classes it may name. A
 * tenant never picks an arbitrary class: the server would load and instantiate it.
 */
const INLINE_DRIVERS = {
  postgresql: ['org.postgresql.Driver'],
  sqlite: ['org.sqlite.JDBC'],
  mysql: ['com.mysql.cj.jdbc.Driver'],
  mariadb: ['org.mariadb.jdbc.Driver'],
  sqlserver: ['com.microsoft.sqlserver.jdbc.SQLServerDriver'],
  oracle: ['oracle.jdbc.OracleDriver', 'oracle.jdbc.driver.OracleDriver'],
  db2: ['com.ibm.db2.jcc.DB2Driver'],
} as const satisfies Record<string, readonly string[]>;
const INLINE_PROTOCOLS = Object.keys(INLINE_DRIVERS) as (keyof typeof INLINE_DRIVERS)[];

/**
 * A source table as the database names it: `orders`, `public.orders`, `crm.public.orders`. Spark
 * splices `dbtable` into its own SELECT, so only plain identifier parts pass (no quotes, no spaces).
 */
const SOURCE_TABLE = /^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$/;

/**
 * The shape of an inline url per sub-protocol, and the driver parameters it may set: an allow-list.
 * Drivers read far more from their urls than a server address: classes to load (PostgreSQL's socket
 * and SSL factories, MySQL's interceptors), files to read or write (key stores, log files), JNDI names
 * to look up (DB2's client reroute), the server's own identity to authenticate with (SQL Server's
 * managed identity), other hosts to fetch a database from (SQLite's `:resource:`). Each driver
 * version adds more, so nothing is refused by name: an inline url names a host (or, SQLite, an
 * absolute file), a database and the parameters below, and nothing else. Anything more belongs in a
 * platform connection (jdbc.connections), which the platform writes. No user or password either:
 * those are source.user and source.password.
 */
const HOST_PORT = String.raw`(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?`;
const DATABASE = String.raw`[A-Za-z0-9_$.-]+`;
const PARAM_VALUE = /^[A-Za-z0-9_.:/+%-]*$/;
interface InlineUrl {
  /** The url's address part (everything before its parameters) and the form a message shows. */
  readonly address: RegExp;
  readonly form: string;
  /** How its parameters are written: after `?`, `&`-separated; or `;`-separated after the address. */
  readonly params: '?&' | ';' | ':;' | 'none';
  readonly allowed: readonly string[];
}
const INLINE_URLS: Record<keyof typeof INLINE_DRIVERS, InlineUrl> = {
  postgresql: {
    address: new RegExp(`^jdbc:postgresql://${HOST_PORT}(?:,${HOST_PORT})*/${DATABASE}$`),
    form: 'jdbc:postgresql://host[:port]/database[?parameters]',
    params: '?&',
    allowed: [
      'ssl',
      'sslmode',
      'currentSchema',
      'ApplicationName',
      'connectTimeout',
      'socketTimeout',
      'loginTimeout',
      'tcpKeepAlive',
      'readOnly',
      'targetServerType',
      'loadBalanceHosts',
      'defaultRowFetchSize',
      'prepareThreshold',
      'stringtype',
    ],
  },
  mysql: {
    address: new RegExp(`^jdbc:mysql://${HOST_PORT}(?:,${HOST_PORT})*/${DATABASE}$`),
    form: 'jdbc:mysql://host[:port]/database[?parameters]',
    params: '?&',
    allowed: [
      'useSSL',
      'sslMode',
      'requireSSL',
      'verifyServerCertificate',
      'serverTimezone',
      'connectionTimeZone',
      'characterEncoding',
      'useUnicode',
      'connectTimeout',
      'socketTimeout',
      'zeroDateTimeBehavior',
      'tinyInt1isBit',
      'useCursorFetch',
      'defaultFetchSize',
    ],
  },
  mariadb: {
    address: new RegExp(`^jdbc:mariadb://${HOST_PORT}(?:,${HOST_PORT})*/${DATABASE}$`),
    form: 'jdbc:mariadb://host[:port]/database[?parameters]',
    params: '?&',
    allowed: ['sslMode', 'useSsl', 'serverTimezone', 'connectTimeout', 'socketTimeout', 'tinyInt1isBit', 'useCursorFetch', 'defaultFetchSize'],
  },
  sqlserver: {
    address: new RegExp(String.raw`^jdbc:sqlserver://(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?:\\[A-Za-z0-9_$-]+)?(?::\d{1,5})?$`),
    form: 'jdbc:sqlserver://host[\\instance][:port][;parameters]',
    params: ';',
    allowed: [
      'databaseName',
      'database',
      'encrypt',
      'trustServerCertificate',
      'hostNameInCertificate',
      'applicationName',
      'applicationIntent',
      'loginTimeout',
      'socketTimeout',
      'multiSubnetFailover',
      'sendStringParametersAsUnicode',
    ],
  },
  oracle: {
    address: new RegExp(`^jdbc:oracle:thin:@(?://)?${HOST_PORT}[:/]${DATABASE}$`),
    form: 'jdbc:oracle:thin:@//host[:port]/service or jdbc:oracle:thin:@host:port:sid (no descriptor, no parameters)',
    params: 'none',
    allowed: [],
  },
  db2: {
    address: new RegExp(`^jdbc:db2://${HOST_PORT}/${DATABASE}$`),
    form: 'jdbc:db2://host[:port]/database[:parameters;]',
    params: ':;',
    allowed: ['sslConnection', 'currentSchema', 'loginTimeout', 'blockingReadConnectionTimeout', 'retrieveMessagesFromServerOnGetMessage'],
  },
  sqlite: {
    address: /^jdbc:sqlite:\/[^?;:*]+$/,
    form: 'jdbc:sqlite:/absolute/path.db (no parameters)',
    params: 'none',
    allowed: [],
  },
};

/** What is wrong with an inline url (credentials, another shape, a parameter off its list), or nothing. */
export function inlineUrlProblem(url: string): string | undefined {
  const protocol = /^jdbc:([a-z0-9]+):/.exec(url)?.[1];
  if (!protocol || !Object.hasOwn(INLINE_URLS, protocol)) return undefined; // the schema's own check names the protocols
  const shape = INLINE_URLS[protocol as keyof typeof INLINE_URLS];
  const credentials =
    'must not carry credentials or driver plug-ins (user, password, socket/ssl factories, …): use source.user and source.password { env = "NAME" }';
  if (/\/\/[^/?#;]*@/.test(url)) return credentials;
  let address = url;
  let params: string[] = [];
  const split = (at: number, sep: RegExp) => {
    address = url.slice(0, at);
    params = url
      .slice(at + 1)
      .split(sep)
      .filter((p) => p !== '');
  };
  if (shape.params === '?&' && url.includes('?')) split(url.indexOf('?'), /&/);
  else if (shape.params === ';' && url.includes(';')) split(url.indexOf(';'), /;/);
  else if (shape.params === ':;') {
    const m = /^(jdbc:db2:\/\/[^/]+\/[^:]+):(.*)$/.exec(url);
    if (m) split(m[1]!.length, /;/);
  }
  if (!shape.address.test(address)) return `must have the form ${shape.form}`;
  for (const p of params) {
    const eq = p.indexOf('=');
    const key = eq < 0 ? p : p.slice(0, eq);
    if (/^(user|password|pwd)$/i.test(key)) return credentials;
    const allowed = shape.allowed.find((a) => a.toLowerCase() === key.toLowerCase());
    if (!allowed)
      return `${credentials}; the parameter "${key}" is not one an inline jdbc:${protocol}: url may set (${shape.allowed.join(', ') || 'none'}): name a platform connection (jdbc.connections) for anything more`;
    if (eq < 0 || !PARAM_VALUE.test(p.slice(eq + 1))) return `the parameter "${key}" must be key=value with a plain value (letters, digits, _ . : / + % -)`;
  }
  return undefined;
}

const LITERAL_PASSWORD =
  'a literal password is not accepted (it would live in the orchestration repo and in logs): reference it as password { env = "NAME" } or password { file = "/mounted/secret" }, or name a platform connection in source.connection';

const bound = z.union([
  z.number().int('must be a whole number'),
  z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$/, 'must be a whole number, a date (2026-07-05) or a timestamp (2026-07-05 12:00:00)'),
]);

const targetBase = z
  .object({
    table: tableName().describe(
      'The bronze table: parquet under <storage-root>/bronze/<table> (v1), or <catalog>.<tenant>_bronze.<table> (v2 format iceberg/delta).',
    ),
    'snapshot-date': isoDate().describe('The date this snapshot stands for, e.g. --set target.snapshot-date={{ ds }}; its partition is replaced on a rerun.'),
    'partition-by': z.array(columnName()).default([]).describe('Source columns to partition by, after _snapshot_date.'),
  })
  .strict();

/** Partition columns: no duplicates, no bronze stamps (_snapshot_date always comes first). */
function checkPartitionBy(t: { 'partition-by': string[] }, ctx: z.RefinementCtx): void {
  const cols = t['partition-by'];
  cols.forEach((c, i) => {
    if (cols.findIndex((x) => x.toLowerCase() === c.toLowerCase()) !== i)
      ctx.addIssue({ code: 'custom', path: ['partition-by', i], message: `"${c}" appears twice` });
    if ((BRONZE_STAMPS as readonly string[]).includes(c.toLowerCase()))
      ctx.addIssue({ code: 'custom', path: ['partition-by', i], message: `"${c}" is a bronze metadata column (${SNAPSHOT_DATE} always comes first)` });
  });
}

const TARGET = 'The bronze snapshot to write.';
const targetV1 = targetBase.superRefine(checkPartitionBy).describe(TARGET);

/**
 * v2: the bronze layer may be an Iceberg or Delta table instead of bare parquet, partitioned and
 * given properties as silver and gold tables are (docs/table-shape.md), `_snapshot_date` first.
 */
const targetV2 = targetBase
  .extend({ ...bronzeFormatKeys, ...bronzeShapeKeys })
  .superRefine((t, ctx) => {
    checkBronzePartitionBy(t, ctx);
    checkBronzeCatalog(t, ctx);
  })
  .describe(TARGET);

/** A JDBC source (a table or a query, by a platform connection or an inline url), as every template reading a database takes it. */
export const jdbcSource = z
  .object({
    table: z
      .string()
      .regex(SOURCE_TABLE, 'must be a table name, optionally schema-qualified (public.orders): letters, digits, _ and $ in up to 3 dot-separated parts')
      .optional()
      .describe('The table to snapshot, as the database names it. Exactly one of table and query.'),
    query: z
      .string()
      .trim()
      .min(1, 'must not be empty')
      .max(100_000, 'is too long')
      .optional()
      .describe("The tenant's own SQL, run by the database with the connection's rights (Spark's JDBC `query` option). Exactly one of table and query."),
    where: expression('source.where')
      .optional()
      .describe(
        'A condition on the rows of source.table in the config expression language (docs/expressions.md); Spark pushes what it can down to the database.',
      ),
    connection: name().optional().describe('A named connection of the platform config (jdbc.connections.<name>): url, user and password come from there.'),
    url: z
      .string()
      .regex(new RegExp(`^jdbc:(${INLINE_PROTOCOLS.join('|')}):`), `must be a JDBC url of one of: ${INLINE_PROTOCOLS.map((p) => `jdbc:${p}:`).join(', ')}`)
      .optional()
      .describe('The JDBC url, when the platform allows inline urls (jdbc.inline-urls = allow); no credentials in it. Else name source.connection.'),
    user: z.string().min(1).optional().describe('The database user (with source.url).'),
    password: z
      .union([secretRef, z.string().describe(`Refused (exit 78): ${LITERAL_PASSWORD}`)])
      .optional()
      .describe('The database password by reference: { env = "NAME" } or { file = "/mounted/secret" } (with source.url); never a literal.'),
    driver: z
      .string()
      .regex(/^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)+$/, 'must be a Java class name such as org.postgresql.Driver')
      .optional()
      .describe("The JDBC driver class; must be the url protocol's own driver (org.postgresql.Driver for jdbc:postgresql:)."),
    'partition-column': columnName().optional().describe('A numeric, date or timestamp column: Spark reads num-partitions ranges of it in parallel.'),
    'lower-bound': bound
      .optional()
      .describe("The low end of partition-column's range (a number, date or timestamp); rows below it are still read, by the first partition."),
    'upper-bound': bound.optional().describe("The high end of partition-column's range; rows above it are still read, by the last partition."),
    'num-partitions': z
      .number()
      .int()
      .min(1)
      .max(256, 'at most 256 parallel connections')
      .optional()
      .describe('How many ranges (and connections) partition-column is split into.'),
    'fetch-size': z.number().int().min(1).max(1_000_000).optional().describe('Rows the JDBC driver fetches per round trip.'),
  })
  .strict()
  .describe('The database table or query to snapshot.')
  .superRefine((s, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: path ? [path] : [], message });
    // Seed v1 configs carried `password = "…"`: they keep working once the password is a reference.
    if (typeof s.password === 'string') issue('password', LITERAL_PASSWORD);
    if (s.table === undefined && s.query === undefined) issue('table', 'is required (or source.query)');
    if (s.table !== undefined && s.query !== undefined) issue('query', 'cannot be combined with source.table: give one of them');
    if (s.query !== undefined && s.where !== undefined) issue('where', 'filters source.table; with source.query put the condition inside the query');
    if (s.query !== undefined && s['partition-column'] !== undefined)
      issue('partition-column', 'needs source.table (Spark cannot partition a source.query); use source.table with source.where');
    const urlProblem = s.url === undefined ? undefined : inlineUrlProblem(s.url);
    if (s.connection !== undefined) {
      for (const k of ['url', 'user', 'password', 'driver'] as const)
        if (s[k] !== undefined) issue(k, `comes from the platform connection "${s.connection}"; remove it here`);
    } else if (s.url === undefined) {
      issue('connection', 'is required: name a platform connection (jdbc.connections.<name>) or give source.url');
    } else if (urlProblem !== undefined) {
      issue('url', urlProblem);
    } else if (s.driver !== undefined) {
      const protocol = /^jdbc:([a-z0-9]+):/.exec(s.url)?.[1] as keyof typeof INLINE_DRIVERS | undefined;
      const allowed: readonly string[] = protocol && Object.hasOwn(INLINE_DRIVERS, protocol) ? INLINE_DRIVERS[protocol] : [];
      if (!allowed.includes(s.driver)) issue('driver', `must be the ${protocol ?? 'url'}'s driver: ${allowed.join(' or ') || 'none known'}`);
    }
    const partitioned = ['lower-bound', 'upper-bound', 'num-partitions'] as const;
    if (s['partition-column'] === undefined) {
      for (const k of partitioned) if (s[k] !== undefined) issue(k, 'needs source.partition-column (the column whose range is split)');
    } else {
      for (const k of partitioned) if (s[k] === undefined) issue(k, 'is required with source.partition-column');
      const lo = s['lower-bound'];
      const hi = s['upper-bound'];
      if (lo !== undefined && hi !== undefined) {
        if (typeof lo !== typeof hi) issue('upper-bound', 'must be of the same kind as lower-bound (both numbers, or both dates/timestamps)');
        else if (lo >= hi) issue('upper-bound', 'must be greater than lower-bound');
      }
    }
  });

const source = jdbcSource;
const v2 = defineVersion(2, { sections: { source, target: targetV2 } });
/** The spec the plan is built from: the newest version's config. */
export type JdbcSnapshotIngestSpec = SpecOf<typeof v2.sections>;

/** v1 is the seed project's shape: parquet bronze only. */
const v1 = defineVersion(1, { sections: { source, target: targetV1 } }).migrate((c): JdbcSnapshotIngestSpec => ({
  tenant: c.tenant,
  source: c.source,
  target: { ...c.target, format: 'parquet' },
}));

/**
 * The rows of a JDBC source: its options from the platform connection or the inline url (the
 * password a secret, revealed only when the plan is sent), `where` applied; `origin` names it
 * without credentials; `untrusted` is the config path of its expression, for the steps that carry it.
 */
export function jdbcRows(
  ctx: JobContext,
  source: z.infer<typeof jdbcSource>,
  section: string,
): { rows: Query; origin: string; untrusted: { untrusted?: string[] } } {
  const connection = source.connection !== undefined ? ctx.jdbcConnection(source.connection, `${section}.connection`) : undefined;
  if (!connection && !ctx.inlineJdbcUrls)
    throw new ConfigError([
      {
        path: `${section}.url`,
        message:
          'the platform config does not allow job configs to give their own JDBC url (jdbc.inline-urls = deny): name a platform connection in source.connection',
      },
    ]);
  const url = connection?.url ?? source.url!;
  const user = connection?.user ?? source.user;
  const driver = connection?.driver ?? source.driver;
  const password =
    connection?.password ??
    (source.password !== undefined && typeof source.password !== 'string' ? ctx.secret(source.password, `${section}.password`) : undefined);

  const options: Record<string, OptionValue> = {
    url,
    ...(source.table !== undefined ? { dbtable: source.table } : { query: source.query! }),
    ...(user !== undefined ? { user } : {}),
    ...(password !== undefined ? { password: { secret: password } } : {}),
    ...(driver !== undefined ? { driver } : {}),
    ...(source['fetch-size'] !== undefined ? { fetchsize: String(source['fetch-size']) } : {}),
    ...(source['partition-column'] !== undefined
      ? {
          partitionColumn: source['partition-column'],
          lowerBound: String(source['lower-bound']),
          upperBound: String(source['upper-bound']),
          numPartitions: String(source['num-partitions']),
        }
      : {}),
  };
  let rows = Query.read('jdbc', { options });
  if (source.where !== undefined) rows = rows.filter(configExpr(source.where));
  // Steps whose plan carries source.where are checked by the tenant policy before they run.
  const untrusted = source.where !== undefined ? { untrusted: [`${section}.where`] } : {};

  // Where the rows came from, without credentials: the connection's name, or the url's host.
  const origin = `${connection ? connection.name : describeUrl(url)}/${source.table ?? 'query'}`;
  return { rows, origin, untrusted };
}

function plan(ctx: JobContext, config: JdbcSnapshotIngestSpec): JobPlan {
  const { tenant } = ctx;
  const { source, target } = config;
  const snapshotDate = lit({ date: target['snapshot-date'] });

  const { rows, origin, untrusted } = jdbcRows(ctx, source, 'source');
  const stamped = stampBronze(rows, { tenant: tenant.id, origin, snapshotDate: target['snapshot-date'] });
  const bronze = bronzeRef(ctx, target, 'target');
  const output = bronzeOutput(bronze);

  const probe = queryStep({
    id: 'probe-source',
    ...untrusted,
    title: `Check that ${origin} returns rows`,
    // An empty snapshot would replace nothing (a dynamic overwrite only replaces partitions it
    // writes): say so and skip rather than report a success that left an older copy in place.
    query: rows.select(alias(lit(1), 'one')).limit(1),
    columns: ['one'],
    interpret: (r) => (r.length === 0 ? { skip: `the source ${origin} returned no rows: nothing written for snapshot-date ${target['snapshot-date']}` } : {}),
  });
  const count = queryStep({
    id: 'count-snapshot',
    title: `Count the rows of ${SNAPSHOT_DATE}=${target['snapshot-date']} in ${bronze.name}`,
    query: readBronze(bronze)
      .rows.filter(eq(col(SNAPSHOT_DATE), snapshotDate))
      .aggregate([], [alias(fn('count', lit(1)), 'rows')]),
    // diff: the date's rows after the write are the snapshot's rows.
    predict: stamped.aggregate([], [alias(fn('count', lit(1)), 'rows')]),
    ...untrusted,
    columns: ['rows'],
    interpret: (r) => {
      const n = Number(r[0]?.rows ?? 0);
      return { output: { ...output, metrics: { rowsWritten: n } }, metrics: { rowsRead: n, rowsWritten: n } };
    },
  });
  return {
    sessionConf: BRONZE_SESSION_CONF,
    steps: [
      probe,
      ...writeBronze(bronze, stamped, {
        snapshotDate: target['snapshot-date'],
        shape: bronzeShape(bronze, target),
        origin,
        configPath: 'target.table',
        ...(source.where !== undefined ? { untrusted: ['source.where'] } : {}),
      }),
      count,
    ],
  };
}

/** `db.example:5432/crm` for `jdbc:postgresql://user@db.example:5432/crm?ssl=true`; `sqlite:shop.db` for a file. */
export function describeUrl(url: string): string {
  const rest = url.replace(/^jdbc:/, '');
  const m = /^([a-z0-9]+):\/\/(?:[^/@?#]*@)?([^/?#;]*)(\/[^?#;]*)?/i.exec(rest);
  if (m) return `${m[2]}${(m[3] ?? '').replace(/\/+$/, '')}`;
  const [protocol, ...path] = rest.split(':');
  const file = path.join(':').split(/[?;]/)[0]!.split('/').pop();
  return `${protocol}:${file || 'memory'}`;
}

export const jdbcSnapshotIngest = defineTemplate({
  name: TEMPLATE,
  layer: 'bronze',
  summary:
    'Snapshot one RDBMS table (or query) through JDBC into the bronze layer as metadata-stamped parquet (or, v2, an Iceberg or Delta table) partitioned by _snapshot_date; a rerun replaces that date only.',
  stability: 'beta',
  newest: v2,
  older: [v1],
  plan,
});
