import { join } from 'node:path';
import { factsOf } from '../../support/facts.js';
import { formatPlan } from '../../../src/app/plan-view.js';
import { parseIsoDate } from '../../../src/core/instant.js';
import { describe, expect, it } from 'vitest';
import { ConfigError, DataError } from '../../../src/core/errors.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { tenantLogicOf } from '../../../src/runner/tenant-logic.js';
import { stepTouches } from '../../../src/runner/steps/index.js';
import {
  composeSteps,
  composeStepsWithOrigin,
  dateLiteral,
  rewriteTables,
  rewriteTransform,
  screenTransform,
  sentPositionMapper,
  tokenize,
} from '../../../src/jobs/gold/transform-sql.js';
import { judge, noOp } from '../../../src/jobs/gold/gold-publish.js';
import type { Expectation } from '../../../src/jobs/gold/expectations.js';
import type { Step } from '../../../src/jobs/template.js';
import { tempFiles } from '../../support/files.js';

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"], read-namespaces = ["lake.shared_ref"] } }
`;

const config = (transform: string, extra = '') => `
job    { template = "gold-publish", schema-version = 1, name = "acme-daily" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
transform { ${transform} }
target { table = "daily_sales", grain = ["sale_date", "customer"], mode = replace-range, range-column = "sale_date" }
${extra}
`;
const simple = config(
  'sql = "SELECT order_date AS sale_date, customer, sum(amount) AS revenue FROM silver.orders WHERE order_date = :logical_date GROUP BY 1, 2"',
);

async function load(text: string, opts: { logicalDate?: string } = { logicalDate: '2026-07-05' }) {
  const dir = tempFiles({ 'job.conf': text, 'platform.conf': platform });
  return loadJob({
    configFile: join(dir, 'job.conf'),
    envFile: join(dir, 'platform.conf'),
    overrides: [],
    env: {},
    runId: 'test-run',
    ...(opts.logicalDate ? { logicalDate: opts.logicalDate } : {}),
  });
}

async function issues(text: string, opts?: { logicalDate?: string }) {
  const err = await load(text, opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues;
}

/** What the platform grants tenant acme in these tests (tenants.acme.read-namespaces). */
const GRANTS = { readNamespaces: ['lake.shared_ref'] };
const rewrite = (sql: string, known: string[] = []) => {
  const s = screenTransform(sql, { known, ...GRANTS });
  if (!s.ok) throw new Error(s.problems.join('; '));
  return rewriteTables(
    s,
    (r) => ['lake', `acme_${r.layer}`, r.table],
    () => '2026-07-05',
  );
};
const problems = (sql: string, known: string[] = []) => {
  const s = screenTransform(sql, { known, ...GRANTS });
  return s.ok ? [] : s.problems;
};

describe('gold-publish: the transform screen (tokens, never a regex over raw text)', () => {
  it('rewrites layer-qualified tables to the tenant namespaces, and only tables', () => {
    expect(rewrite("SELECT o.id, 'FROM silver.x; --' AS s, `silver.orders` FROM silver.orders o JOIN gold.daily d ON o.id = d.id")).toBe(
      "SELECT o.id, 'FROM silver.x; --' AS s, `silver.orders` FROM `lake`.`acme_silver`.`orders` o JOIN `lake`.`acme_gold`.`daily` d ON o.id = d.id",
    );
    expect(rewrite('SELECT * FROM `silver` . `orders`, gold.a')).toBe('SELECT * FROM `lake`.`acme_silver`.`orders`, `lake`.`acme_gold`.`a`');
    expect(rewrite('WITH a AS (SELECT * FROM silver.orders) SELECT * FROM a WHERE x IN (SELECT y FROM gold.t)')).toBe(
      'WITH a AS (SELECT * FROM `lake`.`acme_silver`.`orders`) SELECT * FROM a WHERE x IN (SELECT y FROM `lake`.`acme_gold`.`t`)',
    );
    expect(rewrite('SELECT * FROM paid', ['paid'])).toBe('SELECT * FROM paid');
    expect(rewrite('SELECT * FROM (silver.orders) o JOIN ((gold.t)) ON true, (SELECT 1) x')).toBe(
      'SELECT * FROM (`lake`.`acme_silver`.`orders`) o JOIN ((`lake`.`acme_gold`.`t`)) ON true, (SELECT 1) x',
    );
  });

  it('knows string literals: escapes, doubled quotes, raw strings, double quotes', () => {
    expect(rewrite(`SELECT 'it''s FROM x', 'a\\' FROM y', r'\\', "q"" FROM z" FROM silver.t`)).toBe(
      `SELECT 'it''s FROM x', 'a\\' FROM y', r'\\', "q"" FROM z" FROM \`lake\`.\`acme_silver\`.\`t\``,
    );
    expect(problems("SELECT 'open FROM silver.t")).toEqual([expect.stringContaining('string literal is not closed')]);
    expect(problems('SELECT `open FROM silver.t')).toEqual([expect.stringContaining('quoted identifier is not closed')]);
  });

  it("splits tokens where Spark's lexer does: numbers, raw strings and what follows an exponent's sign", () => {
    const texts = (sql: string) => {
      const t = tokenize(sql);
      return 'tokens' in t ? t.tokens.filter((x) => x.kind !== 'ws').map((x) => `${x.kind}:${x.text}`) : [t.problem];
    };
    expect(texts("1e+r'\\'")).toEqual(['number:1e', 'op:+', "string:r'\\'"]);
    expect(texts("1.r'\\'")).toEqual(['number:1', 'op:.', "string:r'\\'"]);
    expect(texts("x r'\\' R\"\\\" `q`r'\\'")).toEqual(['word:x', "string:r'\\'", 'string:R"\\"', 'word:`q`', "string:r'\\'"]);
    // After an identifier character the r is part of the identifier (Spark: 1r, xr, 5r), so the quote opens an ordinary literal.
    expect(texts("SELECT 1r'\\'' xr'\\'' 1.5r'\\''")).toEqual([
      'word:SELECT',
      'number:1r',
      "string:'\\''",
      'word:xr',
      "string:'\\''",
      'number:1.5r',
      "string:'\\''",
    ]);
    expect(texts('1.5e+10 .5E-3D 12L 1e+x')).toEqual(['number:1.5e+10', 'number:.5E-3D', 'number:12L', 'number:1e', 'op:+', 'word:x']);
  });

  it('binds parameters as DATE literals of a checked date, never text of the tenant', () => {
    expect(rewrite("SELECT * FROM silver.t WHERE d = :logical_date AND s = ':logical_date'")).toBe(
      "SELECT * FROM `lake`.`acme_silver`.`t` WHERE d = DATE'2026-07-05' AND s = ':logical_date'",
    );
    expect(() => dateLiteral("2026-07-05' OR '1'='1")).toThrow(/not an ISO date/);
    expect(problems('SELECT * FROM silver.t WHERE d = :other')).toEqual([expect.stringContaining('unknown parameter :other')]);
    expect(problems('SELECT * FROM silver.t WHERE d = ?')).toEqual([expect.stringContaining('positional parameters')]);
    expect(problems("SELECT '${spark.app.id}' FROM silver.t")).toEqual([expect.stringContaining('${…} is not allowed')]);
  });

  const refused: [string, string][] = [
    ['another tenant, three-part', 'SELECT * FROM lake.beta_silver.orders'],
    ['three parts quoted', 'SELECT * FROM `lake`.`beta_silver`.`orders`'],
    ['unqualified', 'SELECT * FROM orders'],
    ['bronze', 'SELECT * FROM bronze.orders_cdc'],
    ['delta path', 'SELECT * FROM delta.`file:///lake/beta/silver/orders`'],
    ['parquet path', 'SELECT * FROM parquet.`/lake/beta`'],
    ['read_files', "SELECT * FROM read_files('file:///lake/beta')"],
    ['IDENTIFIER', "SELECT * FROM IDENTIFIER('lake.beta_silver.orders')"],
    ['table-valued function', 'SELECT * FROM range(10)'],
    ['a second statement', 'SELECT 1 FROM silver.t; DROP TABLE lake.acme_gold.x'],
    ['EXECUTE IMMEDIATE', "EXECUTE IMMEDIATE 'DROP TABLE lake.acme_gold.x'"],
    ['EXECUTE IMMEDIATE inside a query', "WITH a AS (SELECT 1) EXECUTE IMMEDIATE 'x'"],
    ['INSERT after WITH', 'WITH a AS (SELECT * FROM silver.t) INSERT INTO gold.x SELECT * FROM a'],
    ['hint', 'SELECT /*+ BROADCAST(t) */ * FROM silver.t'],
    ['a hint after a comment', 'SELECT /* x */ /*+ REPARTITION(1) */ * FROM silver.t'],
    ['an unclosed comment', 'SELECT * FROM silver.t /* /* */'],
    ['reflect', "SELECT reflect('java.lang.Runtime', 'getRuntime') FROM silver.t"],
    // A quoted identifier is an identifier: Spark resolves `reflect` as reflect (the issue's way in).
    ['backquoted reflect', "SELECT `reflect`('java.lang.System', 'getenv', 'HOME') FROM silver.t"],
    ['backquoted REFLECT in upper case', "SELECT `REFLECT`('java.lang.System', 'getenv', 'HOME') FROM silver.t"],
    ['backquoted java_method, qualified', "SELECT system.builtin.`java_method`('java.lang.System', 'getenv', 'HOME') FROM silver.t"],
    ['backquoted regexp_replace', "SELECT `regexp_replace`(s, '(a+)+$', '') FROM silver.t"],
    ['backquoted rlike', "SELECT `rlike`(s, '(a+)+b') FROM silver.t"],
    ['backquoted read_files', "SELECT * FROM `read_files`('file:///lake/beta')"],
    ['backquoted IDENTIFIER', "SELECT * FROM `identifier`('lake.beta_silver.c')"],
    ['reflect behind a comment', "SELECT reflect /* x */ ('java.lang.System', 'getenv', 'HOME') FROM silver.t"],
    // Script transforms run a program on the server.
    ['SELECT TRANSFORM … USING', "SELECT TRANSFORM (id) USING 'cat' AS (x) FROM silver.t"],
    ['FROM-first MAP … USING', "FROM silver.t MAP id USING 'sh -c id' AS x"],
    ['REDUCE … USING, raw string', "FROM silver.t REDUCE id USING r'cat'"],
    ['ROW FORMAT SERDE', "SELECT TRANSFORM (id) ROW FORMAT SERDE 'x.Y' USING 'cat' FROM silver.t"],
    ['table options', "SELECT * FROM silver.t WITH ('path' = 'file:///lake/beta/silver/c')"],
    ['java_method', "SELECT java_method('java.lang.System', 'exit', 1) FROM silver.t"],
    ['not a query', 'DROP TABLE gold.x'],
    ['comma join to another tenant', 'SELECT * FROM silver.a JOIN silver.b ON a.x = b.x, lake.beta_silver.c'],
    ['subquery of another tenant', 'SELECT * FROM silver.a WHERE EXISTS (SELECT 1 FROM lake.beta_silver.c)'],
    ['TABLE of another tenant', 'SELECT * FROM silver.a UNION ALL TABLE lake.beta_silver.c'],
    ['non-ASCII look-alike', 'SELECT * FROM silver．orders'],
    ['LIKE with a column as its pattern', 'SELECT * FROM silver.t WHERE s LIKE p'],
    ['LIKE with a pattern concatenated', "SELECT * FROM silver.t WHERE s LIKE '%a' || p"],
    ['LIKE with a pattern compared', "SELECT * FROM silver.t WHERE s LIKE '%a' = true"],
    ['LIKE with a pattern of a function', 'SELECT * FROM silver.t WHERE s ILIKE lower(p)'],
    ['LIKE ANY', "SELECT * FROM silver.t WHERE s LIKE ANY ('a%', 'b%')"],
    ['NOT LIKE ALL', "SELECT * FROM silver.t WHERE s NOT LIKE ALL ('a%', 'b%')"],
    ['ESCAPE without a literal', "SELECT * FROM silver.t WHERE s LIKE 'a!%' ESCAPE e"],
    ['like() as a function', "SELECT like(s, '%a%') FROM silver.t"],
    ['RLIKE', "SELECT * FROM silver.t WHERE s RLIKE '(a+)+b'"],
    ['REGEXP', "SELECT * FROM silver.t WHERE s REGEXP '(a|a)*b'"],
    ['regexp_replace', "SELECT regexp_replace(s, '(a+)+$', '') FROM silver.t"],
    ['like()', "SELECT like(s, '%a%b') FROM silver.t"],
    ['split', "SELECT split(s, '(a+)+b') FROM silver.t"],
    // Spark's relation grammar has '(' relation ')': a table in parentheses is a table, not a subquery.
    ['a parenthesised table of another tenant', 'SELECT * FROM (lake.beta_silver.c)'],
    ['a parenthesised table joined', 'SELECT * FROM silver.a JOIN (lake.beta_silver.c) ON true'],
    ['a table in double parentheses', 'SELECT * FROM ((`lake`.`beta_silver`.`c`))'],
    ['a parenthesised table after a comma', 'SELECT * FROM silver.a, (lake.beta_silver.c) TABLESAMPLE (1 ROWS)'],
    ['a parenthesised unqualified table', 'SELECT * FROM (orders)'],
    // Spark's lexer reads `1e+r'\'` as the identifier 1e, +, and the raw string r'\': what a lexer
    // that took `1e+r` for one number token saw as the rest of a literal is code to Spark.
    [
      'a query hidden behind a raw string after 1e+',
      "WITH c AS (SELECT 1 AS `1e`) SELECT CASE WHEN false THEN 1e+r'\\' END AS a, (SELECT count(*) FROM lake.beta_silver.c) AS b, '\\'' AS z FROM c",
    ],
    ['an RLIKE hidden behind a raw string after 1e-', "SELECT 1e-r'\\', s RLIKE '%a%a%b', '\\'' FROM silver.t"],
    // Spark reads `1e+reflect(` as 1e, +, reflect(: the function is a call, not part of a number.
    ['reflect after 1e+', "SELECT 1e+reflect('java.lang.Runtime', 'getRuntime') FROM silver.t"],
    ['regexp_replace after 1e-', "SELECT 1e-regexp_replace(s, '(a+)+$', '') FROM silver.t"],
    // A one-part name is a CTE only where Spark's WITH defines one: anywhere else Spark resolves it
    // to a temporary view or a table of the session's current namespace.
    ['a window name taken for a CTE', 'SELECT (SELECT count(*) FROM secret) AS n FROM silver.a WINDOW secret AS (ORDER BY id)'],
    ['a CTE outside the query that defines it', 'SELECT * FROM (WITH secret AS (SELECT 1 AS x) SELECT * FROM secret) s, secret'],
    ['a CTE of a subquery named by the outer query', 'SELECT * FROM secret WHERE EXISTS (WITH secret AS (SELECT 1) SELECT * FROM secret)'],
    ['a non-recursive CTE naming itself (a table of that name)', 'WITH secret AS (SELECT * FROM secret) SELECT * FROM secret'],
    ['a CTE named by an earlier one', 'WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a'],
    // Spark 4.1 reads `FROM STREAM <table>` as a streaming read of that table, whatever a CTE is called.
    ['STREAM over another tenant, after a CTE named stream', 'WITH stream AS (SELECT 1 AS x) SELECT * FROM stream lake.beta_silver.c'],
    ['STREAM over another tenant, in a join', 'WITH stream AS (SELECT 1 AS x) SELECT * FROM silver.a JOIN stream lake.beta_silver.c ON true'],
    // Spark's grammar: relation = LATERAL? relationPrimary, so a table may follow LATERAL.
    ['LATERAL before a table of another tenant', 'SELECT * FROM silver.a, LATERAL lake.beta_silver.c'],
    ['JOIN LATERAL before a table of another tenant', 'SELECT * FROM silver.a JOIN LATERAL lake.beta_silver.c ON true'],
    ['LATERAL before an unqualified table', 'SELECT * FROM silver.a, LATERAL orders'],
    // FROM-first, pipes and TABLE: the same table positions.
    ['FROM-first over another tenant', 'FROM lake.beta_silver.c SELECT *'],
    ['TABLE of another tenant, as the query', 'TABLE lake.beta_silver.c'],
    ['a pipe JOIN of another tenant', 'FROM silver.a |> JOIN lake.beta_silver.c ON true'],
    ['a pipe UNION with TABLE of another tenant', 'FROM silver.a |> UNION ALL TABLE lake.beta_silver.c'],
    ['a pipe DROP of a statement word elsewhere', 'SELECT 1 AS drop FROM silver.a'],
    ['map (a script transform) as the query', "MAP a USING 'cat'"],
    // VALUES lists: a comma after a row is a row only where no relation can start.
    ['a table after a VALUES list and its alias', 'SELECT * FROM VALUES (1), (2) AS v(x), lake.beta_silver.c'],
    ['a table after a VALUES list without AS', 'SELECT * FROM VALUES (1) v, lake.beta_silver.c'],
    ['a table in parentheses after a VALUES list', 'SELECT * FROM VALUES (1) v, ((lake.beta_silver.c))'],
    ['an unqualified table after a VALUES list', 'SELECT * FROM VALUES 1 v, x'],
    ['a keyword-named table after a VALUES list', 'SELECT * FROM VALUES 1 v, null'],
    // A namespace the platform grants is readable by its full name; no other is.
    ['a namespace that is not granted', 'SELECT * FROM lake.shared_refx.t'],
    ['a granted name in another catalog', 'SELECT * FROM hms.shared_ref.t'],
    ['four parts', 'SELECT * FROM lake.shared_ref.t.x'],
    ['a path inside a granted namespace', 'SELECT * FROM lake.shared_ref.`file:///lake/beta/silver/c`'],
    ['the granted namespace as a layer', 'SELECT * FROM shared_ref.t'],
  ];
  for (const [what, sql] of refused)
    it(`refuses ${what}`, () => {
      expect(problems(sql).length, sql).toBeGreaterThan(0);
    });

  it('refuses STREAM after a step named stream', () => {
    expect(problems('SELECT * FROM stream lake.beta_silver.c', ['stream']).length).toBeGreaterThan(0);
    expect(problems('SELECT * FROM stream', ['stream'])).toEqual([expect.stringContaining('STREAM')]);
    // Backquoted, it is the step's name.
    expect(problems('SELECT * FROM `stream`', ['stream'])).toEqual([]);
  });

  it('knows the CTEs where WITH defines them: lists, column lists, RECURSIVE, nesting, any case', () => {
    const ok = [
      'WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b JOIN a ON true',
      'WITH a (x, y) AS (SELECT 1, 2) SELECT * FROM a',
      'WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r',
      'SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) s',
      'WITH a AS (SELECT 1) SELECT * FROM silver.t WHERE EXISTS (SELECT 1 FROM A)',
      'WITH `stream` AS (SELECT 1) SELECT * FROM `stream`',
      'WITH a AS (WITH b AS (SELECT 1) SELECT * FROM b) SELECT * FROM a',
    ];
    for (const sql of ok) expect(problems(sql), sql).toEqual([]);
  });

  it('reads what follows LATERAL: a subquery, a table-valued function, or a table of the layers', () => {
    expect(problems('SELECT * FROM silver.a, LATERAL (SELECT a.x) l')).toEqual([]);
    expect(problems('SELECT * FROM silver.a, LATERAL explode(a.arr) e')).toEqual([]);
    expect(rewrite('SELECT * FROM silver.a JOIN LATERAL (SELECT 1) l ON true, LATERAL silver.b')).toBe(
      'SELECT * FROM `lake`.`acme_silver`.`a` JOIN LATERAL (SELECT 1) l ON true, LATERAL `lake`.`acme_silver`.`b`',
    );
  });

  it('names the regular expression it refuses, what to use instead, and where it is', () => {
    expect(problems("SELECT *\nFROM silver.t WHERE s RLIKE 'a.*'")).toEqual([
      'line 2, column 23: RLIKE is not allowed: Spark runs it as a regular expression, which can backtrack for hours on the shared server (use LIKE with a literal pattern, startswith, endswith, contains, locate, replace or split_part)',
    ]);
    expect(problems("SELECT regexp_extract(s, 'a', 0) FROM silver.t")).toEqual([
      expect.stringMatching(/^line 1, column 8: function regexp_extract\(\) is not allowed: Spark runs it/),
    ]);
    // A column of that name, backquoted, is a column; only a call is a call.
    expect(problems('SELECT `like`, `rlike`, `reflect` FROM silver.t')).toEqual([]);
  });

  it('passes what tenants legitimately write: comments, LIKE with a literal, FROM-first, pipes, VALUES, TABLE, a granted namespace', () => {
    const ok = [
      'SELECT id -- the key\nFROM silver.t',
      'SELECT id /* a /* nested */ comment */ FROM silver.t',
      "SELECT * FROM silver.t WHERE s LIKE 'a%' AND s NOT LIKE '%z' OR s ILIKE '%M_x%' ESCAPE '!'",
      "SELECT CASE WHEN s LIKE 'a%' THEN 1 ELSE 0 END AS f, (s LIKE ('%b')) AS g FROM silver.t WHERE s LIKE 'x' 'y%'",
      "SELECT * FROM silver.t WHERE s LIKE r'a\\%' ESCAPE '\\\\'",
      'FROM silver.t SELECT id, v WHERE v > 0',
      'FROM silver.t |> WHERE v > 0 |> EXTEND v * 2 AS w, 1 AS one |> SET w = w + 1 |> DROP one |> AGGREGATE sum(w) AS s GROUP BY id',
      'SELECT * FROM silver.t |> JOIN gold.g USING (id) |> AS x |> SELECT x.id',
      "VALUES (1, 'a'), (2, 'b')",
      "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(id, name) JOIN silver.t USING (id)",
      'SELECT * FROM VALUES (true, 1), (false, 2) v(b, n), silver.t',
      'TABLE silver.t',
      '(SELECT 1 AS x) UNION ALL (TABLE gold.g)',
      'SELECT r.* FROM lake.shared_ref.rates r JOIN silver.t ON r.id = t.id',
      'SELECT * FROM `lake`.`shared_ref`.`rates`',
      'SELECT * FROM LAKE.SHARED_REF.rates',
      'SELECT transform(arr, x -> x + 1) AS t2 FROM silver.t',
      'SELECT * FROM silver.t JOIN silver.u USING (id)',
    ];
    for (const sql of ok) expect(problems(sql), sql).toEqual([]);
  });

  it('drops comments from the text it sends (Spark never sees one), whatever they hide', () => {
    expect(rewrite('SELECT id -- FROM lake.beta_silver.c\nFROM silver.t')).toBe('SELECT id \nFROM `lake`.`acme_silver`.`t`');
    // A backslash before the line break continues a line comment (Spark's SIMPLE_COMMENT): still one comment.
    expect(rewrite('SELECT 1 AS x -- a \\\nFROM lake.beta_silver.c\nFROM silver.t')).toBe('SELECT 1 AS x \nFROM `lake`.`acme_silver`.`t`');
    expect(rewrite('SELECT a/**/-/* x */-b FROM silver.t')).toBe('SELECT a - -b FROM `lake`.`acme_silver`.`t`');
    expect(rewrite('SELECT /* /* */ FROM lake.beta_silver.c */ 1 FROM silver.t')).toBe('SELECT   1 FROM `lake`.`acme_silver`.`t`');
  });

  it("rewrites a granted namespace to its grant's own quoted name", () => {
    expect(rewrite('SELECT * FROM LAKE.Shared_Ref.rates, silver.t')).toBe('SELECT * FROM `lake`.`shared_ref`.`rates`, `lake`.`acme_silver`.`t`');
    // Without the grants (the schema), a three-part name waits for the plan, which has them.
    expect(screenTransform('SELECT * FROM lake.beta_silver.c').ok).toBe(true);
    expect(screenTransform('SELECT * FROM lake.beta_silver.c', { readNamespaces: [] }).ok).toBe(false);
  });

  it("maps positions of the text it sends back to the tenant's text: table rewrites, parameters, dropped comments", () => {
    const sql = 'SELECT a, -- note\n  b FROM silver.orders o\nWHERE d = :logical_date AND nope > 1';
    const s = screenTransform(sql, GRANTS);
    if (!s.ok) throw new Error(s.problems.join());
    const { text, origin } = rewriteTransform(
      s,
      (r) => ['lake', `acme_${r.layer}`, r.table],
      () => '2026-07-05',
      'transform.sql',
    );
    expect(text).toBe("SELECT a, \n  b FROM `lake`.`acme_silver`.`orders` o\nWHERE d = DATE'2026-07-05' AND nope > 1");
    const at = (needle: string) => origin.locate(text.indexOf(needle));
    expect(at('nope')).toEqual({ path: 'transform.sql', offset: sql.indexOf('nope'), line: 3, column: 29 });
    expect(at(' o\n')).toMatchObject({ line: 2, column: 23 });
    // Inside a replacement: the start of what the tenant wrote there.
    expect(at('acme_silver')).toMatchObject({ line: 2, column: 10 });
    expect(at("DATE'")).toMatchObject({ line: 3, column: 11 });
    // Spark's parse errors count lines from 1 and columns from 0.
    expect(origin.locateLineColumn(3, text.split('\n')[2]!.indexOf('nope'))).toMatchObject({ line: 3, column: 29 });
  });

  it("maps positions of composed steps to each step's own path", () => {
    const steps = ['SELECT id FROM silver.a', 'SELECT id,\n  bad FROM first_step'].map((sql, i) => {
      const s = screenTransform(sql, { known: i ? ['first_step'] : [] });
      if (!s.ok) throw new Error(s.problems.join());
      return { name: i ? 'second' : 'first_step', ...rewriteTransform(s, (r) => ['lake', `acme_${r.layer}`, r.table], undefined, `transform.steps[${i}].sql`) };
    });
    const { text, origin } = composeStepsWithOrigin(steps.map((s) => ({ name: s.name, sql: s.text, origin: s.origin })));
    expect(origin.locate(text.indexOf('bad'))).toEqual({ path: 'transform.steps[1].sql', offset: 13, line: 2, column: 3 });
    expect(origin.locate(text.indexOf('`lake`'))).toMatchObject({ path: 'transform.steps[0].sql', line: 1, column: 16 });
    // As the tenant policy's position mapper: the server's line and column count from 1, its offset from 0.
    const map = sentPositionMapper(origin);
    const lines = text.split('\n');
    const line = lines.findIndex((l) => l.includes('bad')) + 1;
    const found = { configPath: 'transform.steps[1].sql', line: 2, column: 3 };
    expect(map({ configPath: 'transform.steps', line, column: lines[line - 1]!.indexOf('bad') + 1 })).toEqual(found);
    expect(map({ configPath: 'transform.steps', line: 1, column: 1, offset: text.indexOf('bad') })).toEqual(found);
    // The text the composition adds is blamed on the step it introduces.
    expect(map({ configPath: 'transform.steps', line: lines.length, column: 1 })).toMatchObject({ configPath: 'transform.steps[1].sql' });
  });

  it('composes named steps as CTEs over each other', () => {
    expect(
      composeSteps([
        { name: 'paid', sql: 'SELECT 1' },
        { name: 'daily', sql: 'SELECT * FROM paid' },
      ]),
    ).toBe('WITH `paid` AS (\nSELECT 1\n),\n`daily` AS (\nSELECT * FROM paid\n)\nSELECT * FROM `daily`');
  });

  it('tokenizes every character: the tokens put together are the text', () => {
    const sql = "SELECT a::int, x.`b``c`, 1.5e3, 'x' FROM silver.t WHERE y >= :logical_date";
    const t = tokenize(sql);
    expect('tokens' in t && t.tokens.map((x) => x.text).join('')).toBe(sql);
  });
});

