import { join } from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { describeUrl } from '../../../src/jobs/bronze/jdbc-snapshot-ingest.js';
import type { Step } from '../../../src/jobs/template.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { formatExpr } from '../../../src/spark/plan/format.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { tempFiles } from '../../support/files.js';
import { configIssues, loadConfig } from '../../support/load.js';
import { repoRoot } from '../../support/stack.js';

const valid = `
job    { template = "jdbc-snapshot-ingest", schema-version = 1, name = "acme-orders" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source {
  table = "public.orders"
  url = "jdbc:postgresql://db.example:5432/shop", user = "reader", password { env = "SHOP_PW" }, driver = "org.postgresql.Driver"
}
target { table = "orders", snapshot-date = "2026-07-05", partition-by = [] }
`;

const named = `
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { connection = "crm", table = "public.customers" }
target { table = "customers", snapshot-date = "2026-07-05" }
`;

const platform = `
jdbc.connections {
  crm { url = "jdbc:postgresql://crm-db:5432/crm", user = "acme_reader", password { env = "CRM_PW" } }
  erp { url = "jdbc:postgresql://erp-db:5432/erp" }
}
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

const PASSWORD = 'pw-5f0c1e7b-never-printed';

const load = loadConfig;

function byPath(issues: readonly { path: string; message: string }[]) {
  return Object.fromEntries(issues.map((i) => [i.path, i.message]));
}

/** The steps that send a plan (the listings of probePaths steps aside). */
const planned = (job: { plan: { steps: readonly Step[] } }) => job.plan.steps.filter((s) => s.kind !== 'probePaths');
const step = (job: { plan: { steps: readonly Step[] } }, id: string) => job.plan.steps.find((s) => s.id === id)!;

function compile(step: Step, reveal: boolean) {
  if (step.kind === 'query') return JSON.stringify(toJson(PlanSchema, compileRelationPlan(step.query.rel, { reveal })));
  if (step.kind === 'command') return JSON.stringify(toJson(PlanSchema, compileCommandPlan(step.command, { reveal })));
  throw new Error(`unexpected step kind ${step.kind}`);
}

describe('jdbc-snapshot-ingest v1 config', () => {
  it('accepts the seed shape with a password reference, and plans probe, write, count', async () => {
    const job = await load(valid);
    expect(job.template.name).toBe('jdbc-snapshot-ingest');
    expect(job.plan.steps.map((s) => s.id)).toEqual(['probe-source', 'probe-files-only', 'write-snapshot', 'count-snapshot']);
  });

  it('accepts every example config', async () => {
    const env = { LAKEHOUSE_LAKE_HOME: '/lake' };
    const platform = join(repoRoot, 'configs/examples/platform-local.conf');
    const sqlite = await loadJob({ configFile: join(repoRoot, 'configs/examples/jdbc-snapshot-ingest.v1.conf'), envFile: platform, env, runId: 'x' });
    expect(sqlite.plan.steps).toHaveLength(4);
    const pg = await loadJob({
      configFile: join(repoRoot, 'configs/examples/jdbc-snapshot-ingest.postgres.v1.conf'),
      envFile: join(repoRoot, 'configs/examples/jdbc-snapshot-ingest.platform.conf'),
      env,
      runId: 'x',
    });
    expect(pg.plan.steps).toHaveLength(4);
  });

  it('reports every error at once, each with its path', async () => {
    const issues = await configIssues(`
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { tabel = "orders", url = "jdbc:h2:mem:x", fetch-size = 0, lower-bound = 1 }
target { table = "Orders", snapshot-date = "2026-02-30", partition-by = ["region", "region", "_lake_tenant"] }
`);
    const p = byPath(issues);
    expect(p['source.tabel']).toMatch(/did you mean "table"/);
    expect(p['source.url']).toMatch(/must be a JDBC url of one of: jdbc:postgresql:/);
    expect(p['source.fetch-size']).toBeDefined();
    expect(p['target.table']).toMatch(/must match/);
    expect(p['target.snapshot-date']).toBe('is not a valid calendar date');
    expect(p['target.partition-by[1]']).toBe('"region" appears twice');
    expect(p['target.partition-by[2]']).toMatch(/bronze metadata column/);
    // Checks across fields run only once the fields themselves are valid (zod), so the
    // missing-table and bound errors arrive with the next attempt; see the tests below.
    expect(issues.length).toBeGreaterThanOrEqual(7);
  });

  it('reports the cross-field problems of source together', async () => {
    const issues = await configIssues(`
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { lower-bound = 1, num-partitions = 4 }
target { table = "orders", snapshot-date = "2026-07-05" }
`);
    expect(byPath(issues)).toEqual({
      'source.table': 'is required (or source.query)',
      'source.connection': 'is required: name a platform connection (jdbc.connections.<name>) or give source.url',
      'source.lower-bound': 'needs source.partition-column (the column whose range is split)',
      'source.num-partitions': 'needs source.partition-column (the column whose range is split)',
    });
  });

  it('refuses a literal password (the v1 seed shape) and says how to reference it', async () => {
    const issues = await configIssues(valid.replace('password { env = "SHOP_PW" }', `password = "${PASSWORD}"`));
    expect(issues).toEqual([{ path: 'source.password', message: expect.stringMatching(/password \{ env = "NAME" \}.*password \{ file = /) }]);
    expect(JSON.stringify(issues)).not.toContain(PASSWORD);
  });

  it('refuses a malformed password reference', async () => {
    const env = await configIssues(valid.replace('password { env = "SHOP_PW" }', 'password { env = "SHOP PW" }'));
    expect(env[0]?.path).toBe('source.password.env');
    const file = await configIssues(valid.replace('password { env = "SHOP_PW" }', 'password { file = "secrets/pw" }'));
    expect(file[0]).toEqual({ path: 'source.password.file', message: 'a mounted file must be an absolute path' });
  });

  it('refuses credentials and driver plug-ins inside the url', async () => {
    for (const url of [
      'jdbc:postgresql://db:5432/shop?password=hunter2',
      'jdbc:postgresql://reader:hunter2@db:5432/shop',
      'jdbc:sqlserver://db:1433;user=sa;password=hunter2',
      'jdbc:postgresql://db/shop?socketFactory=org.example.Evil',
      'jdbc:postgresql://db/shop?loggerFile=/etc/passwd',
      'jdbc:postgresql://db/shop?sslfactory=org.example.Evil&sslmode=require',
      'jdbc:postgresql://db/shop?sslrootcert=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
    ]) {
      const issues = await configIssues(valid.replace('jdbc:postgresql://db.example:5432/shop', url));
      expect(issues, url).toEqual([{ path: 'source.url', message: expect.stringMatching(/must not carry credentials/) }]);
    }
  });

  // An allow-list, not a deny-list: each driver version reads more from its url (classes, files,
  // JNDI names, the server's own identity), so a parameter nobody listed is refused, by any name.
  it.each([
    ['jdbc:mysql://db:3306/shop?queryInterceptors=com.example.Evil', 'org.example', /"queryInterceptors" is not one an inline jdbc:mysql: url may set/],
    ['jdbc:mysql://address=(host=db)(queryInterceptors=com.example.Evil)/shop', 'mysql', /must have the form jdbc:mysql:\/\/host\[:port\]\/database/],
    ['jdbc:mariadb://db:3306/shop?autocommit=false&socketFactory=x', 'mariadb', /"autocommit" is not one/],
    [
      'jdbc:sqlserver://db:1433;databaseName=shop;authentication=ActiveDirectoryMSI',
      'sqlserver',
      /"authentication" is not one an inline jdbc:sqlserver: url may set/,
    ],
    ['jdbc:db2://db:50000/SHOP:clientRerouteServerListJNDIName=ldap://attacker/x;', 'db2', /"clientRerouteServerListJNDIName" is not one/],
    ['jdbc:oracle:thin:@(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=db)(PORT=1521)))', 'oracle', /no descriptor, no parameters/],
    ['jdbc:sqlite::resource:http://attacker/x.db', 'sqlite', /jdbc:sqlite:\/absolute\/path\.db/],
    ['jdbc:sqlite:shop.db', 'sqlite', /jdbc:sqlite:\/absolute\/path\.db/],
    ['jdbc:postgresql://db/shop?sslmode=require;socketFactory=x', 'postgresql', /"sslmode" must be key=value with a plain value/],
  ])("refuses %s: only its protocol's shape and allow-listed parameters", async (url, _, message) => {
    const driver = { mysql: 'com.mysql.cj.jdbc.Driver', mariadb: 'org.mariadb.jdbc.Driver', sqlserver: 'com.microsoft.sqlserver.jdbc.SQLServerDriver' }[
      /^jdbc:([a-z0-9]+):/.exec(url)![1] as 'mysql'
    ];
    const config = valid.replace('jdbc:postgresql://db.example:5432/shop', url).replace('org.postgresql.Driver', driver ?? 'org.postgresql.Driver');
    const issues = await configIssues(config);
    expect(
      issues.filter((i) => i.path === 'source.url'),
      url,
    ).toEqual([{ path: 'source.url', message: expect.stringMatching(message) }]);
  });

  it.each([
    'jdbc:postgresql://db.example:5432/shop?sslmode=verify-full&currentSchema=sales&ApplicationName=lake',
    'jdbc:postgresql://[::1]:5432/shop',
    'jdbc:postgresql://db-a:5432,db-b:5432/shop?targetServerType=primary',
  ])('accepts %s', async (url) => {
    const job = await load(valid.replace('jdbc:postgresql://db.example:5432/shop', url));
    expect(job.template.name).toBe('jdbc-snapshot-ingest');
  });

  it('refuses an unknown connection, naming the configured ones', async () => {
    const issues = await configIssues(named.replace('"crm"', '"crmm"'), { platform });
    expect(issues).toEqual([
      { path: 'source.connection', message: 'connection "crmm" is not configured by the platform (jdbc.connections: crm, erp); did you mean "crm"?' },
    ]);
    const none = await configIssues(named);
    expect(none[0]?.message).toMatch(/\(jdbc.connections: none\)/);
  });

  // A named connection is the platform's database with the platform's credentials: under a shared
  // platform config it holds one tenant's rows, so naming it is a grant like a Kafka topic's.
  const shared = (crm: string, erp = '') => `
