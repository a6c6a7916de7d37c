import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { analysisViolations, parseAnalyzedPlan, type TenantReadPolicy } from '../../../../src/spark/policy/index.js';
import { splitIdentity } from '../../../../src/spark/policy/plan-text.js';

/**
 * The parser on extended explains captured from our own Spark 4.1.4 server (Delta 4.4, Iceberg
 * 1.11): the example templates' flagged steps (cdc-silver-merge v1/v2, jdbc-snapshot-ingest v1/v2)
 * and hostile expressions. Machine paths in the fixtures are replaced by /lake.
 */

const dir = fileURLToPath(new URL('./fixtures/', import.meta.url));
const fixture = (name: string) => readFileSync(`${dir}${name}.explain.txt`, 'utf8');
const fixtures = readdirSync(dir).map((f) => f.replace(/\.explain\.txt$/, ''));

const acme: TenantReadPolicy = {
  tenant: 'acme',
  namespaces: ['lake.acme_bronze', 'lake.acme_silver', 'lake.acme_gold', 'spark_catalog.acme_bronze', 'spark_catalog.acme_silver', 'spark_catalog.acme_gold'],
  roots: ['file:///lake/acme'],
};
const judge = (text: string, jdbcSources = 0) => analysisViolations(parseAnalyzedPlan(text), acme, { jdbcSources });

describe('the example templates’ own plans', () => {
  const templates = fixtures.filter((f) => !f.startsWith('hostile.'));

  it('has fixtures of every flagged step of both templates', () => {
    expect(templates.filter((f) => f.startsWith('cdc-v1.')).length).toBe(7);
    expect(templates.filter((f) => f.startsWith('cdc-v2.')).length).toBe(7);
    expect(templates.filter((f) => f.startsWith('jdbc-')).length).toBe(5);
  });

  it.each(templates)('%s passes', (name) => {
    expect(judge(fixture(name), name.startsWith('jdbc') ? 1 : 0)).toEqual([]);
  });

  it('reads the relations with their kind and identity', () => {
    const measure = parseAnalyzedPlan(fixture('cdc-v1.measure'));
    expect(measure.relations).toEqual([
      { kind: 'file-path', identity: [], format: 'parquet' },
      { kind: 'v2-table', identity: ['lake', 'acme_silver', 'orders__cdc_tombstones'] },
      { kind: 'v2-table', identity: ['lake', 'acme_silver', 'orders'] },
    ]);
    expect(measure.problems).toEqual([]);
    expect([...measure.functions]).toEqual(expect.arrayContaining(['count_if', 'row_number', 'windowspecdefinition', 'coalesce']));
    const delta = parseAnalyzedPlan(fixture('cdc-v2.measure'));
    expect(delta.relations).toContainEqual({ kind: 'file-table', identity: ['spark_catalog', 'acme_silver', 'orders_delta'], format: 'parquet' });
    expect(parseAnalyzedPlan(fixture('jdbc-v1.probe-source')).relations).toEqual([{ kind: 'jdbc', identity: [] }]);
  });

  it('refuses a JDBC relation the step did not declare', () => {
    expect(judge(fixture('jdbc-v1.probe-source'), 0)).toEqual(['a JDBC relation the step does not declare']);
  });
});

describe('hostile plans', () => {
  const other = (t: string) => `table ${t} is outside the tenant's namespaces`;
  const REGEX =
    'is not allowed: Spark runs it as a regular expression, which can backtrack for hours on the shared server (use startswith, endswith, contains, locate, replace or split_part)';
  it.each([
    ['exists', [other('lake.beta_silver.t')]],
    ['inTable', [other('lake.beta_silver.t')]],
    ['scalar', [other('lake.beta_silver.t')]],
    ['lateral', [other('lake.beta_silver.t')]],
    ['pipe', [other('lake.beta_silver.t')]],
    ['identifier', [other('lake.beta_silver.t')]],
    ['with', [other('lake.beta_silver.t')]],
    ['view', [other('lake.beta_silver.t')]],
    ['deltaTable', [other('spark_catalog.beta_silver.d')]],
    ['reflect', ['function reflect is not allowed']],
    ['javaMethod', ['function java_method is not allowed']],
    ['inputFile', ['function input_file_name is not allowed']],
    ['currentUser', ['function current_user is not allowed']],
    ['udfLambda', ['function transform is not allowed', 'function lambdafunction is not allowed']],
    ['truncated', ['the analysed plan cannot be verified: the plan text is truncated']],
    [
      // LIKE ALL, NOT LIKE ANY, LIKE … ESCAPE, regexp_count, REGEXP and like(…): regular expressions.
      'like',
      ['likeall', 'notlikeany', 'regexp_count', 'rlike'].map((f) => `function ${f} ${REGEX}`).concat(`LIKE ${REGEX}`),
    ],
  ])('%s is refused', (name, expected) => {
    expect(judge(fixture(`hostile.${name}`))).toEqual(expected);
  });

  it('refuses a literal that repeats a section header (it could end the analyzed section early)', () => {
    const v = judge(fixture('hostile.headers'));
    expect(v).toHaveLength(1);
    expect(v[0]).toMatch(/5 "== Optimized Logical Plan ==" headers/);
  });

  it('reports the subquery expressions it saw', () => {
    expect([...parseAnalyzedPlan(fixture('hostile.exists')).subqueries]).toEqual(['exists']);
    expect([...parseAnalyzedPlan(fixture('hostile.inTable')).subqueries]).toEqual(['list']);
    expect([...parseAnalyzedPlan(fixture('hostile.scalar')).subqueries]).toEqual(['scalar-subquery']);
    expect([...parseAnalyzedPlan(fixture('hostile.lateral')).subqueries]).toEqual(['lateral-subquery']);
  });

  it('leaves path-based relations to the file check: their text names no path', () => {
    for (const name of ['parquetOther', 'parquetPath', 'deltaPath']) {
      const plan = parseAnalyzedPlan(fixture(`hostile.${name}`));
      expect(plan.relations.map((r) => r.kind)).toEqual(['file-path']);
      expect(analysisViolations(plan, acme, { jdbcSources: 0 })).toEqual([]);
    }
  });

  it('lets the tenant’s own table, pure functions and row sources pass', () => {
    for (const name of ['own', 'values', 'onerow', 'range', 'tvfRange']) expect(judge(fixture(`hostile.${name}`)), name).toEqual([]);
  });
});

