import { execFileSync } from 'node:child_process';
import { queryStep } from '../../../src/jobs/steps.js';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError, ExitCode } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { executePlan, stepRelations } from '../../../src/runner/executor.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { alias, fn } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import type { Rel } from '../../../src/spark/plan/relations.js';
import { type TenantReadPolicy, checkStepPolicy, tenantReadPolicy } from '../../../src/spark/policy/index.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, remote, runCli } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * The second wall on the real server: a tenant's plans that read another tenant's Iceberg, Delta or
 * parquet data (holding a canary string), call the JVM or disclose paths are refused (78) by the
 * tenant read policy, and the canary never appears in an error; the templates' own plans pass.
 */

const acme = freshTenant();
const victim = freshTenant();
const CANARY = `CANARY-${randomUUID()}`;
const platform = platformSchema.parse({
  catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
  tenants: { [acme.id]: { 'storage-roots': [acme.root] }, [victim.id]: { 'storage-roots': [victim.root] } },
});
const policy: TenantReadPolicy = tenantReadPolicy(platform, tenantContext(acme.id, acme.root));
const subject = { step: 'hostile', configPaths: ['source.where'] };
const durations: Record<string, number> = {};
let client: SparkConnectClient;
let dir: string;

const sql = (text: string) => client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
const bronzePath = `${acme.root}/bronze/orders_cdc`;
const bronze = () => Query.read('parquet', { paths: [bronzePath] });
const V = { iceberg: `lake.${victim.id}_silver.t`, delta: `spark_catalog.${victim.id}_silver.d`, files: `${victim.root}/bronze/p` };

beforeAll(async () => {
  client = connect();
  // The victim: an Iceberg table, a Delta table and parquet files, each holding the canary.
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${victim.id}_silver`);
  await sql(`CREATE TABLE ${V.iceberg} (id INT, name STRING) USING iceberg LOCATION '${victim.root}/silver/t'`);
  await sql(`INSERT INTO ${V.iceberg} VALUES (1, '${CANARY}')`);
  await sql(`CREATE NAMESPACE IF NOT EXISTS spark_catalog.${victim.id}_silver`);
  await sql(`CREATE TABLE ${V.delta} (id INT, name STRING) USING delta LOCATION '${victim.root}/silver/d'`);
  await sql(`INSERT INTO ${V.delta} VALUES (1, '${CANARY}')`);
  await client.execute(
    compileCommandPlan(testQuery(`SELECT 1 AS id, '${CANARY}' AS name`).writeFiles(V.files, 'parquet', { mode: 'overwrite' }), { reveal: true }),
  );
  await client.execute(compileCommandPlan(Query.table(V.iceberg.split('.')).createView('victim_view'), { reveal: true }));
  // The attacker: its own bronze CDC events and an Iceberg table.
  const events = testQuery(
    `SELECT id, name, CAST(ts AS TIMESTAMP) AS ts, op, '${acme.id}' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'2026-07-05' AS _snapshot_date
     FROM VALUES (1, 'one', '2026-07-05 08:00:00', 'c'), (2, 'two', '2026-07-05 09:00:00', 'd') AS t(id, name, ts, op)`,
  );
  await client.execute(compileCommandPlan(events.writeFiles(bronzePath, 'parquet', { mode: 'overwrite', partitionBy: ['_snapshot_date'] }), { reveal: true }));
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${acme.id}_silver`);
  await sql(`CREATE TABLE lake.${acme.id}_silver.o (id INT, name STRING) USING iceberg LOCATION '${acme.root}/silver/o'`);
  // An application database for jdbc-snapshot-ingest (SQLite, opened by the server).
  dir = tempFiles({});
  execFileSync('python3', [
    '-c',
    `import sqlite3; c = sqlite3.connect('${dir}/shop.db'); c.execute("CREATE TABLE orders (id INTEGER, customer TEXT, amount DECIMAL(12,2))"); c.execute("INSERT INTO orders VALUES (1, 'alice', 10.5)"); c.commit()`,
  ]);
});

afterAll(() => {
  // The overhead of one check (AnalyzePlan extended explain, plus InputFiles for file relations).
  console.log(`tenant read policy, ms per check: ${JSON.stringify(durations)}`);
  client?.close();
});

