/**
 * OpenLineage dataset names (the spec's "Naming" page): a dataset is `namespace` (its datasource,
 * `scheme://authority`) plus `name` (the path or the table within it). Only locations, hosts and
 * object names are used: user names, passwords and url parameters never become part of a name.
 */

export interface DatasetId {
  readonly namespace: string;
  readonly name: string;
}

/**
 * Files and table locations. Local files: namespace `file`, name the absolute path. Object stores
 * and file systems: namespace `scheme://authority` (`s3a`/`s3n` are `s3`, as Spark's OpenLineage
 * integration names them), name the path without its leading slash.
 */
export function locationDataset(uri: string): DatasetId {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/]*))?(\/.*)?$/.exec(uri);
  if (!m) return { namespace: 'file', name: uri };
  const scheme = m[1]!.toLowerCase();
  // Credentials in a url (`s3a://key:secret@bucket`) are stripped; Azure's `container@account` is a name.
  const azure = /^(abfss?|wasbs?)$/.test(scheme);
  const authority = (m[2] ?? '').replace(azure ? /^[^@]*:[^@]*@/ : /^[^@]*@/, '');
  const path = (m[3] ?? '/').replace(/\/+$/, '') || '/';
  if (scheme === 'file') return { namespace: 'file', name: path };
  const norm = scheme === 's3a' || scheme === 's3n' ? 's3' : scheme;
  return { namespace: `${norm}://${authority}`, name: path.replace(/^\/+/, '') };
}

/** The spec's scheme and default port of a JDBC sub-protocol. */
const JDBC_SCHEMES: Record<string, { scheme: string; port?: number; defaultSchema?: string; database: 'path' | 'databaseName' }> = {
  postgresql: { scheme: 'postgres', port: 5432, defaultSchema: 'public', database: 'path' },
  mysql: { scheme: 'mysql', port: 3306, database: 'path' },
  mariadb: { scheme: 'mysql', port: 3306, database: 'path' },
  sqlserver: { scheme: 'sqlserver', port: 1433, defaultSchema: 'dbo', database: 'databaseName' },
  db2: { scheme: 'db2', port: 50000, database: 'path' },
  redshift: { scheme: 'redshift', port: 5439, defaultSchema: 'public', database: 'path' },
  oracle: { scheme: 'oracle', port: 1521, database: 'path' },
};

/**
 * A table read or written through JDBC: Postgres `postgres://{host}:{port}`, name
 * `{database}.{schema}.{table}`; MySQL `mysql://{host}:{port}`, `{database}.{table}`; SQLite (a file)
 * `sqlite://{path}`, `{table}`. `undefined` for a url it cannot read: no dataset rather than a wrong one.
 */
export function jdbcDataset(url: string, table: string): DatasetId | undefined {
  const sub = /^jdbc:([a-z0-9]+):(.*)$/i.exec(url);
  if (!sub) return undefined;
  const protocol = sub[1]!.toLowerCase();
  let rest = sub[2]!;
  if (protocol === 'sqlite') {
    // jdbc:sqlite:/var/db/shop.db or jdbc:sqlite:file:/var/db/shop.db?mode=ro
    const file = rest.replace(/^file:/, '').replace(/[?;].*$/, '');
    return file && file !== ':memory:' ? { namespace: `sqlite://${file.startsWith('/') ? '' : '/'}${file}`, name: table } : undefined;
  }
  const known = Object.hasOwn(JDBC_SCHEMES, protocol) ? JDBC_SCHEMES[protocol] : undefined;
  if (protocol === 'oracle') rest = rest.replace(/^thin:@/, '');
  const m = /^\/\/(?:[^@/]*@)?([^/:;?]+)(?::(\d+))?([^;?]*)(.*)$/.exec(rest);
  if (!m) return undefined;
  const host = m[1]!.toLowerCase();
  const port = m[2] ? Number(m[2]) : known?.port;
  let database = (m[3] ?? '').replace(/^\//, '');
  if (known?.database === 'databaseName') database = /[;?&]databaseName=([^;&]+)/i.exec(m[4] ?? '')?.[1] ?? '';
  const parts = table.split('.');
  const qualified = parts.length === 1 && known?.defaultSchema ? [known.defaultSchema, ...parts] : parts;
  return {
    namespace: `${known?.scheme ?? protocol}://${host}${port ? `:${port}` : ''}`,
    name: [...(database ? [database] : []), ...qualified].join('.'),
  };
}

/** Kafka's namespace: `kafka://{host}:{port}` of the first bootstrap server (undefined when there is none). */
export function kafkaNamespace(bootstrapServers: string): string | undefined {
  const first = bootstrapServers
    .split(',')[0]!
    .trim()
    .replace(/^[A-Za-z_]+:\/\//, '');
  return first ? `kafka://${first}` : undefined;
}

/** Kafka: namespace of the first bootstrap server (kafkaNamespace), name the topic. */
export function kafkaDatasets(bootstrapServers: string, topics: readonly string[]): DatasetId[] {
  const namespace = kafkaNamespace(bootstrapServers);
  return namespace ? topics.map((t) => ({ namespace, name: t })) : [];
}