describe('the parser fails closed', () => {
  const plan = (analyzed: string) =>
    `== Parsed Logical Plan ==\nx\n\n== Analyzed Logical Plan ==\nid: int\n${analyzed}\n\n== Optimized Logical Plan ==\nx\n\n== Physical Plan ==\nx\n`;

  it('refuses unknown plan nodes and unreadable lines', () => {
    expect(judge(plan('Sample 0.0, 0.5, false, 42\n+- LocalRelation [a#1]'))).toEqual(['plan node Sample is not allowed']);
    // Generate is allowed (scd2-dim-load explodes its own arrays); a generator outside the list is not.
    expect(judge(plan('Generate json_tuple(a#1, x), false\n+- LocalRelation [a#1]'))).toEqual(['function json_tuple is not allowed']);
    expect(judge(plan('HiveTableRelation [`spark_catalog`.`beta`.`t`, x]'))).toEqual(['plan node HiveTableRelation is not allowed']);
    expect(judge(plan('Project [a#1]\n+- #weird'))).toEqual(['the analysed plan cannot be verified: unreadable plan line 2']);
    expect(judge(plan('RelationV2[a#1] lake.acme_silver.t extra'))[0]).toMatch(/unreadable RelationV2 relation/);
    expect(judge(plan('View (`v` x)\n+- LocalRelation [a#1]'))[0]).toMatch(/unreadable view/);
    expect(judge(plan('Relation [a#1] com.example.Source@1234'))[0]).toMatch(/a file relation of an unknown source/);
    expect(judge(plan('Relation [a#1] csv'))).toEqual(['reading format "csv" is not allowed']);
  });

  it('refuses an explain without its sections, or an empty analyzed plan', () => {
    expect(judge('== Physical Plan ==\nx')[0]).toMatch(/0 "== Parsed Logical Plan ==" headers/);
    expect(judge(plan(''))).toEqual(['the analysed plan cannot be verified: the analyzed plan is empty']);
  });

  it('reads functions spelled with a space before the parenthesis', () => {
    expect([...parseAnalyzedPlan(plan('Filter myudf (a#1)\n+- LocalRelation [a#1]')).functions]).toEqual(['myudf']);
  });

  it('reads every line: text a literal adds can add names, never hide the real nodes', () => {
    const injected = plan('Filter (a#1 = x\n+- RelationV2[a#2] lake.acme_silver.t\ny)\n+- RelationV2[a#1] lake.beta_silver.t');
    const v = judge(injected);
    expect(v).toContain("table lake.beta_silver.t is outside the tenant's namespaces");
  });

  it('reads quoted identities and compares namespaces case-insensitively', () => {
    expect(splitIdentity('`spark_catalog`.`acme_silver`.`a``b`')).toEqual(['spark_catalog', 'acme_silver', 'a`b']);
    expect(splitIdentity('spark_catalog.delta.`file:///x/y`')).toEqual(['spark_catalog', 'delta', 'file:///x/y']);
    expect(splitIdentity('a b')).toBeUndefined();
    expect(judge(plan('RelationV2[a#1] LAKE.ACME_SILVER.t'))).toEqual([]);
    expect(judge(plan('RelationV2[a#1] lake.acme_silver'))).toEqual(["table lake.acme_silver is outside the tenant's namespaces"]);
  });
});
