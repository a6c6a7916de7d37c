import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError, InputMissingError, type LakehouseError } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { SparkError } from '../../../src/spark/errors.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tenantPolicyError, wrapTenantLogic } from '../../../src/spark/policy/index.js';
import { freshTenant, lakeHome, releaseSession, repoRoot, runSession, useClient } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * The server's judge of tenant logic (spark-plugins/, TenantLogicPlugin) on the live server, with
 * plans whose printed form lies: literals with line breaks that look like plan lines, function names
 * inside strings, backquoted function names, reflection into Hadoop's file system, regular
 * expressions, and another tenant's table by every syntax Spark 4.1 reads one with. Each refusal is
 * the config's error (78) at the logic's config path, and neither the other tenant's canary rows,
 * the server's environment nor a platform-only setting appears in any answer. What gold SQL
 * legitimately writes runs, and returns what Spark itself would.
 */

const acme = freshTenant();
const victim = freshTenant();
const CANARY = `CANARY-${randomUUID()}`;
const platform = platformSchema.parse({
  catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
  tenants: { [acme.id]: { 'storage-roots': [acme.root] }, [victim.id]: { 'storage-roots': [victim.root] } },
});
const V = {
  iceberg: `lake.${victim.id}_silver.t`,
  delta: `spark_catalog.${victim.id}_silver.d`,
  files: `${victim.root}/bronze/p`,
};
const OWN = `lake.${acme.id}_silver.o`;
/** What only the server and the platform know: its Spark install (SPARK_HOME in its environment), its catalog's database. */
let hidden: string[] = [];
const secrets = () => hidden;

let client: SparkConnectClient;
let session: SparkConnectClient;
useClient((c) => (client = c));
const sql = (text: string) => client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));

beforeAll(async () => {
  hidden = [
    CANARY,
    execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'spark-home'])
      .toString()
      .trim(),
    `${lakeHome()}/iceberg_catalog.db`,
  ];
  // The victim: an Iceberg table, a Delta table, parquet files and a view, each holding the canary.
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${victim.id}_silver`);
  await sql(`CREATE TABLE ${V.iceberg} (id INT, name STRING) USING iceberg LOCATION '${victim.root}/silver/t'`);
  await sql(`INSERT INTO ${V.iceberg} VALUES (1, '${CANARY}')`);
  await sql(`CREATE NAMESPACE IF NOT EXISTS spark_catalog.${victim.id}_silver`);
  await sql(`CREATE TABLE ${V.delta} (id INT, name STRING) USING delta LOCATION '${victim.root}/silver/d'`);
  await sql(`INSERT INTO ${V.delta} VALUES (1, '${CANARY}')`);
  await client.execute(
    compileCommandPlan(testQuery(`SELECT 1 AS id, '${CANARY}' AS name`).writeFiles(V.files, 'parquet', { mode: 'overwrite' }), { reveal: true }),
  );
  await sql(`CREATE OR REPLACE VIEW default.${victim.id}_view AS SELECT * FROM ${V.iceberg}`);
  // The attacker's own table, and a view of its own namespace over the victim's table.
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${acme.id}_silver`);
  await sql(`CREATE TABLE ${OWN} (id INT, name STRING, amount INT) USING iceberg LOCATION '${acme.root}/silver/o'`);
  await sql(`INSERT INTO ${OWN} VALUES (1, 'alice', 10), (2, 'bob', 20), (3, NULL, 30)`);
  await sql(`CREATE NAMESPACE IF NOT EXISTS spark_catalog.${acme.id}_silver`);
  await sql(`CREATE OR REPLACE VIEW spark_catalog.${acme.id}_silver.peek AS SELECT * FROM ${V.delta}`);
  session = await runSession(platform, tenantContext(acme.id, acme.root));
});

afterAll(async () => {
  await releaseSession(session);
});

/** Run `text` as tenant logic (gold's transform) in the bound session: its rows, or the config's error. */
async function judged(text: string, paths = ['transform.sql']): Promise<Record<string, unknown>[] | LakehouseError> {
  try {
    const r = await session.execute(compileRelationPlan(wrapTenantLogic(testQuery(text).rel, paths), { reveal: true }));
    return r.table ? arrowRows(r.table) : [];
  } catch (e) {
    const mapped = tenantPolicyError(e);
    if (!mapped) throw e;
    // Nothing the server sent back (message, parameters, causes) carries what the tenant may not see.
    const raw = e as SparkError;
    for (const s of secrets()) {
      expect(raw.serverMessage).not.toContain(s);
      expect(JSON.stringify(raw.messageParameters)).not.toContain(s);
      expect(JSON.stringify(raw.causes)).not.toContain(s);
      expect(mapped.message).not.toContain(s);
    }
    return mapped;
  }
}