jdbc.connections {
  crm { url = "jdbc:postgresql://crm-db:5432/crm", user = "globex_reader", password { env = "CRM_PW" }${crm} }
  erp { url = "jdbc:postgresql://erp-db:5432/erp"${erp} }
}
tenants { acme { storage-roots = ["file:///lake/acme"] }, globex { storage-roots = ["file:///lake/globex"] } }
`;

  it("refuses another tenant's connection under a shared platform config, and one granted to nobody", async () => {
    const env = { CRM_PW: 'pw' };
    const refused = 'connection "crm" is not granted to tenant acme (jdbc.connections.crm.tenants';
    expect(await configIssues(named, { platform: shared(', tenants = ["globex"]'), env })).toEqual([
      { path: 'source.connection', message: expect.stringContaining(refused) },
    ]);
    // No grant at all: with several tenants the platform config must say whose database it is.
    expect(await configIssues(named, { platform: shared(''), env })).toEqual([{ path: 'source.connection', message: expect.stringContaining(refused) }]);
    expect(await configIssues(named, { platform: shared(''), env, tenant: 'acme' })).toEqual([
      { path: 'source.connection', message: expect.stringContaining(refused) },
    ]);
    const granted = await load(named, { platform: shared(', tenants = ["globex", "acme"]'), env });
    expect(granted.plan.steps.map((s) => s.id)).toEqual(['probe-source', 'probe-files-only', 'write-snapshot', 'count-snapshot']);
    // One tenant in the platform config (one deployment per tenant): its connections are its own.
    expect((await load(named, { platform, env })).plan.steps).toHaveLength(4);
  });

  it('refuses a connection granted to a tenant the platform config does not list', async () => {
    const issues = await configIssues(named, { platform: shared(', tenants = ["acme", "globx"]'), env: { CRM_PW: 'pw' } });
    expect(issues).toEqual([{ path: '(platform) jdbc.connections.crm.tenants[1]', message: expect.stringContaining('"globx" is not a tenant') }]);
  });

  it('refuses url, user, password and driver next to a named connection', async () => {
    const issues = await configIssues(
      named.replace(
        'table = "public.customers"',
        'table = "public.customers", url = "jdbc:postgresql://x/y", user = "u", password { env = "X" }, driver = "a.B"',
      ),
      { platform },
    );
    expect(issues.map((i) => i.path).sort()).toEqual(['source.driver', 'source.password', 'source.url', 'source.user']);
    expect(issues[0]?.message).toMatch(/comes from the platform connection "crm"/);
  });

  it('refuses a where outside the expression grammar, at its position', async () => {
    const withWhere = (w: string) => valid.replace('table = "public.orders"', `table = "public.orders", where = "${w}"`);
    expect(byPath(await configIssues(withWhere('id > 1) OR (1 = 1')))).toEqual({
      'source.where': 'at position 7: unexpected ")" (expected an operator or the end)',
    });
    expect(byPath(await configIssues(withWhere('input_file_name() IS NOT NULL')))).toEqual({
      'source.where': 'at position 1: function input_file_name is not allowed: it discloses the server and session, not the row',
    });
    expect(byPath(await configIssues(withWhere('id > 1 -- and the rest')))).toEqual({ 'source.where': 'at position 8: comments (--) are not allowed' });
  });

  it('refuses query together with table, where or partition-column', async () => {
    const both = await configIssues(valid.replace('table = "public.orders"', 'table = "public.orders", query = "SELECT 1"'));
    expect(byPath(both)).toEqual({ 'source.query': 'cannot be combined with source.table: give one of them' });
    const where = await configIssues(valid.replace('table = "public.orders"', 'query = "SELECT * FROM orders", where = "id > 1"'));
    expect(byPath(where)).toEqual({ 'source.where': 'filters source.table; with source.query put the condition inside the query' });
    const partitioned = await configIssues(
      valid.replace('table = "public.orders"', 'query = "SELECT * FROM orders", partition-column = "id", lower-bound = 1, upper-bound = 9, num-partitions = 2'),
    );
    expect(byPath(partitioned)['source.partition-column']).toMatch(/needs source.table/);
  });

  it('refuses incomplete or inverted partitioned-read bounds', async () => {
    const incomplete = await configIssues(valid.replace('table = "public.orders"', 'table = "public.orders", partition-column = "id", lower-bound = 1'));
    expect(byPath(incomplete)).toEqual({
      'source.upper-bound': 'is required with source.partition-column',
      'source.num-partitions': 'is required with source.partition-column',
    });
    const inverted = await configIssues(
      valid.replace('table = "public.orders"', 'table = "public.orders", partition-column = "id", lower-bound = 10, upper-bound = 10, num-partitions = 2'),
    );
    expect(byPath(inverted)).toEqual({ 'source.upper-bound': 'must be greater than lower-bound' });
    const mixed = await configIssues(
      valid.replace(
        'table = "public.orders"',
        'table = "public.orders", partition-column = "id", lower-bound = 1, upper-bound = "2026-07-05", num-partitions = 2',
      ),
    );
    expect(byPath(mixed)['source.upper-bound']).toMatch(/same kind/);
    const tooMany = await configIssues(
      valid.replace('table = "public.orders"', 'table = "public.orders", partition-column = "id", lower-bound = 1, upper-bound = 9, num-partitions = 1000'),
    );
    expect(byPath(tooMany)['source.num-partitions']).toMatch(/at most 256/);
  });

  it('refuses source tables that are not plain identifiers and hostile partition columns', async () => {
    for (const table of ['orders; DROP TABLE x', '(SELECT 1) t', 'a.b.c.d', '"Orders"', 'orders--']) {
      const issues = await configIssues(valid.replace('"public.orders"', JSON.stringify(table)));
      expect(issues[0]?.path, table).toBe('source.table');
    }
    const col = await configIssues(valid.replace('partition-by = []', 'partition-by = ["a b"]'));
    expect(col[0]?.path).toBe('target.partition-by[0]');
  });

  it('refuses a bad snapshot date, also from --set', async () => {
    const issues = await configIssues(valid, { set: ['target.snapshot-date=05.07.2026'] });
    // (isoDate() in core/config/validate.ts also adds "is not a valid calendar date" for a malformed value.)
    expect(issues[0]).toEqual({ path: 'target.snapshot-date', message: 'must be a date like 2026-07-05' });
    expect(issues.every((i) => i.path === 'target.snapshot-date')).toBe(true);
    const job = await load(valid, { set: ['target.snapshot-date=2026-07-06'] });
    expect(job.config.target['snapshot-date']).toBe('2026-07-06');
  });

  it('enforces the tenant policy of the platform config', async () => {
    const issues = await configIssues(named.replace('file:///lake/acme', 'file:///lake/globex'), { platform });
    expect(issues[0]?.path).toBe('tenant.storage-root');
  });
});

describe('jdbc-snapshot-ingest v1 plans', () => {
  it('reads through JDBC, stamps, and overwrites only its snapshot date', async () => {
    const job = await load(valid, { env: { SHOP_PW: PASSWORD } });
    const [probe, write, count] = planned(job).map((s) => compile(s, false));
    expect(probe).toContain('"format":"jdbc"');
    expect(probe).toContain('"dbtable":"public.orders"');
    expect(probe).toContain('"limit":1');
    expect(write).toContain('"path":"file:///lake/acme/bronze/orders"');
    expect(write).toContain('"mode":"SAVE_MODE_OVERWRITE"');
    // Without dynamic partition overwrite, mode overwrite would delete every other snapshot date.
    expect(write).toContain('"options":{"partitionOverwriteMode":"dynamic"}');
    expect(write).toContain('"partitioningColumns":["_snapshot_date"]');
    expect(write).toContain('"name":["_lake_tenant"]');
    expect(write).toContain('"string":"db.example:5432/shop/public.orders"');
    expect(write).toContain('"functionName":"current_timestamp"');
    expect(write).toContain('"date":20639'); // 2026-07-05 in days since the epoch
    expect(count).toContain('"paths":["file:///lake/acme/bronze/orders"]');
    expect(count).toContain('"date":20639');
  });

  it('with partition-by, replaces the date folder whole, its column folders in it', async () => {
    const job = await load(valid.replace('partition-by = []', 'partition-by = ["region"]'), { env: { SHOP_PW: PASSWORD } });
    const write = compile(step(job, 'write-snapshot'), false);
    // A dynamic overwrite would replace only the (date, region) folders written, and leave a region
    // the source no longer has in the date: the date's folder is overwritten instead, statically.
    expect(write).toContain('"path":"file:///lake/acme/bronze/orders/_snapshot_date=2026-07-05"');
    expect(write).toContain('"mode":"SAVE_MODE_OVERWRITE"');
    expect(write).toContain('"options":{"partitionOverwriteMode":"static"}');
    expect(write).toContain('"partitioningColumns":["region"]');
    // The date is the folder's name, not a column of the files.
    expect(write).toContain('"columnNames":["_snapshot_date"]');
  });

  it('sends where as plan expression nodes and query as the JDBC query option, never building SQL', async () => {
    const where = await load(valid.replace('table = "public.orders"', `table = "public.orders", where = "country = 'fr' OR amount IS NULL"`));
    const json = compile(step(where, 'write-snapshot'), false);
    expect(json).toContain(
      '"condition":{"unresolvedFunction":{"functionName":"or","arguments":[' +
        '{"unresolvedFunction":{"functionName":"==","arguments":[{"unresolvedAttribute":{"unparsedIdentifier":"`country`"}},{"literal":{"string":"fr"}}]}},' +
        '{"unresolvedFunction":{"functionName":"isnull","arguments":[{"unresolvedAttribute":{"unparsedIdentifier":"`amount`"}}]}}]}}',
    );
    expect(json).not.toContain('expressionString');
    expect(json).toContain('"dbtable":"public.orders"');
    expect(json).not.toMatch(/"query":/);
    const query = await load(valid.replace('table = "public.orders"', 'query = "SELECT id, name FROM public.orders WHERE id > 1"'));
    const q = compile(step(query, 'write-snapshot'), false);
    expect(q).toContain('"query":"SELECT id, name FROM public.orders WHERE id > 1"');
    expect(q).not.toContain('dbtable');
    expect(q).toContain('"string":"db.example:5432/shop/query"');
  });

  it('maps the partitioned-read options to Spark', async () => {
    const job = await load(
      valid.replace(
        'table = "public.orders"',
        'table = "public.orders", partition-column = "id", lower-bound = 1, upper-bound = 1000, num-partitions = 4, fetch-size = 500',
      ),
    );
    const json = compile(job.plan.steps[0]!, false);
    expect(json).toContain('"fetchsize":"500","partitionColumn":"id","lowerBound":"1","upperBound":"1000","numPartitions":"4"');
  });

  it('puts the password into the JDBC option only when executing; plan output shows [redacted]', async () => {
    const job = await load(valid, { env: { SHOP_PW: PASSWORD } });
    for (const step of planned(job).filter((s) => s.id !== 'count-snapshot')) {
      const shown = compile(step, false);
      expect(shown).toContain('"password":"[redacted]"');
      expect(shown).not.toContain(PASSWORD);
      expect(compile(step, true)).toContain(`"password":"${PASSWORD}"`);
    }
    expect(JSON.stringify(job.plan)).not.toContain(PASSWORD);
    expect(JSON.stringify(job.config)).not.toContain(PASSWORD);
  });

  it('takes url, user and password from a named connection; the source stamp names the connection', async () => {
    const job = await load(named, { platform, env: { CRM_PW: PASSWORD } });
    const json = compile(step(job, 'write-snapshot'), true);
    expect(json).toContain('"url":"jdbc:postgresql://crm-db:5432/crm"');
    expect(json).toContain('"user":"acme_reader"');
    expect(json).toContain(`"password":"${PASSWORD}"`);
    expect(json).toContain('"string":"crm/public.customers"');
  });

  it('resolves secrets only when executing: validate and plan need none; a missing one is a config error then', async () => {
    const job = await load(valid); // SHOP_PW is not set, and loading succeeds
    expect(compile(job.plan.steps[0]!, false)).toContain('[redacted]');
    let err: unknown;
    try {
      compile(job.plan.steps[0]!, true);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([{ path: 'source.password', message: 'environment variable SHOP_PW is not set' }]);
    const fromPlatform = await load(named, { platform });
    expect(() => compile(fromPlatform.plan.steps[0]!, true)).toThrow(/\(platform\) jdbc.connections.crm.password: environment variable CRM_PW is not set/);
  });

  it('reads the password from a mounted file', async () => {
    const dir = tempFiles({ pw: `${PASSWORD}\n` });
    const job = await load(valid.replace('password { env = "SHOP_PW" }', `password { file = "${join(dir, 'pw')}" }`));
    expect(compile(job.plan.steps[0]!, true)).toContain(`"password":"${PASSWORD}"`);
  });

  it('reports rows written and the bronze location, and skips an empty source', async () => {
    const job = await load(valid);
    const [probe, , count] = planned(job);
    if (probe?.kind !== 'query' || count?.kind !== 'query') throw new Error('expected query steps');
    expect(probe.interpret([])).toEqual({ skip: expect.stringMatching(/returned no rows: nothing written for snapshot-date 2026-07-05/) });
    expect(probe.interpret([{ one: 1 }])).toEqual({});
    expect(count.interpret([{ rows: 42n }])).toEqual({
      output: { path: 'file:///lake/acme/bronze/orders', format: 'parquet', location: 'file:///lake/acme/bronze/orders', metrics: { rowsWritten: 42 } },
      metrics: { rowsRead: 42, rowsWritten: 42 },
    });
  });

  it('describes a url without credentials', () => {
    expect(describeUrl('jdbc:postgresql://db.example:5432/shop?ssl=true')).toBe('db.example:5432/shop');
    expect(describeUrl('jdbc:postgresql://reader@db/shop')).toBe('db/shop');
    expect(describeUrl('jdbc:sqlite:/lake/sources/shop.db')).toBe('sqlite:shop.db');
    expect(describeUrl('jdbc:sqlserver://db:1433;databaseName=x')).toBe('db:1433');
  });
});

describe('jdbc-snapshot-ingest v2', () => {
  const v2 = (target: string) =>
    valid
      .replace('schema-version = 1', 'schema-version = 2')
      .replace(
        'target { table = "orders", snapshot-date = "2026-07-05", partition-by = [] }',
        `target { table = "orders", snapshot-date = "2026-07-05", ${target} }`,
      );
  const catalogs = `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }
tenants.acme { storage-roots = ["file:///lake/acme"], secrets.env = ["SHOP_PW"] }`;

  it('writes a bronze Iceberg table: create if missing, then replace exactly the snapshot date', async () => {
    const job = await load(v2('format = iceberg'), { platform: catalogs });
    expect(job.plan.steps.map((s) => s.id)).toEqual(['probe-source', 'create-namespace', 'create-table', 'write-snapshot', 'count-snapshot']);
    expect(job.plan.sessionConf).toEqual({ 'spark.sql.legacy.charVarcharAsString': 'true' });
    const write = String(compile(job.plan.steps[3]!, false));
    expect(write).toContain('"tableName":"`lake`.`acme_bronze`.`orders`"');
    expect(write).toContain('"mode":"MODE_OVERWRITE"');
    expect(write).toContain('"overwriteCondition"');
  });

  it('creates the table partitioned by _snapshot_date, then the configured fields, with bronze properties under the configured ones', async () => {
    const create = (job: Awaited<ReturnType<typeof load>>) => {
      const s = job.plan.steps.find((x) => x.id === 'create-table');
      if (s?.kind !== 'ensureTable' || s.create.kind !== 'writeV2') throw new Error('no create-table step');
      return { step: s, create: s.create };
    };
    const ice = create(
      await load(v2('format = iceberg, partition-by = ["days(updated_at)", "bucket(8, id)"], table-properties { write.merge.mode = merge-on-read }'), {
        platform: catalogs,
      }),
    );
    expect(ice.create.partitionBy.map(formatExpr)).toEqual(['_snapshot_date', 'days(updated_at)', 'bucket(8, id)']);
    expect(ice.create.properties).toEqual({ location: 'file:///lake/acme/bronze/orders', 'format-version': '2', 'write.merge.mode': 'merge-on-read' });
    expect(ice.step.shape?.partitionByConfigured).toBe(true);
    expect(ice.step.shape?.properties).toEqual({ 'write.merge.mode': 'merge-on-read' });
    const delta = create(
      await load(v2('format = delta, catalog = "spark_catalog", partition-by = ["country"], table-properties { delta.checkpointInterval = 5 }'), {
        platform: catalogs,
      }),
    );
    expect(delta.create.partitionBy.map(formatExpr)).toEqual(['_snapshot_date', 'country']);
    // The change data feed incremental readers need stays on unless the config says otherwise.
    expect(delta.create.properties).toMatchObject({ 'delta.enableChangeDataFeed': 'true', 'delta.checkpointInterval': '5' });
    const plain = create(await load(v2('format = iceberg'), { platform: catalogs }));
    expect(plain.create.partitionBy.map(formatExpr)).toEqual(['_snapshot_date']);
    expect(plain.step.shape?.partitionByConfigured).toBe(false);
  });

  it.each([
    [
      'format = delta, catalog = "spark_catalog", partition-by = ["days(updated_at)"]',
      'target.partition-by[0]',
      /Delta tables are partitioned by columns only/,
    ],
    ['partition-by = ["days(updated_at)"]', 'target.partition-by[0]', /parquet bronze is laid out in folders per value of a column/],
    ['partition-by = ["bucket(4, id)"]', 'target.partition-by[0]', /parquet bronze is laid out in folders/],
    ['table-properties { write.merge.mode = merge-on-read }', 'target.table-properties.write.merge.mode', /parquet bronze is files with no table to hold it/],
    ['format = iceberg, table-properties { delta.enableDeletionVectors = true }', 'target.table-properties.delta.enableDeletionVectors', /of delta tables/],
  ])('refuses, for the format, %s (78 at %s)', async (target, path, message) => {
    const err = await load(v2(target), { platform: catalogs }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as ConfigError).exitCode).toBe(78);
    expect((err as ConfigError).issues).toContainEqual(expect.objectContaining({ path, message: expect.stringMatching(message) }));
  });

  it.each([
    ['format = iceberg, partition-by = ["days(_snapshot_date)"]', 'target.partition-by[0]', /names a bronze metadata column/],
    ['format = iceberg, partition-by = ["_lake_source"]', 'target.partition-by[0]', /names a bronze metadata column/],
    ['format = iceberg, partition-by = ["id", "ID"]', 'target.partition-by[1]', /repeats partition-by\[0\]/],
    ['format = iceberg, table-properties { location = "file:///elsewhere" }', 'target.table-properties.location', /not a table property a job may set/],
  ])('refuses %s (78 at %s)', async (target, path, message) => {
    expect(await configIssues(v2(target), { platform: catalogs })).toContainEqual(expect.objectContaining({ path, message: expect.stringMatching(message) }));
  });

  it('keeps parquet as the default, refuses a catalog for parquet and a format the catalog does not hold', async () => {
    expect((await load(v2('partition-by = []'), { platform: catalogs })).plan.steps.map((s) => s.id)).toEqual([
      'probe-source',
      'probe-files-only',
      'write-snapshot',
      'count-snapshot',
    ]);
    expect(await configIssues(v2('catalog = "lake"'), { platform: catalogs })).toContainEqual({
      path: 'target.catalog',
      message: 'applies to iceberg and delta tables; parquet files need no catalog',
    });
    expect(await configIssues(v2('format = delta, catalog = "lake"'), { platform: catalogs })).toEqual([
      { path: 'target.format', message: 'is delta, but catalog "lake" holds iceberg tables' },
    ]);
  });
});

describe('jdbc-snapshot-ingest: what a job config may name', () => {
  const inline = `
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders", url = "jdbc:sqlite:/lake/acme/shop.db", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-07-05" }
`;
  it('refuses an inline url unless the platform allows inline urls (78 at source.url)', async () => {
    expect(await configIssues(inline, { platform: 'catalogs { lake { format = iceberg, default = true } }' })).toEqual([
      { path: 'source.url', message: expect.stringContaining('jdbc.inline-urls = deny') },
    ]);
    const allowed = await load(inline, { platform: 'catalogs { lake { format = iceberg, default = true } }\njdbc { inline-urls = allow }' });
    expect(allowed.plan.steps.length).toBeGreaterThan(0);
    // Without a platform config (a developer's machine) inline urls are allowed.
    expect((await load(inline)).plan.steps.length).toBeGreaterThan(0);
  });

  it("names only the secrets the platform grants the tenant: the runner's own credentials stay out of a url the config chose (78 at source.password)", async () => {
    const withPassword = (ref: string) => inline.replace('driver = "org.sqlite.JDBC"', `driver = "org.sqlite.JDBC", user = "u", password ${ref}`);
    const platform = (grant: string) => `jdbc { inline-urls = allow }\ntenants.acme { storage-roots = ["file:///lake/acme"]${grant} }`;
    const granted = platform(', secrets { env = ["ACME_DB_PW"], file-roots = ["/var/run/secrets/acme-db"] }');
    // Granted: the tenant's own variable, a file under its own secret directory.
    expect((await load(withPassword('{ env = "ACME_DB_PW" }'), { platform: granted })).plan.steps.length).toBeGreaterThan(0);
    expect((await load(withPassword('{ file = "/var/run/secrets/acme-db/password" }'), { platform: granted })).plan.steps.length).toBeGreaterThan(0);
    // Everything else the runner can read is refused, at validate, before any connection.
    for (const [ref, why] of [
      ['{ env = "SPARK_REMOTE" }', /\{ env = "SPARK_REMOTE" \} is not a secret the platform config grants tenant "acme" \(tenants\.acme\.secrets\.env/],
      ['{ env = "CRM_PW" }', /is not a secret the platform config grants/],
      ['{ file = "/var/run/secrets/kubernetes.io/serviceaccount/token" }', /is not under a directory the platform config grants tenant "acme"/],
      ['{ file = "/var/run/secrets/acme-db/../platform/token" }', /is not under a directory/],
      ['{ file = "/var/run/secrets/acme-dbx/password" }', /is not under a directory/],
      ['{ file = "/var/run/secrets/acme-db" }', /is not under a directory/],
    ] as const)
      expect(await configIssues(withPassword(ref), { platform: granted }), ref).toEqual([{ path: 'source.password', message: expect.stringMatching(why) }]);
    // No grant at all: no reference resolves.
    expect((await configIssues(withPassword('{ env = "ACME_DB_PW" }'), { platform: platform('') })).map((i) => i.path)).toEqual(['source.password']);
    // Without a platform config (one developer's machine) any reference resolves.
    expect((await load(withPassword('{ env = "SPARK_REMOTE" }'))).plan.steps.length).toBeGreaterThan(0);
  });

  it("refuses a driver class that is not the url's own driver (the server would load any class named)", async () => {
    for (const driver of ['java.lang.Runtime', 'org.postgresql.Driver', 'org.apache.spark.sql.SparkSession'])
      expect(await configIssues(inline.replace('"org.sqlite.JDBC"', `"${driver}"`))).toEqual([
        { path: 'source.driver', message: "must be the sqlite's driver: org.sqlite.JDBC" },
      ]);
  });
});
