import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, asLakehouseError } from '../../src/core/errors.js';
import { loadJob } from '../../src/runner/load-job.js';
import { templates } from '../../src/jobs/registry.js';
import type { SparkConnectClient } from '../../src/spark/client.js';
import { compileCommandPlan } from '../../src/spark/plan/compile.js';
import { tempFiles } from '../support/files.js';
import { connect, freshTenant, lakeHome, remote, runCli } from '../support/stack.js';
import { testQuery, testCommand } from '../support/sql.js';
import { needs } from '../support/needs.js';

needs('spark');

/**
 * Tenant configs are untrusted input. Every template version meets a corpus of hostile configs, one
 * class at a time (code on the server, other tenants' rows, glob and escape paths, the process
 * environment, identifiers, resource exhaustion, credentials in urls): each must be refused at
 * `validate` with 78 and a config path, and `run` against the real server must refuse it the same
 * way, while a second tenant's canary tables exist: the canary never appears in any output.
 */
const attacker = freshTenant();
const victim = freshTenant();
const CANARY = `canary-${randomBytes(6).toString('hex')}`;
const TOKEN = `tok${randomBytes(8).toString('hex')}`;
let dir: string;
let client: SparkConnectClient;

const platform = () => `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc.connections {
  shop { url = "jdbc:sqlite:${attacker.root.replace(/^file:\/\//, '')}/shop.db", tenants = ["${attacker.id}"] }
  victim_shop { url = "jdbc:sqlite:${victim.root.replace(/^file:\/\//, '')}/shop.db", tenants = ["${victim.id}"] }
  nobodys_shop { url = "jdbc:sqlite:${victim.root.replace(/^file:\/\//, '')}/shop.db" }
}
tenants {
  ${attacker.id} { storage-roots = ["${attacker.root}"] }
  ${victim.id} { storage-roots = ["${victim.root}"] }
}
kafka.clusters.local {
  bootstrap-servers = "127.0.0.1:9"
  tenants { ${attacker.id} { topic-prefixes = ["${attacker.id}."] } }
}
`;