async function refused(name: string, rel: Rel, p: TenantReadPolicy = policy): Promise<ConfigError> {
  const started = performance.now();
  const e = await checkStepPolicy(client, [rel], p, subject).then(
    () => undefined,
    (x: unknown) => x,
  );
  durations[name] = Math.round(performance.now() - started);
  expect(e, name).toBeInstanceOf(ConfigError);
  const error = e as ConfigError;
  expect(error.exitCode).toBe(ExitCode.config);
  expect(error.issues[0]?.path).toBe('source.where');
  expect(error.message).not.toContain(CANARY);
  expect(JSON.stringify(error.report())).not.toContain(CANARY);
  return error;
}

/**
 * SQL over the tenant's own table: hostile text that the expression grammar would refuse at
 * validate, sent anyway, to prove the second wall holds on its own.
 */
const ownSql = (select: string, where?: string) => testQuery(`SELECT ${select} FROM lake.${acme.id}_silver.o${where ? ` WHERE ${where}` : ''}`);

describe('plans reading another tenant’s data are refused, without the canary', () => {
  const outside = (t: string) => `table ${t} is outside the tenant's namespaces`;

  it.each([
    ['EXISTS (TABLE …)', () => testQuery(`SELECT * FROM lake.${acme.id}_silver.o WHERE EXISTS (TABLE ${V.iceberg})`), outside(V.iceberg)],
    ['IN (TABLE …)', () => ownSql('*', `(id, name) IN (TABLE ${V.iceberg})`), outside(V.iceberg)],
    ['a scalar subquery', () => ownSql('*', `name = (SELECT max(name) FROM ${V.iceberg})`), outside(V.iceberg)],
    ['pipe syntax', () => testQuery(`FROM ${V.iceberg} |> WHERE id = 1 |> SELECT name`), outside(V.iceberg)],
    [
      'LATERAL',
      () => testQuery(`SELECT * FROM lake.${acme.id}_silver.o, LATERAL (SELECT name AS n FROM ${V.iceberg} v WHERE v.id = o.id)`),
      outside(V.iceberg),
    ],
    ['a CTE', () => testQuery(`WITH x AS (SELECT * FROM ${V.iceberg}) SELECT * FROM x`), outside(V.iceberg)],
    ['IDENTIFIER(…)', () => testQuery(`SELECT * FROM IDENTIFIER('${V.iceberg}')`), outside(V.iceberg)],
    ['a view over the other tenant’s table', () => testQuery('SELECT * FROM victim_view'), outside(V.iceberg)],
    ['the other tenant’s Delta table', () => Query.table(V.delta.split('.')), outside(V.delta)],
    ['reflect', () => ownSql('*', `reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL`), 'function reflect is not allowed'],
    ['java_method', () => ownSql(`java_method('java.lang.System', 'getProperty', 'user.home') AS h`), 'function java_method is not allowed'],
    ['input_file_name()', () => bronze().select(alias(fn('input_file_name'), 'f')), 'function input_file_name is not allowed'],
    ['LIKE (a regular expression on the server)', () => ownSql('*', `name LIKE '%a%a%b'`), 'LIKE is not allowed: Spark runs it as a regular expression'],
    ['RLIKE', () => ownSql('*', `name RLIKE '(a+)+b'`), 'function rlike is not allowed: Spark runs it as a regular expression'],
    ['regexp_replace', () => ownSql(`regexp_replace(name, '(a|a)*b', '') AS r`), 'function regexp_replace is not allowed'],
    [
      // Constant folding would run this match inside the check, for hours: the check leaves it out.
      'a literal regular expression that backtracks, judged without being run',
      () => ownSql(`repeat('a', 40) LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%b' AS m, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' RLIKE '(a+)+b' AS r`),
      'LIKE is not allowed',
    ],
    [
      'a call past the 25th field, where Spark would cut the plan text short',
      () => ownSql([...Array.from({ length: 40 }, (_, i) => `abs(${i}) AS c${i}`), `reflect('java.lang.System', 'getenv', 'HOME') AS h`].join(', ')),
      'function reflect is not allowed',
    ],
    ['a literal repeating a section header', () => ownSql('*', `name = 'a\n== Optimized Logical Plan ==\nb' OR id > 0`), 'headers'],
    ['a source path of the other tenant', () => Query.read('parquet', { paths: [V.files] }), `path ${V.files} is outside the tenant's storage roots`],
    ['a source path climbing out', () => Query.read('parquet', { paths: [`${acme.root}/../${basename(victim.root)}/bronze/p`] }), 'is outside the tenant'],
    ['a source path with glob characters', () => Query.read('parquet', { paths: [`${acme.root}/../*/bronze/p`] }), 'contains glob characters'],
    ['parquet.`path` in SQL', () => testQuery(`SELECT * FROM parquet.\`${V.files}\``), "file(s) outside the tenant's storage roots"],
    ['a glob in SQL', () => testQuery(`SELECT * FROM parquet.\`${victim.root}/bronze/*\``), "file(s) outside the tenant's storage roots"],
    ['delta.`path`', () => testQuery(`SELECT * FROM delta.\`${victim.root}/silver/d\``), "file(s) outside the tenant's storage roots"],
    [
      'read_files(…)',
      () => testQuery(`SELECT * FROM read_files('${V.files}', format => 'parquet')`),
      'the plan does not analyse (UNRESOLVABLE_TABLE_VALUED_FUNCTION)',
    ],
    ['a column list mismatch quoting the other table', () => ownSql('*', `id IN (TABLE ${V.iceberg})`), 'the plan does not analyse (DATATYPE_MISMATCH'],
  ])('%s', async (name, rel, expected) => {
    const e = await refused(name, rel().rel);
    expect(e.message).toContain(expected);
  });

  it('a namespace the platform grants is readable, read-only grants are per tenant', async () => {
    const granting = platformSchema.parse({
      ...platform,
      tenants: { [acme.id]: { 'storage-roots': [acme.root], 'read-namespaces': [`lake.${victim.id}_silver`, `spark_catalog.${victim.id}_silver`] } },
    });
    const granted = tenantReadPolicy(granting, tenantContext(acme.id, acme.root));
    const rel = testQuery(`SELECT * FROM lake.${acme.id}_silver.o WHERE EXISTS (TABLE ${V.iceberg})`).rel;
    await checkStepPolicy(client, [rel], granted, subject);
    // A grant names a namespace, not files: a Delta table there also needs its root in read-roots.
    const e = await refused('a granted Delta namespace without its root', Query.table(V.delta.split('.')).rel, granted);
    expect(e.message).toContain("file(s) outside the tenant's storage roots");
    const withRoot = tenantReadPolicy(
      platformSchema.parse({ ...granting, tenants: { [acme.id]: { ...granting.tenants![acme.id]!, 'read-roots': [`${victim.root}/silver`] } } }),
      tenantContext(acme.id, acme.root),
    );
    await checkStepPolicy(client, [Query.table(V.delta.split('.')).rel], withRoot, subject);
  });

  it('nothing runs while the plan is checked: EXECUTE IMMEDIATE and SQL scripts are refused before they are sent', async () => {
    await refused('EXECUTE IMMEDIATE', testQuery(`EXECUTE IMMEDIATE 'DROP TABLE ${V.iceberg}'`).rel);
    await refused('a SQL script', testQuery(`BEGIN SELECT * FROM ${V.iceberg}; END`).rel);
    const rows = await client.execute(compileRelationPlan(Query.table(V.iceberg.split('.')).rel, { reveal: true }));
    expect(rows.table?.numRows).toBe(1);
    // And the session the step then runs in has scripting off.
    expect(await client.config.get(['spark.sql.scripting.enabled'])).toEqual({ 'spark.sql.scripting.enabled': 'false' });
  });

  it('the executor runs nothing of a refused step', async () => {
    const before = client.stats.operations;
    const e = await executePlan(
      {
        steps: [
          queryStep({
            id: 'probe',
            title: 'probe',
            query: testQuery(`SELECT name FROM ${V.iceberg}`),
            columns: ['name'],
            interpret: () => ({}),
            untrusted: ['source.where'],
          }),
        ],
      },
      { session: client, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal, policy },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).not.toContain(CANARY);
    expect(client.stats.operations).toBe(before);
  });
});

