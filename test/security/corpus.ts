import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ConfigError, asLakehouseError } from '../../src/core/errors.js';
import { loadJob } from '../../src/runner/load-job.js';

/**
 * The hostile corpus: configs of every class an attacker (a tenant whose job configs run on the
 * shared platform) would try, per template version. The validate tier (hostile-configs.test.ts)
 * refuses each without Spark; the live tier (hostile-runs.test.ts) runs the classes that need a
 * server against the real one, with a second tenant's canary rows in place. Neither a canary, the
 * server's environment nor a value only the platform config holds may appear in any output.
 */

/** A tenant with a storage root of its own (a fresh folder). */
export function corpusTenant(): { id: string; root: string } {
  const id = `it_${randomBytes(4).toString('hex')}`;
  return { id, root: `file://${mkdtempSync(join(tmpdir(), `lakehouse-${id}-`))}` };
}

export const attacker = corpusTenant();
export const victim = corpusTenant();
export const CANARY = `canary-${randomBytes(6).toString('hex')}`;
export const TOKEN = `tok${randomBytes(8).toString('hex')}`;
/** A value only the platform config holds (in the victim's connection url, in a file it includes): never in any output. */
export const PLATFORM_ONLY = `platform-only-${randomBytes(6).toString('hex')}`;

/** Names every JavaScript object answers to: given as any name, each is an unknown name (78). */
export const PROTOTYPE_NAMES = ['constructor', 'toString', '__proto__', 'hasOwnProperty'];

export const platform = (bootstrap = '127.0.0.1:9') => `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc.connections {
  shop { url = "jdbc:sqlite:${attacker.root.replace(/^file:\/\//, '')}/shop.db", tenants = ["${attacker.id}"] }
  victim_shop { url = "jdbc:sqlite:${victim.root.replace(/^file:\/\//, '')}/${PLATFORM_ONLY}.db", tenants = ["${victim.id}"] }
  nobodys_shop { url = "jdbc:sqlite:${victim.root.replace(/^file:\/\//, '')}/shop.db" }
}
tenants {
  ${attacker.id} { storage-roots = ["${attacker.root}"], read-namespaces = ["lake.shared_ref"] }
  ${victim.id} { storage-roots = ["${victim.root}"] }
}
kafka.clusters.local {
  bootstrap-servers = "${bootstrap}"
  tenants { ${attacker.id} { topic-prefixes = ["${attacker.id}."] } }
}
include "platform-shared.conf"
`;
/** A file the platform config includes (in the job configs' folder): as out of reach as the platform config. */
const platformShared = `lineage { namespace = "${PLATFORM_ONLY}" }\n`;

/**
 * The folder the corpus' configs are written to, the platform config beside them (the worst case:
 * a job config in the platform config's own folder), with a symbolic and a hard link to it.
 */
export function corpusDir(bootstrap?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'lakehouse-corpus-'));
  writeFileSync(join(dir, 'platform.conf'), platform(bootstrap));
  writeFileSync(join(dir, 'platform-inline.conf'), `${platform(bootstrap)}\njdbc.inline-urls = allow\n`);
  writeFileSync(join(dir, 'platform-shared.conf'), platformShared);
  symlinkSync(join(dir, 'platform.conf'), join(dir, 'p-link.conf'));
  linkSync(join(dir, 'platform.conf'), join(dir, 'p-hard.conf'));
  mkdirSync(join(dir, 'sub'));
  return dir;
}