/** One valid config per template version, for the attacker's tenant. */
const bases: Record<string, string> = {
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
interface InText {
  readonly path: string;
  readonly text: string;
}
type ValuePath = string | InText;
const pathOf = (p: ValuePath) => (typeof p === 'string' ? p : p.path);

/** The base config of a template version with `value` (a HOCON string) at `p`: config text and --set lines. */
function withValue(template: string, p: ValuePath, value: string): { config: string; set: string[] } {
  const base = bases[template]!;
  if (typeof p === 'string') return { config: base, set: [`${p}=${JSON.stringify(value)}`] };
  expect(base.split(p.text).length, `${p.text} once in ${template}'s base`).toBe(2);
  return { config: base.replace(p.text, JSON.stringify(value)), set: [] };
}

/** The config paths that carry an expression, per template version. */
const expressionPaths: Record<string, ValuePath[]> = {
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
  'kafka-bronze-ingest v1': [],
  'iceberg-zero-copy-append v1': [],
};

/** Where each template version names the table it writes (a name that would change a statement is refused there). */
const tablePaths: Record<string, ValuePath> = {
  'table-maintenance v1': { path: 'tables[0].table', text: '"orders"' },
};

const other = () => `lake.${victim.id}_silver.secrets`;

/** Expressions that must never reach Spark: each is refused by our grammar. */
const hostileExpressions: [string, () => string][] = [
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
const hostileRoots: [string, () => string][] = [
  ['glob alternation', () => `${attacker.root}/{x,../${victim.root.split('/').pop()}}`],
  ['glob star', () => `${attacker.root}/*`],
  ['glob question mark', () => `${attacker.root}/?`],
  ['glob class', () => `${attacker.root}/[a-z]`],
  ['percent-encoded dot-dot', () => `${attacker.root}/%2e%2e/${victim.root.split('/').pop()}`],
  ['backslash', () => `${attacker.root}/..\\${victim.root.split('/').pop()}`],
  ['dot-dot', () => `${attacker.root}/../${victim.root.split('/').pop()}`],
];

/** Environment variables a config must not read (their values must never show). */
const hostileEnv: [string, string][] = [
  ['SPARK_REMOTE', 'job.name = ${SPARK_REMOTE}'],
  ['a token variable', 'job.name = ${SPARK_CONNECT_AUTHENTICATE_TOKEN}'],
  ['a password variable', 'job.name = ${LAKEHOUSE_DB_PASSWORD}'],
  ['HOME', 'job.name = ${HOME}'],
];
const hostileEnvValues = {
  SPARK_CONNECT_AUTHENTICATE_TOKEN: TOKEN,
  LAKEHOUSE_DB_PASSWORD: TOKEN,
};

async function validate(
  config: string,
  set: string[] = [],
  env: Record<string, string> = {},
  platformFile = 'platform.conf',
  tenant?: string,
): Promise<{ code: number; paths: string[]; text: string }> {
  const file = join(dir, `c-${randomBytes(4).toString('hex')}.conf`);
  writeFileSync(file, config);
  const started = performance.now();
  try {
    await loadJob({ configFile: file, envFile: join(dir, platformFile), overrides: set, env, runId: 'hostile', ...(tenant ? { tenant } : {}) });
    return { code: 0, paths: [], text: '' };
  } catch (e) {
    const err = asLakehouseError(e);
    expect(performance.now() - started, 'refused within a second').toBeLessThan(1000);
    const paths = err instanceof ConfigError ? err.issues.map((i) => i.path) : [];
    return { code: err.exitCode, paths, text: JSON.stringify(err.report()) };
  }
}

beforeAll(async () => {
  dir = tempFiles({ 'platform.conf': platform(), 'platform-inline.conf': `${platform()}\njdbc.inline-urls = allow\n` });
  client = connect();
  // The victim's rows, in an Iceberg and a Delta table and as bronze files, each holding the canary.
  const rows = testQuery(`SELECT 1 AS id, '${CANARY}' AS v, CAST(1 AS BIGINT) AS ts`);
  for (const [catalog, format] of [
    ['lake', 'iceberg'],
    ['spark_catalog', 'delta'],
  ] as const) {
    await client.execute(compileCommandPlan(testCommand(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${victim.id}_silver`), { reveal: true }));
    await client.execute(
      compileCommandPlan(
        rows.writeTo([catalog, `${victim.id}_silver`, 'secrets'], 'create', {
          provider: format,
          properties: { location: `${victim.root}/silver/secrets_${format}` },
        }),
        {
          reveal: true,
        },
      ),
    );
  }
  await client.execute(compileCommandPlan(rows.writeFiles(`${victim.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite' }), { reveal: true }));
  // The attacker's own bronze, so that a config that slipped through would really run.
  mkdirSync(attacker.root.replace(/^file:\/\//, ''), { recursive: true });
  await client.execute(
    compileCommandPlan(
      testQuery(`SELECT 1 AS id, 'mine' AS v, CAST(1 AS BIGINT) AS ts, 'c' AS op, DATE'2026-07-05' AS _snapshot_date`).writeFiles(
        `${attacker.root}/bronze/orders_cdc`,
        'parquet',
        {
          mode: 'overwrite',
          partitionBy: ['_snapshot_date'],
        },
      ),
      { reveal: true },
    ),
  );
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('the corpus', () => {
  it('meets every template version of the registry (a new template cannot skip it)', () => {
    const all = templates.flatMap((t) => t.versions.map((v) => `${t.name} v${v.version}`));
    expect(all.filter((t) => !(t in bases))).toEqual([]);
    expect(Object.keys(bases).filter((t) => !(t in expressionPaths))).toEqual([]);
  });
});

describe.each(Object.keys(bases))('%s refuses hostile configs at validate (78, with the path)', (template) => {
  it('accepts its base config (the corpus tests refusals, not a broken base)', async () => {
    const r = await validate(bases[template]!);
    expect(r.code, r.text).toBe(0);
  });

  for (const path of expressionPaths[template]!)
    it.each(hostileExpressions)(`${pathOf(path)}: %s`, async (_, expr) => {
      // delete-when and op-column exclude each other: v2's base has no op column.
      const { config, set } = withValue(template, path, expr());
      const r = await validate(config, set);
      expect(r.code, r.text).toBe(78);
      expect(r.paths).toContain(pathOf(path));
      expect(r.text).not.toContain(CANARY);
    });

  it("impersonation: the victim's tenant id and storage root in a run the orchestrator bound to the attacker", async () => {
    const set = [`tenant.id=${victim.id}`, `tenant.storage-root=${JSON.stringify(victim.root)}`];
    expect((await validate(bases[template]!, [], {}, 'platform.conf', attacker.id)).code).toBe(0);
    const r = await validate(bases[template]!, set, {}, 'platform.conf', attacker.id);
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain('tenant.id');
  });

  it.each(hostileRoots)('tenant.storage-root: %s', async (_, root) => {
    const r = await validate(bases[template]!, [`tenant.storage-root=${JSON.stringify(root())}`]);
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain('tenant.storage-root');
  });

  it.each(hostileEnv)('environment: %s', async (_, line) => {
    const r = await validate(`${bases[template]}\n${line}\n`, [], { ...hostileEnvValues, SPARK_REMOTE: `sc://127.0.0.1:1/;token=${TOKEN}`, HOME: '/root' });
    expect(r.code, r.text).toBe(78);
    expect(r.text).not.toContain(TOKEN);
  });

  it.each(['orders`; DROP TABLE x', `orders\` UNION SELECT * FROM ${other()} --`, '../orders', 'x.y'])(
    'identifiers: a table name that would change a statement or a path: %s',
    async (name) => {
      const path = tablePaths[template] ?? 'target.table';
      const { config, set } = withValue(template, path, name);
      const r = await validate(config, set);
      expect(r.code, r.text).toBe(78);
      expect(r.paths).toContain(pathOf(path));
    },
  );

  it.each(['orders__quarantine', 'orders__cdc_tombstones'])('identifiers: a target named like a table the runner derives: %s', async (name) => {
    const maintained = tablePaths[template];
    if (maintained) {
      // table-maintenance writes no table of its own: it may name a derived one to compact it.
      const { config, set } = withValue(template, maintained, name);
      expect((await validate(config, set)).code).toBe(0);
      return;
    }
    const { config, set } = withValue(template, 'target.table', name);
    const r = await validate(config, set);
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain('target.table');
  });

  it('resource limits: a 10,000-segment dotted key and a self-concatenation bomb', async () => {
    const deep = `${bases[template]}\n${Array.from({ length: 10_000 }, (_, i) => `k${i}`).join('.')} = 1\n`;
    expect((await validate(deep)).code).toBe(78);
    const bomb = `${bases[template]}\n${['a = [1,2,3,4,5,6,7,8]', ...Array.from({ length: 40 }, (_, i) => `${String.fromCharCode(98 + (i % 20))}${i} = \${${i === 0 ? 'a' : `${String.fromCharCode(98 + ((i - 1) % 20))}${i - 1}`}} \${${i === 0 ? 'a' : `${String.fromCharCode(98 + ((i - 1) % 20))}${i - 1}`}}`)].join('\n')}\n`;
    expect((await validate(bomb)).code).toBe(78);
  });

  it('includes outside the config directory, or by URL', async () => {
    for (const inc of ['include "/etc/passwd"', 'include "../escape.conf"', 'include url("http://127.0.0.1:9/x.conf")', 'include classpath("reference.conf")'])
      expect((await validate(`${inc}\n${bases[template]}`)).code, inc).toBe(78);
  });
});

/**
 * Column names a template gives its own columns (history, internal, metadata), in any case (Spark
 * resolves names case-insensitively): a config column of such a name was replaced by the plan's
 * own (a satellite payload `__lake_prev` was stored NULL), so each is refused at its path.
 */
const ownColumns: [template: string, path: InText, names: string[]][] = [
  ['scd2-dim-load v1', { path: 'dimension.natural-key.0', text: '"id"' }, ['_dim_key', '_SCD_Current', '__scd_ctrl', '__SCD_p']],
  ['scd2-dim-load v2', { path: 'history.sequence-by', text: '"ts"' }, ['_scd_effective_from', '__Scd_Ts', '_lake_tenant']],
  ['cdc-silver-merge v1', { path: 'cdc.sequence-by', text: '"ts"' }, ['_cdc_deleted_at', '_LAKE_run_id', '__lake_rn']],
  ['cdc-silver-merge v2', { path: 'cdc.primary-key[0]', text: '"id"' }, ['_CDC_Deleted_At', '_lake_run_id', '__Lake_Delete']],
  ['dv-hub v1', { path: 'hub.hash-key', text: '"hk_order"' }, ['load_date', '__lake_rn', '__LAKE_one']],
  ['dv-link v1', { path: 'link.hash-key', text: '"lhk"' }, ['RECORD_SOURCE', '__lake_rn']],
  ['dv-satellite v1', { path: 'satellite.payload[0]', text: '"v"' }, ['hashdiff', 'Load_Seq', '__lake_prev', '__Lake_Latest_Hashdiff', '__lake_ord_0']],
];

describe.each(ownColumns)("%s refuses a config column named like the template's own (78, with the path)", (template, path, names) => {
  it.each(names)('%s', async (name) => {
    const { config, set } = withValue(template, path, name);
    const r = await validate(config, set);
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain(path.path);
  });
});

describe('jdbc-snapshot-ingest: inline urls, credentials and driver classes', () => {
  const inline = (url: string, driver = 'org.postgresql.Driver') =>
    bases['jdbc-snapshot-ingest v1']!.replace('connection = "shop"', `url = ${JSON.stringify(url)}, driver = ${JSON.stringify(driver)}`);

  it('refuses an inline url where the platform does not allow them (the server would open any database or SQLite file)', async () => {
    const r = await validate(inline(`jdbc:sqlite:${lakeHome()}/iceberg_catalog.db`, 'org.sqlite.JDBC'));
    expect(r.code).toBe(78);
    expect(r.paths).toContain('source.url');
  });

  it.each([
    ['user info', 'jdbc:postgresql://u:p@127.0.0.1:5432/db'],
    ['a password parameter', 'jdbc:postgresql://127.0.0.1:5432/db?password=x'],
    ['a socket factory', 'jdbc:postgresql://127.0.0.1:5432/db?socketFactory=org.springframework.context.support.ClassPathXmlApplicationContext'],
    ['a logger file', 'jdbc:postgresql://127.0.0.1:5432/db?loggerFile=/tmp/x'],
  ])('%s in an inline url, even where inline urls are allowed', async (_, url) => {
    const r = await validate(inline(url), [], {}, 'platform-inline.conf');
    expect(r.code).toBe(78);
    expect(r.paths).toContain('source.url');
  });

  it.each([
    ['the Spark remote with its token', '{ env = "SPARK_REMOTE" }'],
    ['a token variable', '{ env = "SPARK_CONNECT_AUTHENTICATE_TOKEN" }'],
    ["the pod's service account token", '{ file = "/var/run/secrets/kubernetes.io/serviceaccount/token" }'],
  ])("a password reference to the runner's own credentials (%s), even where inline urls are allowed", async (_, ref) => {
    const config = inline('jdbc:postgresql://127.0.0.1:9/db').replace('driver = ', `user = "u", password ${ref}, driver = `);
    const r = await validate(config, [], hostileEnvValues, 'platform-inline.conf');
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain('source.password');
    expect(r.text).not.toContain(TOKEN);
  });

  it.each([
    ["the victim's connection", 'victim_shop'],
    ['a connection the platform config of several tenants grants to nobody', 'nobodys_shop'],
  ])("a named connection of another tenant: %s (its database, with the platform's credentials)", async (_, name) => {
    const r = await validate(bases['jdbc-snapshot-ingest v1']!.replace('connection = "shop"', `connection = "${name}"`));
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain('source.connection');
  });

  it("a driver class other than the url protocol's own", async () => {
    const r = await validate(inline('jdbc:postgresql://127.0.0.1:5432/db', 'java.lang.ProcessBuilder'), [], {}, 'platform-inline.conf');
    expect(r.code).toBe(78);
    expect(r.paths).toContain('source.driver');
  });
});

describe('run against the real server refuses the same configs before sending anything (78), and the canary never shows', () => {
  async function runHostile(config: string, set: string[], env: Record<string, string> = {}) {
    const file = join(dir, `run-${randomBytes(4).toString('hex')}.conf`);
    writeFileSync(file, config);
    const r = await runCli(['--config', file, '--env', join(dir, 'platform.conf'), '--remote', remote(), ...set.flatMap((s) => ['--set', s])], env);
    expect(r.code, r.stderr).toBe(78);
    for (const secret of [CANARY, TOKEN]) {
      expect(r.stdout).not.toContain(secret);
      expect(r.stderr).not.toContain(secret);
    }
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'failed', exitCode: 78, error: { category: 'config' } });
    return r;
  }

  it.each(hostileExpressions)('expression: %s', async (_, expr) => {
    await runHostile(bases['cdc-silver-merge v2']!, [`cdc.delete-when=${JSON.stringify(expr())}`]);
  });

  it.each(hostileRoots)('storage root: %s', async (_, root) => {
    await runHostile(bases['cdc-silver-merge v1']!, [`tenant.storage-root=${JSON.stringify(root())}`]);
  });

  it.each(hostileEnv)('environment: %s', async (_, line) => {
    await runHostile(`${bases['cdc-silver-merge v1']}\n${line}\n`, [], { ...hostileEnvValues, SPARK_REMOTE: `${remote()}/;token=${TOKEN}` });
  });
});
