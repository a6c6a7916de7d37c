import { describe, expect, it } from 'vitest';
import { templates } from '../../src/jobs/registry.js';
import {
  CANARY,
  PLATFORM_ONLY,
  PROTOTYPE_NAMES,
  TOKEN,
  attacker,
  bases,
  corpusDir,
  expressionPaths,
  hostileEnv,
  hostileEnvValues,
  hostileExpressions,
  hostileGoldSql,
  hostileRoots,
  legitimateGoldSql,
  namePaths,
  ownColumns,
  pathOf,
  platformReach,
  tablePaths,
  validate as validateIn,
  victim,
  withValue,
  withVictim,
  other,
} from './corpus.js';

/**
 * The validate tier of the hostile corpus (corpus.ts): every template version meets every class of
 * hostile config, refused when the config is loaded, without Spark, with 78 and the config path,
 * within a second; no canary, token or platform-only value in the answer. The classes that need a
 * server run in hostile-runs.test.ts.
 */
const dir = corpusDir();
const validate = (config: string, set: string[] = [], env: Record<string, string> = {}, platformFile = 'platform.conf', tenant?: string) =>
  validateIn(dir, config, set, env, platformFile, tenant);

describe('the corpus', () => {
  it('meets every template version of the registry (a new template cannot skip it)', () => {
    const all = templates.flatMap((t) => t.versions.map((v) => `${t.name} v${v.version}`));
    expect(all.filter((t) => !(t in bases))).toEqual([]);
    expect(Object.keys(bases).filter((t) => !(t in expressionPaths) || !(t in namePaths))).toEqual([]);
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

  it.each(platformReach)('the platform config (in the same folder) is out of reach: %s', async (_, line) => {
    const r = await validate(`${bases[template]}\n${line}\n`);
    expect(r.code, r.text).toBe(78);
    expect(r.text).not.toContain(PLATFORM_ONLY);
    expect(r.text).not.toContain(victim.root.replace(/^file:\/\//, ''));
    expect(r.messages.join('\n')).toMatch(/it is the platform config or a file the platform config includes|is not defined in the config/);
  });

  it('--set lines are job config: they include nothing and substitute no platform value', async () => {
    for (const set of [['include "platform.conf"'], ['job.name=${jdbc.connections.victim_shop.url}'], ['job { include "p-link.conf" }']]) {
      const r = await validate(bases[template]!, set);
      expect(r.code, set[0]).toBe(78);
      expect(r.text).not.toContain(PLATFORM_ONLY);
    }
  });

  it.each(PROTOTYPE_NAMES)('a name every JavaScript object answers to is an unknown name: %s', async (n) => {
    for (const path of [...namePaths[template]!, 'tenant.id']) {
      const { config, set } = withValue(template, path, n);
      const r = await validate(config, set);
      expect(r.code, `${pathOf(path)}: ${r.text}`).toBe(78);
      expect(r.paths).toContain(pathOf(path));
      expect(r.text).not.toMatch(/TypeError|InternalError|is not a function|Cannot read/);
    }
    // The orchestrator's binding to such a tenant is a usage error (64), not a crash.
    expect((await validate(bases[template]!, [], {}, 'platform.conf', n)).code).toBe(64);
  });

  it('a value of the wrong type names the type it must be, never "is required"', async () => {
    const r = await validate(bases[template]!, ['tenant.storage-root=5', 'job.name=[1]']);
    expect(r.code).toBe(78);
    expect(Object.fromEntries(r.paths.map((p, i) => [p, r.messages[i]]))).toMatchObject({
      'tenant.storage-root': 'must be a string, not a number',
      'job.name': 'must be a string, not a list',
    });
  });
});

describe.each(ownColumns)("%s refuses a config column named like the template's own (78, with the path)", (template, path, names) => {
  it.each(names)('%s', async (name) => {
    const { config, set } = withValue(template, path, name);
    const r = await validate(config, set);
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toContain(path.path);
  });
});

describe('gold-publish: the first wall over tenant SQL', () => {
  const gold = (sql: string) => bases['gold-publish v1']!.replace('"SELECT id, v FROM silver.orders"', JSON.stringify(sql));

  it.each(hostileGoldSql)('refuses %s (78 at transform.sql)', async (_, sql) => {
    const r = await validate(gold(withVictim(sql)));
    expect(r.code, r.text).toBe(78);
    expect(r.paths).toEqual(['transform.sql']);
    expect(r.text).not.toContain(CANARY);
  });

  it.each(legitimateGoldSql)('passes %s', async (_, sql) => {
    const r = await validate(gold(sql));
    expect(r.code, r.text).toBe(0);
  });
});

describe('jdbc-snapshot-ingest: inline urls, credentials and driver classes', () => {
  const inline = (url: string, driver = 'org.postgresql.Driver') =>
    bases['jdbc-snapshot-ingest v1']!.replace('connection = "shop"', `url = ${JSON.stringify(url)}, driver = ${JSON.stringify(driver)}`);

  it('refuses an inline url where the platform does not allow them (the server would open any database or SQLite file)', async () => {
    const r = await validate(inline('jdbc:sqlite:/var/lib/lake/iceberg_catalog.db', 'org.sqlite.JDBC'));
    expect(r.code).toBe(78);
    expect(r.paths).toContain('source.url');
  });

  it.each([
    ['user info', 'jdbc:postgresql://u:p@127.0.0.1:5432/db'],
    ['a password parameter', 'jdbc:postgresql://127.0.0.1:5432/db?password=x'],
    ['a socket factory', 'jdbc:postgresql://127.0.0.1:5432/db?socketFactory=org.springframework.context.support.ClassPathXmlApplicationContext'],
    ['a logger file', 'jdbc:postgresql://127.0.0.1:5432/db?loggerFile=/tmp/x'],
    ['a MySQL query interceptor (a class the server loads)', 'jdbc:mysql://127.0.0.1:3306/db?queryInterceptors=com.example.Evil', 'com.mysql.cj.jdbc.Driver'],
    [
      "an interceptor in MySQL's address=(…) host form",
      'jdbc:mysql://address=(host=127.0.0.1)(queryInterceptors=com.example.Evil)/db',
      'com.mysql.cj.jdbc.Driver',
    ],
    [
      "SQL Server signing in with the server's own managed identity",
      'jdbc:sqlserver://127.0.0.1:1433;databaseName=db;authentication=ActiveDirectoryMSI',
      'com.microsoft.sqlserver.jdbc.SQLServerDriver',
    ],
    [
      "DB2's client reroute through a JNDI name",
      'jdbc:db2://127.0.0.1:50000/DB:clientRerouteServerListJNDIName=ldap://127.0.0.1/x;',
      'com.ibm.db2.jcc.DB2Driver',
    ],
    ['a SQLite database fetched from a url', 'jdbc:sqlite::resource:http://127.0.0.1/x.db', 'org.sqlite.JDBC'],
  ])('%s in an inline url, even where inline urls are allowed', async (_, url, driver?: string) => {
    const r = await validate(inline(url, driver), [], {}, 'platform-inline.conf');
    expect(r.code).toBe(78);
    expect(r.paths).toContain('source.url');
  });

  it.each([
    ['the Spark remote with its token', '{ env = "SPARK_REMOTE" }'],
    ['a token variable', '{ env = "SPARK_CONNECT_AUTHENTICATE_TOKEN" }'],
    ["the pod's service account token", '{ file = "/var/run/secrets/kubernetes.io/serviceaccount/token" }'],
    ['a prototype property of the environment', '{ env = "constructor" }'],
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
    expect(r.text).not.toContain(PLATFORM_ONLY);
  });

  it("a driver class other than the url protocol's own (a protocol named like a prototype property included)", async () => {
    for (const [url, driver] of [
      ['jdbc:postgresql://127.0.0.1:5432/db', 'java.lang.ProcessBuilder'],
      ['jdbc:constructor://127.0.0.1:5432/db', 'org.postgresql.Driver'],
    ]) {
      const r = await validate(inline(url!, driver), [], {}, 'platform-inline.conf');
      expect(r.code, r.text).toBe(78);
      expect(r.paths).toContain('source.driver');
    }
  });
});