/** One valid config per template version, for the attacker's tenant. */
export const bases: Record<string, string> = {
  'cdc-silver-merge v1': `
job    { template = "cdc-silver-merge", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }`,
  'cdc-silver-merge v2': `
job    { template = "cdc-silver-merge", schema-version = 2, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = ["ts"] }
target { table = "orders", format = delta, catalog = "spark_catalog" }`,
  'jdbc-snapshot-ingest v1': `
job    { template = "jdbc-snapshot-ingest", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders", connection = "shop" }
target { table = "orders", snapshot-date = "2026-07-05" }`,
  'jdbc-snapshot-ingest v2': `
job    { template = "jdbc-snapshot-ingest", schema-version = 2, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders", connection = "shop" }
target { table = "orders", snapshot-date = "2026-07-05", format = iceberg }`,
  'scd2-dim-load v1': `
job       { template = "scd2-dim-load", schema-version = 1, name = "hostile" }
tenant    { id = "${attacker.id}", storage-root = "${attacker.root}" }
source    { table = "customers" }
dimension { natural-key = ["id"], effective-at = "2026-07-05T00:00:00Z" }
target    { table = "dim_customers", catalog = "lake" }`,
  'scd2-dim-load v2': `
job       { template = "scd2-dim-load", schema-version = 2, name = "hostile" }
tenant    { id = "${attacker.id}", storage-root = "${attacker.root}" }
source    { table = "customer_events", layer = bronze }
dimension { natural-key = ["id"] }
history   { sequence-by = "ts" }
target    { table = "dim_customers", format = delta, catalog = "spark_catalog" }`,
  'dv-hub v1': `
job    { template = "dv-hub", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
sources = [ { table = "orders_cdc", record-source = "shop.orders", business-key = ["id"] } ]
hub    { hash-key = "hk_order", business-key = ["order_id"] }
target { table = "orders", catalog = "lake" }`,
  'dv-link v1': `
job    { template = "dv-link", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders_cdc", record-source = "shop.orders" }
link   { hash-key = "lhk", hubs = [ { hash-key = "hk_order", business-key = ["id"] }, { hash-key = "hk_v", business-key = ["v"] } ] }
target { table = "orders", catalog = "lake" }`,
  'dv-satellite v1': `
job    { template = "dv-satellite", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders_cdc", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["v"], order-by = ["ts"] }
target { table = "orders", format = delta, catalog = "spark_catalog" }`,
  'gold-publish v1': `
job    { template = "gold-publish", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
transform { sql = "SELECT id, v FROM silver.orders" }
target { table = "orders_gold", catalog = "lake", grain = ["id"], mode = merge }
expectations = [ { name = "v_set", type = expression, expr = "v IS NOT NULL", action = fail } ]`,
  'table-maintenance v1': `
job    { template = "table-maintenance", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
tables = [ { layer = silver, table = "orders", catalog = "lake", rewrite-manifests = true } ]`,
  'freshness-check v1': `
job    { template = "freshness-check", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
tables = [ { layer = silver, table = "orders", catalog = "lake", max-age = 6h } ]`,
  'reconcile v1': `
job    { template = "reconcile", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
table   { layer = silver, table = "orders", catalog = "lake" }
source  { table = "orders", connection = "shop" }
compare { date-column = "order_date", sums = ["amount"] }`,
  'kafka-bronze-ingest v1': `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { cluster = "local", topics = ["${attacker.id}.orders"], value-format = raw }
target { table = "orders_events", format = iceberg, catalog = "lake" }`,
  'iceberg-zero-copy-append v1': `
job    { template = "iceberg-zero-copy-append", schema-version = 1, name = "hostile" }
tenant { id = "${attacker.id}", storage-root = "${attacker.root}" }
source { table = "orders_2025", layer = silver }
target { table = "orders_history", layer = silver, catalog = "lake" }`,
};

/**
 * A value inside a list element cannot be --set: the hostile value replaces the base's own text of
 * it (`text`, unique in the base) instead.
 */
export interface InText {
  readonly path: string;
  readonly text: string;
}
export type ValuePath = string | InText;
export const pathOf = (p: ValuePath) => (typeof p === 'string' ? p : p.path);

/** The base config of a template version with `value` (a HOCON string) at `p`: config text and --set lines. */
export function withValue(template: string, p: ValuePath, value: string): { config: string; set: string[] } {
  const base = bases[template]!;
  if (typeof p === 'string') return { config: base, set: [`${p}=${JSON.stringify(value)}`] };
  expect(base.split(p.text).length, `${p.text} once in ${template}'s base`).toBe(2);
  return { config: base.replace(p.text, JSON.stringify(value)), set: [] };
}