describe('the templates’ own plans pass', () => {
  const examples = fileURLToPath(new URL('../../../configs/examples/', import.meta.url));
  /** An example config, moved to the fresh tenant (its id, storage root and application database). */
  async function example(file: string, set: string[]) {
    let text = readFileSync(join(examples, file), 'utf8')
      .replace(/^tenant .*$/m, `tenant { id = "${acme.id}", storage-root = "${acme.root}" }`)
      .replace(/url\s*=\s*"jdbc:sqlite:"[^\n]*/, `url = "jdbc:sqlite:${dir}/shop.db"`);
    // This tenant's CDC bronze is parquet files (written above), not the v2 example's Iceberg table.
    if (file.startsWith('cdc-silver-merge')) text = text.replace(/^source \{[^\n]*\}[ \t]*$|^source \{[\s\S]*?^\}/m, 'source { table = "orders_cdc" }');
    const files = tempFiles({ 'job.conf': text });
    return loadJob({ configFile: join(files, 'job.conf'), overrides: set, env: {}, runId: 'it-policy' });
  }

  it.each([
    // cdc-silver-merge resolves the batch once, in check-batch: the only step that carries config
    // logic; every later step reads the rows it kept on the server.
    ['cdc-silver-merge.v1.conf', [`source.where="_snapshot_date = '2026-07-05'"`], ['check-batch']],
    ['cdc-silver-merge.v2.conf', [`source.where="_snapshot_date = '2026-07-05'"`], ['check-batch']],
    ['jdbc-snapshot-ingest.v1.conf', ['source.table=orders', `source.where="amount > 1 AND lower(customer) LIKE 'a%'"`], ['probe-source', 'write-snapshot']],
    ['jdbc-snapshot-ingest.v2.conf', ['source.table=orders', `source.where="amount > 1"`], ['probe-source', 'create-table', 'write-snapshot']],
  ])('%s', async (file, set, steps) => {
    const loaded = await example(file, set);
    const flagged = loaded.plan.steps.filter((s) => s.untrusted && steps.includes(s.id));
    expect(flagged.map((s) => s.id)).toEqual(steps);
    const p = tenantReadPolicy(platform, loaded.tenant);
    for (const step of flagged) {
      const report = await checkStepPolicy(client, stepRelations(step, { step: step.id, configPaths: step.untrusted! }), p, {
        step: step.id,
        configPaths: step.untrusted!,
      });
      durations[`${file} ${step.id}`] = report.durationMs;
    }
  });

  it('a whole cdc-silver-merge v2 run (Delta, delete-when, source.where) passes every check and merges', async () => {
    const text = readFileSync(join(examples, 'cdc-silver-merge.v2.conf'), 'utf8')
      .replace(/^tenant .*$/m, `tenant { id = "${acme.id}", storage-root = "${acme.root}" }`)
      // This tenant's bronze is parquet files (written above), not the example's Iceberg table.
      .replace(/^source \{[\s\S]*?^\}/m, 'source { table = "orders_cdc" }')
      .replace(/columns \{[^}]*\}/, 'columns { exclude = ["op"] }');
    const files = tempFiles({
      'job.conf': text,
      'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${acme.id} { storage-roots = ["${acme.root}"] } }`,
    });
    const status = join(files, 'status.json');
    const r = await runCli([
      '--config',
      join(files, 'job.conf'),
      '--env',
      join(files, 'platform.conf'),
      '--remote',
      remote(),
      '--set',
      `source.where="_snapshot_date = DATE'2026-07-05'"`,
      '--status-file',
      status,
    ]);
    const doc = JSON.parse(readFileSync(status, 'utf8'));
    expect(doc.error).toBeUndefined();
    expect(r.code).toBe(0);
    expect(doc.outputs[0].metrics).toMatchObject({ inserted: 1, deleted: 0 });
    const checks = r.stderr.split('\n').filter((l) => l.includes('tenant read policy: allowed'));
    // Only check-batch carries config logic (source.where, cdc.delete-when): it resolves the batch
    // and keeps it on the server, so one step is checked and the server analyses its config-carrying
    // part once; every later step reads the kept rows.
    expect(checks.map((l) => JSON.parse(l).step)).toEqual(['check-batch']);
    const analysed = checks.map((l) => Number(JSON.parse(l).policy.relations)).reduce((a, b) => a + b, 0);
    expect(analysed).toBeGreaterThanOrEqual(1);
    expect(analysed).toBeLessThanOrEqual(2);
    for (const l of checks) durations[`cli ${JSON.parse(l).step}`] = JSON.parse(l).policy.durationMs;
  });
});