describe('gold-publish config', () => {
  it('accepts a transform and builds the steps, each carrying the transform flagged for the policy', async () => {
    const job = await load(simple);
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'check-source-columns',
      'create-namespace',
      'create-table',
      'check-schema',
      'check',
      'publish',
      'read-snapshot',
    ]);
    for (const s of job.plan.steps.filter((x) => ['check-source-columns', 'create-table', 'check-schema', 'check', 'publish'].includes(x.id)))
      expect(s.untrusted).toEqual(['transform.sql']);
    const check = job.plan.steps.find((s) => s.id === 'check')!;
    const json = JSON.stringify(stepPlan(check, { reveal: false }));
    expect(json).toContain("FROM `lake`.`acme_silver`.`orders` WHERE order_date = DATE'2026-07-05'");
    // As the executor sends it, the transform (and only it) is tenant logic for the server to judge.
    const sent = tenantLogicOf(check);
    if (sent.kind !== 'query') throw new Error('check is a query');
    const wrapped = JSON.stringify(sent.query.rel);
    expect(wrapped.match(/"kind":"tenantLogic"/g)).toHaveLength(1);
    expect(wrapped).toContain('"configPaths":["transform.sql"]');
  });

  it('adds the quarantine table and its write when an expectation quarantines, and flags custom expressions', async () => {
    const job = await load(
      config(
        'sql = "SELECT * FROM silver.orders"',
        `expectations = [
          { name = "amount_ok", type = expression, expr = "amount >= 0", action = quarantine }
          { name = "known_customer", type = relationship, column = "customer", to = "silver.customers", to-column = "id", action = drop }
        ]`,
      ),
    );
    // The expressions are judged with the transform before anything is created.
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'check-source-columns',
      'check-expectations',
      'create-namespace',
      'create-table',
      'create-quarantine',
      'check-schema',
      'check',
      'write-quarantine',
      'publish',
      'read-snapshot',
    ]);
    expect(job.plan.steps.find((s) => s.id === 'check')!.untrusted).toEqual(['transform.sql', 'expectations[0].expr']);
    const q = job.plan.steps.find((s) => s.id === 'write-quarantine')!;
    expect(q.when!(factsOf(job.plan.steps, { check: [{ quarantined: 0, prev_quarantined: 0 }] }))).toBe(false);
    expect(q.when!(factsOf(job.plan.steps, { check: [{ quarantined: 0, prev_quarantined: 3 }] }))).toBe(true);
    const json = JSON.stringify(
      stepPlan(
        job.plan.steps.find((s) => s.id === 'check')!,
        { reveal: false },
      ),
    );
    expect(json).toContain('`lake`.`acme_silver`.`customers`');
    expect(json).toContain('acme_gold`.`daily_sales__quarantine');
    // A result column named like a quarantine column (or the plan's __lake_ ones) is refused: 65 at the transform.
    const columns = job.plan.steps[0] as Extract<Step, { kind: 'checkColumns' }>;
    const named = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    expect(columns.interpret(named('sale_date', 'customer', 'id', 'amount', '_lake_note'))).toEqual({});
    for (const bad of ['_LAKE_run_id', '_lake_failed_checks', '__lake_f0'])
      expect(columns.interpret(named('sale_date', 'customer', bad)).fail?.report()).toMatchObject({ code: 'SOURCE_COLUMN_RESERVED', path: 'transform.sql' });
    // A grain, range or expectation column the result lacks: 78 at its path, "did you mean" from the result's columns.
    const missing = columns.interpret(named('sale_day', 'Customer', 'amount')).fail as ConfigError;
    expect(missing.exitCode).toBe(78);
    expect(missing.issues).toEqual([
      { path: 'target.grain[0]', message: 'column "sale_date" is not a column of the transform\'s result; did you mean "sale_day"?' },
      { path: 'target.range-column', message: 'column "sale_date" is not a column of the transform\'s result; did you mean "sale_day"?' },
    ]);
  });

  it('checks every expectation in one aggregate (one query step reads the result once)', async () => {
    const job = await load(
      config(
        'sql = "SELECT * FROM silver.orders"',
        `expectations = [
          { name = "a", type = not-null, columns = ["customer"] }
          { name = "b", type = accepted-values, column = "status", values = ["NEW", "PAID"], action = warn }
          { name = "c", type = range, column = "revenue", min = 0, max = 1000, action = drop }
          { name = "d", type = row-count, max-change-percent = 50, action = warn }
          { name = "e", type = freshness, column = "updated_at", max-age-hours = 24 }
        ]`,
      ),
    );
    const queries = job.plan.steps.filter((s) => s.kind === 'query' && JSON.stringify(stepPlan(s, { reveal: false })).includes('acme_silver'));
    expect(queries.map((s) => s.id)).toEqual(['check']);
    const json = JSON.stringify(stepPlan(queries[0]!, { reveal: false }));
    expect(json.match(/"aggregate"/g)?.length).toBe(2); // the result's aggregate, and the table's previous publish
  });

  it('reports every problem with its path (78): screen, keys, modes, expectations', async () => {
    const found = await issues(`
job    { template = "gold-publish", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
transform { steps = [{ name = "a", sql = "SELECT * FROM bronze.orders" }, { name = "a", sql = "SELECT * FROM b" }] }
target { table = "t", grain = ["k", "k"], mode = replace-range }
expectations = [
  { name = "x", type = row-count, max-change-percent = 5, action = quarantine }
  { name = "x", type = expression, expr = "a = (SELECT 1)" }
  { name = "y", type = relationship, column = "c", to = "lake.beta_silver.c", to-column = "id" }
]`);
    const paths = found.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'transform.steps[0].sql',
        'transform.steps[1].name',
        'transform.steps[1].sql',
        'target.grain[1]',
        'target.range-column',
        'expectations[0].action',
        'expectations[1].expr',
        'expectations[2].to',
      ]),
    );
  });

  it('refuses a logical date that is neither a date nor an instant (a bad command line, 64); a timestamp stands for its UTC date', async () => {
    await expect(load(simple, { logicalDate: "2026-07-05' OR '1'='1" })).rejects.toMatchObject({ exitCode: 64 });
    const job = await load(simple, { logicalDate: '2026-07-05T22:30:00-03:00' });
    expect(formatPlan(job.plan)).toContain("DATE '2026-07-06'");
    const missing = await issues(simple, {});
    expect(missing[0]!.path).toBe('target.mode');
  });

  it('reads a layer from the catalog transform.catalogs names (relationship checks too), else from the target’s', async () => {
    const job = await load(
      config(
        'catalogs { silver = "spark_catalog" }, sql = "SELECT s.*, g.x FROM silver.orders s JOIN gold.fx g ON s.d = g.d"',
        'expectations = [{ name = "known", type = relationship, column = "customer", to = "silver.customers", to-column = "id", action = warn }]',
      ),
    );
    const check = job.plan.steps.find((s) => s.id === 'check')!;
    const json = JSON.stringify(stepPlan(check, { reveal: false }));
    expect(json).toContain('FROM `spark_catalog`.`acme_silver`.`orders` s JOIN `lake`.`acme_gold`.`fx` g');
    expect(json).toContain('"unparsedIdentifier":"`spark_catalog`.`acme_silver`.`customers`"');
    expect(json).not.toContain('`lake`.`acme_silver`');
    // Only the platform's catalogs: an unknown one is refused at its path before any plan runs.
    const found = await issues(config('catalogs { silver = "elsewhere" }, sql = "SELECT * FROM silver.orders"'));
    expect(found).toEqual([expect.objectContaining({ path: 'transform.catalogs.silver', message: expect.stringContaining('elsewhere') })]);
    expect((await issues(config('catalogs { bronze = "lake" }, sql = "SELECT * FROM silver.orders"'))).map((i) => i.path)).toEqual([
      'transform.catalogs.bronze',
    ]);
  });

  it("reads a granted namespace by its full name, never another one (78 at the SQL's path when the plan is built)", async () => {
    const job = await load(config('sql = "SELECT o.*, r.rate FROM silver.orders o JOIN lake.shared_ref.rates r ON o.cur = r.cur"'));
    const check = job.plan.steps.find((s) => s.id === 'check')!;
    expect(JSON.stringify(stepPlan(check, { reveal: false }))).toContain('JOIN `lake`.`shared_ref`.`rates` r');
    // The granted table is listed as read (plan, validate, lineage) like the tenant's own.
    expect(stepTouches(check).reads.flatMap((t) => (t.kind === 'table' ? [t.parts.join('.')] : []))).toEqual(
      expect.arrayContaining(['lake.acme_silver.orders', 'lake.shared_ref.rates']),
    );
    const found = await issues(config('steps = [{ name = "a", sql = "SELECT * FROM silver.o" }, { name = "b", sql = "SELECT * FROM a, lake.beta_silver.c" }]'));
    expect(found).toEqual([
      {
        path: 'transform.steps[1].sql',
        message: expect.stringMatching(/^line 1, column 18: table lake\.beta_silver\.c: lake\.beta_silver is not a namespace the platform grants/),
      },
    ]);
  });

  it("marks every step that carries the transform with the origin of its SQL's positions", async () => {
    const job = await load(config('sql = """SELECT id,\n  amount FROM silver.orders"""'));
    const check = job.plan.steps.find((s) => s.id === 'check')!;
    const sent = JSON.stringify(stepPlan(check, { reveal: false }));
    expect(sent).toContain('amount FROM `lake`.`acme_silver`.`orders`');
    for (const step of job.plan.steps.filter((s) => s.untrusted?.includes('transform.sql'))) {
      expect(step.sqlOrigin?.locateLineColumn(2, 2), step.id).toEqual({ path: 'transform.sql', line: 2, column: 3, offset: 13 });
      // The tenant policy's hook: the server's 1-based line and column of the text sent.
      expect(step.mapPosition?.({ configPath: 'transform.sql', line: 2, column: 3 }), step.id).toEqual({ configPath: 'transform.sql', line: 2, column: 3 });
      expect(step.mapPosition?.({ configPath: 'transform.sql', line: 2, column: 14 }), step.id).toMatchObject({ line: 2, column: 14 });
    }
  });

  it('a merge cannot only warn about a duplicate grain', async () => {
    const text = simple
      .replace('mode = replace-range, range-column = "sale_date"', 'mode = merge')
      .concat('expectations = [{ name = "u", type = unique, action = warn }]');
    expect((await issues(text)).map((i) => i.path)).toEqual(['expectations[0].action']);
  });
});