/** The config paths that carry an expression, per template version. */
export const expressionPaths: Record<string, ValuePath[]> = {
  'cdc-silver-merge v1': ['source.where'],
  'cdc-silver-merge v2': ['source.where', 'cdc.delete-when'],
  'jdbc-snapshot-ingest v1': ['source.where'],
  'jdbc-snapshot-ingest v2': ['source.where'],
  'scd2-dim-load v1': ['source.where'],
  'scd2-dim-load v2': ['source.where', 'history.delete-when'],
  // A list element cannot be --set: dv-hub's sources[i].where is refused in test/unit/jobs/vault.
  'dv-hub v1': [],
  'dv-link v1': ['source.where'],
  'dv-satellite v1': ['source.where'],
  // The transform's SQL has its own corpus (test/unit/jobs/gold-publish.test.ts) and the server-side policy's.
  'gold-publish v1': [{ path: 'expectations[0].expr', text: '"v IS NOT NULL"' }],
  'table-maintenance v1': [],
  'freshness-check v1': [],
  'reconcile v1': ['table.where', 'source.where'],
  'kafka-bronze-ingest v1': [],
  'iceberg-zero-copy-append v1': [],
};

/** Where each template version names the table it writes, or the one it maintains or checks (a name that would change a statement is refused there). */
export const tablePaths: Record<string, ValuePath> = {
  'table-maintenance v1': { path: 'tables[0].table', text: '"orders"' },
  // The checks write no table either: they name the table they read.
  'freshness-check v1': { path: 'tables[0].table', text: '"orders"' },
  'reconcile v1': 'table.table',
};

export const other = () => `lake.${victim.id}_silver.secrets`;

/** Expressions that must never reach Spark: each is refused by our grammar. */
export const hostileExpressions: [string, () => string][] = [
  ['reflection', () => `java_method('java.lang.System', 'getenv', 'HOME') IS NOT NULL`],
  ['reflection, backticked', () => "`java_method`('java.lang.System', 'getenv', 'HOME') IS NOT NULL"],
  ['reflection behind a comment', () => `reflect /* x */ ('java.lang.System', 'getenv', 'HOME') IS NOT NULL`],
  ['reflection behind a line break', () => `reflect\n('java.lang.System', 'getenv', 'HOME') IS NOT NULL`],
  ['try_reflect', () => `try_reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL`],
  ['EXISTS (TABLE …)', () => `EXISTS (TABLE ${other()})`],
  ['IN (TABLE …)', () => `id IN (TABLE ${other()})`],
  ['pipe syntax', () => `(FROM ${other()} |> AGGREGATE max(v)) IS NOT NULL`],
  ['scalar subquery', () => `(SELECT max(v) FROM ${other()}) = 'x'`],
  ['subquery, mixed case', () => `(sElEcT 1) = 1`],
  ['input_file_name', () => `input_file_name() LIKE '%'`],
  ['a lambda', () => `exists(array(1), x -> true)`],
  ['a second statement', () => `1 = 1; DROP TABLE ${other()}`],
  ['a parameter marker', () => `id = :p`],
  ['IDENTIFIER()', () => `IDENTIFIER('${other()}') IS NULL`],
  ['a qualified column naming a table', () => `${other()}.v = 'x'`],
  ['a line comment', () => `id = 1 -- and the rest`],
  ['a non-deterministic function', () => `uuid() IS NOT NULL`],
  ['current_user', () => `current_user() = 'x'`],
  ['a table-valued function', () => `EXISTS (SELECT * FROM read_files('${victim.root}'))`],
  // Regular expressions backtrack for hours on the shared server, and no cancel stops them.
  ['a LIKE pattern only a backtracking regex can match', () => `v LIKE '%a%a_b%'`],
  ['RLIKE', () => `v RLIKE '(a+)+b'`],
  ['regexp_replace', () => `regexp_replace(v, '(a|a)*b', '') = 'x'`],
  ['regexp_like', () => `regexp_like(v, '(a+)+b')`],
];

/** Storage roots that would reach the victim through globbing or escapes. */
export const hostileRoots: [string, () => string][] = [
  ['glob alternation', () => `${attacker.root}/{x,../${victim.root.split('/').pop()}}`],
  ['glob star', () => `${attacker.root}/*`],
  ['glob question mark', () => `${attacker.root}/?`],
  ['glob class', () => `${attacker.root}/[a-z]`],
  ['percent-encoded dot-dot', () => `${attacker.root}/%2e%2e/${victim.root.split('/').pop()}`],
  ['backslash', () => `${attacker.root}/..\\${victim.root.split('/').pop()}`],
  ['dot-dot', () => `${attacker.root}/../${victim.root.split('/').pop()}`],
];