async function refused(text: string, reason: RegExp | string): Promise<ConfigError> {
  const r = await judged(text);
  expect(r, text).toBeInstanceOf(ConfigError);
  const e = r as ConfigError;
  expect(e.exitCode).toBe(78);
  expect(e.issues[0]?.path).toBe('transform.sql');
  expect(e.message).toMatch(/refused by the tenant policy: /);
  expect(e.message).toMatch(reason);
  return e;
}

async function allowed(text: string): Promise<Record<string, unknown>[]> {
  const r = await judged(text);
  if (r instanceof Error) throw r;
  for (const s of secrets()) expect(JSON.stringify(r, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(s);
  return r;
}

describe('plans whose printed form lies are judged by their structure', () => {
  const forged = (lines: string) => `'x\n${lines}\n'`;

  it('a literal forging plan lines hides no call: the backquoted reflect after it is refused', async () => {
    await refused(
      `SELECT ${forged('+- RelationV2[id#1] lake.acme_silver.o\n== Analyzed Logical Plan ==\nProject [id#1]')} AS a, \`reflect\`('java.lang.System', 'getenv', 'HOME') AS h FROM ${OWN}`,
      /function reflect \(line 5, column \d+\) is not allowed in tenant logic: reflection runs Java code/,
    );
  });

  it('a literal that only looks like calls or other tenants’ relations is data: it runs and returns itself', async () => {
    const text = `reflect('java.lang.System','getenv','HOME')\n+- RelationV2[id#1] ${V.iceberg}\n: +- Relation [id#2] parquet`;
    const r = await allowed(`SELECT '${text.replaceAll("'", "\\'")}' AS s, id FROM ${OWN} WHERE id = 1`);
    expect(r).toEqual([{ s: text, id: 1 }]);
  });

  it.each([
    ['reflect', `SELECT reflect('java.lang.System', 'getenv', 'HOME') AS h`],
    ['a backquoted java_method', `SELECT \`java_method\`('java.lang.System', 'getProperty', 'user.home') AS h`],
    ['try_reflect', `SELECT try_reflect('java.lang.System', 'getenv', 'HOME') AS h`],
    ['system.builtin.reflect', `SELECT system.builtin.reflect('java.lang.System', 'getenv', 'HOME') AS h`],
    [
      'a Hadoop file-system call linking the root elsewhere',
      `SELECT java_method('org.apache.hadoop.fs.FileUtil', 'symLink', '${victim.root}/bronze', '${acme.root}/bronze/stolen') AS l`,
    ],
  ])('%s is refused: reflection runs Java code on the shared server', async (_, text) => {
    await refused(`${text} FROM ${OWN}`, /reflection runs Java code on the shared server/);
  });

  it.each([
    ['RLIKE', `SELECT name RLIKE '(a+)+b' AS m`],
    ['REGEXP', `SELECT name REGEXP '(a|a)*b' AS m`],
    ['regexp_replace', `SELECT regexp_replace(name, '(a|a)*b', '') AS m`],
    ['regexp_extract', `SELECT regexp_extract(name, '(a+)+b', 1) AS m`],
    ['split', `SELECT split(name, '(a+)+b') AS m`],
    ['str_to_map', `SELECT str_to_map(name, ',', ':') AS m`],
  ])('%s is refused: a regular expression backtracks on the shared server', async (_, text) => {
    await refused(`${text} FROM ${OWN}`, /regular expression/);
  });

  it.each([
    ['current_user()', 'current_user() AS u', /discloses the server/],
    ['version()', 'version() AS v', /discloses the server/],
    ['input_file_name()', 'input_file_name() AS f', /discloses the server/],
    ['a lambda', 'transform(array(id), x -> x + 1) AS l', /is not allowed in tenant logic/],
    ['a hint', '/*+ BROADCAST(o) */ id', /is not allowed in tenant logic/],
    ['collect_list (state grows with every row)', 'collect_list(name) AS l', /collect_list .* is not allowed/],
  ])('%s is refused', async (_, select, reason) => {
    await refused(`SELECT ${select} FROM ${OWN} o`, reason);
  });

  it('${…} is refused before Spark substitutes a configuration value, an environment variable or a system property into the text', async () => {
    for (const v of ['${env:HOME}', '${spark.sql.catalog.lake.uri}', '${system:java.home}'])
      await refused(`SELECT '${v}' AS v FROM ${OWN}`, /\$\{…\} is not allowed in SQL text/);
  });
});

describe('another tenant’s data, by every syntax Spark reads it with, is refused (and never named when it was not written)', () => {
  const outside = (name: string) => new RegExp(`table ${name.replaceAll('.', '\\.')} \\(line \\d+, column \\d+\\) is outside the tenant's namespaces`);
  it.each([
    ['its table', `SELECT * FROM ${V.iceberg}`, outside(V.iceberg)],
    ['its Delta table', `SELECT * FROM ${V.delta}`, outside(V.delta)],
    ['a two-part name in the session catalog', `SELECT * FROM ${victim.id}_silver.d`, outside(`${victim.id}_silver.d`)],
    ['TABLE', `TABLE ${V.iceberg}`, outside(V.iceberg)],
    ['a CTE', `WITH x AS (SELECT * FROM ${V.iceberg}) SELECT * FROM x`, outside(V.iceberg)],
    ['a CTE named like it, read outside the CTE’s scope', `SELECT * FROM (WITH t AS (SELECT 1) SELECT * FROM t) CROSS JOIN ${V.iceberg}`, outside(V.iceberg)],
    ['a scalar subquery', `SELECT (SELECT max(name) FROM ${V.iceberg}) AS m FROM ${OWN}`, outside(V.iceberg)],
    ['EXISTS', `SELECT * FROM ${OWN} WHERE EXISTS (SELECT 1 FROM ${V.iceberg})`, outside(V.iceberg)],
    ['IN (subquery)', `SELECT * FROM ${OWN} WHERE name IN (SELECT name FROM ${V.iceberg})`, outside(V.iceberg)],
    ['LATERAL', `SELECT * FROM ${OWN} o, LATERAL (SELECT name AS n FROM ${V.iceberg} v WHERE v.id = o.id)`, outside(V.iceberg)],
    ['pipe syntax', `FROM ${V.iceberg} |> WHERE id = 1 |> SELECT name`, outside(V.iceberg)],
    ['FROM first', `FROM ${V.iceberg} SELECT name`, outside(V.iceberg)],
    ['IDENTIFIER(…)', `SELECT * FROM IDENTIFIER('${V.iceberg}')`, /IDENTIFIER\(…\) \(line 1, column \d+\) .*|is outside the tenant's namespaces/],
    ['STREAM', `SELECT * FROM STREAM ${V.iceberg}`, /STREAM .* is not allowed \(a streaming read\)/],
    ['a view of the default namespace', `SELECT * FROM ${victim.id}_view`, outside(`${victim.id}_view`)],
    ['a parquet path', `SELECT * FROM parquet.\`${V.files}\``, /path-based table parquet\..* is not allowed: read tables by name/],
    ['a Delta path', `SELECT * FROM delta.\`${victim.root}/silver/d\``, /path-based table delta\..* is not allowed/],
    ['a glob', `SELECT * FROM parquet.\`${victim.root}/*/p\``, /path-based table parquet\..* is not allowed/],
    ['read_files', `SELECT * FROM read_files('${V.files}', format => 'parquet')`, /table function read_files .* is not allowed/],
    ['a table-valued function over a subquery', `SELECT * FROM explode((SELECT collect_list(name) FROM ${V.iceberg}))`, outside(V.iceberg)],
  ])('%s', async (_, text, reason) => {
    await refused(text, reason);
  });

  it('a view in the tenant’s own namespace is judged by what it expands to, and the refusal names nothing of the other tenant', async () => {
    const e = await refused(`SELECT * FROM spark_catalog.${acme.id}_silver.peek`, /a table outside the tenant's namespaces/);
    expect(e.message).not.toContain(victim.id);
  });

  it('statements do not run while tenant logic is judged: EXECUTE IMMEDIATE, a script, SET, DDL and DML are refused first', async () => {
    for (const text of [
      `EXECUTE IMMEDIATE 'DROP TABLE ${V.iceberg}'`,
      `BEGIN SELECT * FROM ${OWN}; END`,
      'SET spark.sql.ansi.enabled = false',
      `CREATE TABLE lake.${acme.id}_silver.x AS SELECT * FROM ${OWN}`,
      `INSERT INTO ${OWN} VALUES (9, 'x', 9)`,
      `DROP TABLE ${V.iceberg}`,
    ])
      await refused(text, /is not allowed in tenant logic \(a query only\)|is not valid|not allowed/);
    expect((await sql(`SELECT count(*) AS n FROM ${V.iceberg}`)).table?.numRows).toBe(1);
    expect((await sql(`SELECT count(*) AS n FROM ${OWN}`)).table?.getChild('n')?.get(0)).toBe(3n);
  });

  it('a table the tenant may read but that does not exist is a missing input (66), named as written', async () => {
    const r = await judged(`SELECT * FROM lake.${acme.id}_silver.nope`);
    expect(r).toBeInstanceOf(InputMissingError);
    expect((r as Error).message).toMatch(new RegExp(`names a table that does not exist: .*nope.* at line 1, column 15`));
  });

  it('an unknown column of its own table: the column, its position and suggestions from its own columns', async () => {
    const r = await judged(`SELECT id,\n  amout FROM ${OWN}`);
    expect(r).toBeInstanceOf(ConfigError);
    expect((r as ConfigError).issues).toEqual([
      {
        path: 'transform.sql',
        message: expect.stringMatching(/^names a column that does not exist: `amout` at line 2, column 3 \(did you mean `amount`.*\) \[UNRESOLVED_COLUMN/),
      },
    ]);
  });
});

describe('what gold SQL legitimately writes runs, with the results Spark itself gives', () => {
  it('joins, aggregates, windows, CTEs, VALUES, FROM-first and pipe syntax, casts and dates', async () => {
    expect(
      await allowed(`WITH v AS (SELECT * FROM VALUES (1, 'x'), (2, 'y') AS v(id, tag))
        SELECT o.id, v.tag, sum(o.amount) OVER (ORDER BY o.id) AS running, CAST(o.amount AS DECIMAL(10, 2)) AS d,
               date_add(DATE'2026-07-05', o.id) AS day, upper(coalesce(o.name, '?')) AS who
        FROM ${OWN} o JOIN v ON o.id = v.id ORDER BY o.id`),
    ).toEqual([
      { id: 1, tag: 'x', running: 10n, d: '10.00', day: expect.anything(), who: 'ALICE' },
      { id: 2, tag: 'y', running: 30n, d: '20.00', day: expect.anything(), who: 'BOB' },
    ]);
    expect(await allowed(`FROM ${OWN} |> WHERE amount > 15 |> AGGREGATE count(*) AS n`)).toEqual([{ n: 2n }]);
    expect(await allowed(`FROM ${OWN} SELECT max(amount) AS m`)).toEqual([{ m: 30 }]);
    expect(await allowed(`SELECT explode(array(1, 2)) AS e`)).toEqual([{ e: 1 }, { e: 2 }]);
    // What Spark's own session answers, the judged logic answers.
    for (const q of [
      `SELECT id, name, count(*) AS n FROM ${OWN} GROUP BY CUBE (id, name) ORDER BY id, name`,
      `SELECT * FROM (SELECT id, name FROM ${OWN}) PIVOT (count(*) FOR name IN ('alice', 'bob')) ORDER BY id`,
      `FROM ${OWN} |> WHERE amount > 15 |> SELECT id, amount * 2 AS twice |> ORDER BY id`,
    ])
      expect(await allowed(q)).toEqual(arrowRows((await sql(q)).table!));
    expect((await allowed(`SELECT count(*) AS n FROM ${OWN} TABLESAMPLE (100 PERCENT)`))[0]).toEqual({ n: 3n });
    expect((await allowed(`SELECT xxhash64(to_json(struct(*))) AS h FROM ${OWN}`)).length).toBe(3);
  });

  it('a namespace the platform grants is readable by its full name; the grant is the tenant’s alone', async () => {
    // A grant names a namespace and where its files lie: a table's files outside the read roots stay out of reach.
    const grant = (readRoots: string[]) =>
      platformSchema.parse({
        ...platform,
        tenants: { ...platform.tenants, [acme.id]: { 'storage-roots': [acme.root], 'read-namespaces': [`lake.${victim.id}_silver`], 'read-roots': readRoots } },
      });
    const count = async (p: ReturnType<typeof grant>) => {
      const granted = await runSession(p, tenantContext(acme.id, acme.root));
      try {
        const r = await granted.execute(
          compileRelationPlan(wrapTenantLogic(testQuery(`SELECT count(*) AS n FROM ${V.iceberg}`).rel, ['transform.sql']), { reveal: true }),
        );
        return arrowRows(r.table!);
      } catch (e) {
        return tenantPolicyError(e) ?? e;
      } finally {
        await releaseSession(granted);
      }
    };
    expect(await count(grant([`${victim.root}/silver`]))).toEqual([{ n: 1n }]);
    const withoutRoot = await count(grant([]));
    expect(withoutRoot).toBeInstanceOf(ConfigError);
    expect((withoutRoot as ConfigError).message).toMatch(/reads a location outside the tenant's storage roots/);
  });
});

describe('LIKE with a literal pattern: rewritten into linear string functions, with LIKE’s own answers', () => {
  // Text, pattern (and escape): every shape of pattern the rewrite handles, NULLs included.
  const cases: [string | null, string, string?][] = [
    ['abc', 'abc'],
    ['abc', 'ab'],
    ['abc', 'a%'],
    ['abc', '%c'],
    ['abc', '%b%'],
    ['abc', 'a_c'],
    ['abc', '_b_'],
    ['abcd', 'a%_d'],
    ['abcabc', 'a%b%c'],
    ['abcabc', '%a%a%a%'],
    ['a%c', 'a\\%c'],
    ['a_c', 'a!_c', '!'],
    ['', '%'],
    ['', ''],
    ['x', '%%'],
    ['ünïcødé ☃', '_nïc%é_☃'],
    ['line\nbreak', 'line%break'],
    [null, 'a%'],
    [null, '%a%b%'],
  ];
  it('agrees with Spark’s own LIKE on every case, and refuses what it cannot make linear', async () => {
    const values = cases.map(([t, p, e], i) => `(${i}, ${t === null ? 'CAST(NULL AS STRING)' : `'${t}'`}, '${p}', ${e ? `'${e}'` : 'NULL'})`).join(', ');
    const expressions = cases.map(([, p, e], i) => `CASE WHEN i = ${i} THEN t LIKE '${p}'${e ? ` ESCAPE '${e}'` : ''} END`).join(', ');
    const query = `SELECT i, coalesce(${expressions}) AS m FROM VALUES ${values} AS v(i, t, p, e) ORDER BY i`;
    expect(await allowed(query)).toEqual(arrowRows((await sql(query)).table!));
    // A pattern that backtracks for hours in Spark's regex engine (never run natively here: a regex
    // match ignores interrupts and would hold a core of the server) is linear once rewritten.
    const started = performance.now();
    expect(await allowed(`SELECT repeat('a', 40) LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%b' AS m`)).toEqual([{ m: false }]);
    expect(performance.now() - started).toBeLessThan(60_000);
    expect(
      await allowed(
        `SELECT name ILIKE 'A%' AS a, name LIKE ANY ('a%', '%b') AS b, name NOT LIKE ALL ('x%', 'y%') AS c, nullif(name, 'zz') AS d FROM ${OWN} ORDER BY id`,
      ),
    ).toEqual(
      arrowRows(
        (
          await sql(
            `SELECT name ILIKE 'A%' AS a, name LIKE ANY ('a%', '%b') AS b, name NOT LIKE ALL ('x%', 'y%') AS c, nullif(name, 'zz') AS d FROM ${OWN} ORDER BY id`,
          )
        ).table!,
      ),
    );
    await refused(`SELECT name LIKE '%a_b%' AS m FROM ${OWN}`, /"_" may stand only before the first "%" or after the last one/);
    await refused(`SELECT name LIKE concat(name, '%') AS m FROM ${OWN}`, /LIKE needs a literal pattern/);
    await refused(`SELECT name LIKE '${'%a'.repeat(20)}' AS m FROM ${OWN}`, /at most 16 "%"/);
  });
});