describe('gold-publish: judging the one pass', () => {
  const publish = {
    mode: 'replace-range' as const,
    logicalDate: parseIsoDate('2026-07-05')!,
    range: { column: 'd', start: parseIsoDate('2026-07-05')!, end: parseIsoDate('2026-07-06')!, previous: parseIsoDate('2026-07-04')! },
  };
  const out = { table: 'lake.acme_gold.t', format: 'iceberg', location: 'file:///lake/acme/gold/t' };
  const exps: Expectation[] = [
    { name: 'nn', type: 'not-null', columns: ['c'], action: 'warn' },
    { name: 'q', type: 'expression', expr: { text: 'a > 0', ast: { kind: 'column', name: 'a' } } as never, action: 'quarantine' },
    { name: 'vol', type: 'row-count', 'max-change-percent': 10, action: 'fail' },
  ];
  const row = {
    rows: 10,
    written: 8,
    quarantined: 2,
    dropped: 0,
    written_hash: '5',
    failed_0: 1,
    failed_1: 2,
    prev_rows: 8,
    scope_rows: 0,
    scope_hash: '0',
    out_of_range: 0,
  };

  it('lists every expectation with its counts', () => {
    const r = judge(row, exps, publish, out);
    expect(r.fail).toBeUndefined();
    expect(r.output!.expectations).toEqual([
      { name: 'nn', type: 'not-null', action: 'warn', outcome: 'warned', failedRows: 1 },
      { name: 'q', type: 'expression', action: 'quarantine', outcome: 'quarantined', failedRows: 2 },
      { name: 'vol', type: 'row-count', action: 'fail', outcome: 'passed', failedRows: 0, observed: { rows: 8, previous: 8, changePercent: 0 } },
    ]);
    expect(r.output!.metrics).toEqual({ rows: 10, written: 8, dropped: 0, quarantined: 2 });
  });

  it('fails (65) naming the failed expectations, and rows outside the range', () => {
    const r = judge({ ...row, prev_rows: 4 }, exps, publish, out);
    expect(r.fail).toBeInstanceOf(DataError);
    expect(r.fail!.message).toContain('vol (row-count)');
    expect(r.output!.committed).toBe(false);
    // Nothing was published: nothing written, dropped or quarantined, whatever the check pass counted.
    expect(r.output!.metrics).toEqual({ rows: 10, written: 0, dropped: 0, quarantined: 0 });
    const o = judge({ ...row, out_of_range: 3 }, exps, publish, out);
    expect(o.fail!.message).toContain('3 row(s) whose d is outside [2026-07-05, 2026-07-06)');
    expect(o.output!.metrics).toEqual({ rows: 10, written: 0, dropped: 0, quarantined: 0 });
  });

  it('a publish equal to what it replaces is a no-op', () => {
    expect(noOp({ written: 3, written_hash: '42', scope_rows: 3, scope_hash: '42' }, 'replace-range')).toBe(true);
    expect(noOp({ written: 3, written_hash: '42', scope_rows: 3, scope_hash: '43' }, 'full-refresh')).toBe(false);
    expect(noOp({ changed: 0 }, 'merge')).toBe(true);
    expect(noOp({ changed: 2 }, 'merge')).toBe(false);
  });
});