/** Environment variables a config must not read (their values must never show). */
export const hostileEnv: [string, string][] = [
  ['SPARK_REMOTE', 'job.name = ${SPARK_REMOTE}'],
  ['a token variable', 'job.name = ${SPARK_CONNECT_AUTHENTICATE_TOKEN}'],
  ['a password variable', 'job.name = ${LAKEHOUSE_DB_PASSWORD}'],
  ['HOME', 'job.name = ${HOME}'],
];
export const hostileEnvValues = {
  SPARK_CONNECT_AUTHENTICATE_TOKEN: TOKEN,
  LAKEHOUSE_DB_PASSWORD: TOKEN,
};

/**
 * Column names a template gives its own columns (history, internal, metadata), in any case (Spark
 * resolves names case-insensitively): a config column of such a name was replaced by the plan's
 * own (a satellite payload `__lake_prev` was stored NULL), so each is refused at its path.
 */
export const ownColumns: [template: string, path: InText, names: string[]][] = [
  ['scd2-dim-load v1', { path: 'dimension.natural-key[0]', text: '"id"' }, ['_dim_key', '_SCD_Current', '__scd_ctrl', '__SCD_p']],
  ['scd2-dim-load v2', { path: 'history.sequence-by', text: '"ts"' }, ['_scd_effective_from', '__Scd_Ts', '_lake_tenant']],
  ['cdc-silver-merge v1', { path: 'cdc.sequence-by', text: '"ts"' }, ['_cdc_deleted_at', '_LAKE_run_id', '__lake_rn']],
  ['cdc-silver-merge v2', { path: 'cdc.primary-key[0]', text: '"id"' }, ['_CDC_Deleted_At', '_lake_run_id', '__Lake_Delete']],
  ['dv-hub v1', { path: 'hub.hash-key', text: '"hk_order"' }, ['load_date', '__lake_rn', '__LAKE_one']],
  ['dv-link v1', { path: 'link.hash-key', text: '"lhk"' }, ['RECORD_SOURCE', '__lake_rn']],
  ['dv-satellite v1', { path: 'satellite.payload[0]', text: '"v"' }, ['hashdiff', 'Load_Seq', '__lake_prev', '__Lake_Latest_Hashdiff', '__lake_ord_0']],
];

/** What a refusal looks like: its exit code, its issues' paths and messages, and all its text. */
export interface Outcome {
  code: number;
  paths: string[];
  messages: string[];
  text: string;
}

/** `validate` of a config (as text, in `dir`): no Spark; refused within a second. */
export async function validate(
  dir: string,
  config: string,
  set: string[] = [],
  env: Record<string, string> = {},
  platformFile = 'platform.conf',
  tenant?: string,
): Promise<Outcome> {
  const file = join(dir, `c-${randomBytes(4).toString('hex')}.conf`);
  writeFileSync(file, config);
  const started = performance.now();
  try {
    await loadJob({ configFile: file, envFile: join(dir, platformFile), overrides: set, env, runId: 'hostile', ...(tenant ? { tenant } : {}) });
    return { code: 0, paths: [], messages: [], text: '' };
  } catch (e) {
    const err = asLakehouseError(e);
    expect(performance.now() - started, 'refused within a second').toBeLessThan(1000);
    const issues = err instanceof ConfigError ? err.issues : [];
    return {
      code: err.exitCode,
      paths: issues.map((i) => i.path),
      messages: issues.map((i) => i.message),
      text: `${err.name}: ${JSON.stringify(err.report())}`,
    };
  }
}

/** Where each template version names a catalog, a JDBC connection or a Kafka cluster (every name a config gives). */
export const namePaths: Record<string, ValuePath[]> = {
  'cdc-silver-merge v1': ['target.catalog'],
  'cdc-silver-merge v2': ['target.catalog'],
  'jdbc-snapshot-ingest v1': ['source.connection'],
  'jdbc-snapshot-ingest v2': ['source.connection'],
  'scd2-dim-load v1': ['target.catalog'],
  'scd2-dim-load v2': ['target.catalog'],
  'dv-hub v1': ['target.catalog'],
  'dv-link v1': ['target.catalog'],
  'dv-satellite v1': ['target.catalog'],
  'gold-publish v1': ['target.catalog', 'transform.catalogs.silver'],
  'table-maintenance v1': [{ path: 'tables[0].catalog', text: '"lake"' }],
  'freshness-check v1': [{ path: 'tables[0].catalog', text: '"lake"' }],
  'reconcile v1': ['table.catalog', 'source.connection'],
  'kafka-bronze-ingest v1': ['target.catalog', 'source.cluster'],
  'iceberg-zero-copy-append v1': ['target.catalog'],
};

/** Ways a job config could reach the platform config (it sits in the same folder): each refused (78). */
export const platformReach: [string, string][] = [
  ['include it by name', 'include "platform.conf"'],
  ['include it as required(file(…))', 'include required(file("platform.conf"))'],
  ['include it by another path', 'include "./sub/../platform.conf"'],
  ['include it through a symbolic link', 'include "p-link.conf"'],
  ['include it through a hard link', 'include "p-hard.conf"'],
  ['include a file it includes', 'include "platform-shared.conf"'],
  ['include it under a key', 'stolen { include "platform.conf" }'],
  ['substitute its values', 'job.name = ${jdbc.connections.victim_shop.url}'],
  ['substitute a file it includes', 'job.name = ${lineage.namespace}'],
];

/** Gold SQL an attacker writes: each refused by the first wall at validate (78 at transform.sql). */
export const hostileGoldSql: [string, string][] = [
  ['reflection through a backquoted name (the issue’s way in)', "SELECT `reflect`('java.lang.System', 'getenv', 'HOME') AS env FROM silver.orders"],
  ['java_method backquoted and qualified', "SELECT system.builtin.`java_method`('java.lang.System', 'getenv', 'HOME') AS env FROM silver.orders"],
  ['a script transform', "SELECT TRANSFORM (id) USING 'env' AS (x) FROM silver.orders"],
  ['another tenant, FROM-first', 'FROM lake.VICTIM_silver.secrets SELECT *'],
  ['another tenant after a VALUES list', 'SELECT * FROM VALUES (1) v(x), lake.VICTIM_silver.secrets'],
  ['another tenant by a pipe JOIN', 'FROM silver.orders |> JOIN lake.VICTIM_silver.secrets ON true'],
  ['another tenant by TABLE', 'TABLE lake.VICTIM_silver.secrets'],
  ['a namespace that is not granted', 'SELECT * FROM lake.shared_refs.rates'],
  ['table options naming a path', "SELECT * FROM silver.orders WITH ('path' = 'VICTIM_ROOT/silver/secrets_delta')"],
  ['a hint', 'SELECT /*+ REPARTITION(100000) */ * FROM silver.orders'],
  ['RLIKE', "SELECT * FROM silver.orders WHERE v RLIKE '(a+)+b'"],
  ['LIKE with a column as its pattern', 'SELECT * FROM silver.orders WHERE v LIKE id'],
];

/** Gold SQL tenants legitimately write: each passes the first wall at validate. */
export const legitimateGoldSql: [string, string][] = [
  ['comments', 'SELECT id, -- the key\n  v /* the value /* nested */ */ FROM silver.orders'],
  ['LIKE and ILIKE with literal patterns', "SELECT id, v FROM silver.orders WHERE v LIKE 'mi%' OR v ILIKE '%NE'"],
  ['FROM-first', 'FROM silver.orders SELECT id, v'],
  ['pipe syntax', 'FROM silver.orders |> WHERE id > 0 |> SELECT id, v'],
  ['VALUES joined', "SELECT o.id, o.v FROM silver.orders o JOIN VALUES (1, 'a') AS t(id, tag) ON o.id = t.id"],
  ['TABLE', 'TABLE silver.orders'],
  ['a granted namespace by its full name', 'SELECT o.id, o.v FROM silver.orders o JOIN lake.shared_ref.rates r ON o.id = r.id'],
];

/** A hostile SQL with the victim's names in place. */
export const withVictim = (sql: string) => sql.replaceAll('VICTIM_ROOT', victim.root).replaceAll('VICTIM', victim.id);
