import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { platformSchema } from '../../../../src/core/config/platform.js';
import { ConfigError, ExitCode, InternalError } from '../../../../src/core/errors.js';
import { tenantContext } from '../../../../src/core/tenant.js';
import { SparkError } from '../../../../src/spark/errors.js';
import { col, eq, fn, lit } from '../../../../src/spark/plan/expressions.js';
import { Query } from '../../../../src/spark/plan/query.js';
import {
  CHECK_EXCLUDED_RULES,
  EXCLUDED_RULES_KEY,
  POLICY_SESSION_CONF,
  type PolicySession,
  type TenantReadPolicy,
  checkStepPolicy,
  commandInputs,
  fileViolations,
  normaliseFileUri,
  relTreeViolations,
  tenantReadPolicy,
} from '../../../../src/spark/policy/index.js';
import { testQuery, testCommand } from '../../../support/sql.js';

const dir = fileURLToPath(new URL('./fixtures/', import.meta.url));
const fixture = (name: string) => readFileSync(`${dir}${name}.explain.txt`, 'utf8');

const acme: TenantReadPolicy = {
  tenant: 'acme',
  namespaces: ['lake.acme_bronze', 'lake.acme_silver', 'lake.acme_gold'],
  roots: ['file:///lake/acme'],
};
const subject = { step: 'check-batch', configPaths: ['source.where'] };

/** A session answering AnalyzePlan with a captured explain and a list of input files. */
function fakeSession(explain: string | Error, files: string[] | Error = []) {
  const calls = { explain: 0, inputFiles: 0, conf: [] as Record<string, string>[], unset: [] as string[], state: {} as Record<string, string> };
  const session: PolicySession = {
    analyze: {
      explain: async () => {
        calls.explain++;
        if (explain instanceof Error) throw explain;
        return explain;
      },
      inputFiles: async () => {
        calls.inputFiles++;
        if (files instanceof Error) throw files;
        return files;
      },
    },
    config: {
      set: async (pairs) => {
        calls.conf.push({ ...pairs });
        Object.assign(calls.state, pairs);
      },
      getOption: async (keys) => Object.fromEntries(keys.map((k) => [k, calls.state[k]])),
      unset: async (keys) => {
        calls.unset.push(...keys);
        for (const k of keys) delete calls.state[k];
      },
    },
  };
  return { session, calls };
}

const bronze = Query.read('parquet', { paths: ['file:///lake/acme/bronze/orders_cdc'] });

async function refusal(p: Promise<unknown>): Promise<ConfigError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ConfigError);
  expect((e as ConfigError).exitCode).toBe(ExitCode.config);
  return e as ConfigError;
}

describe('checkStepPolicy', () => {
  it('passes a template plan, after setting the untruncated plan strings, and checks its files', async () => {
    const { session, calls } = fakeSession(fixture('cdc-v1.check-batch'), ['file:/lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05/part-0.parquet']);
    const report = await checkStepPolicy(session, [bronze.filter(eq(col('_snapshot_date'), lit({ date: '2026-07-05' }))).rel], acme, subject);
    expect(report.relations).toBe(1);
    const excluded = CHECK_EXCLUDED_RULES.join(',');
    expect(calls).toMatchObject({ explain: 1, inputFiles: 1, conf: [{ ...POLICY_SESSION_CONF, [EXCLUDED_RULES_KEY]: excluded }], unset: [EXCLUDED_RULES_KEY] });
  });

  it("leaves out the optimizer rules that evaluate expressions only while it checks, keeping the platform's own", async () => {
    const { session, calls } = fakeSession(fixture('hostile.own'));
    calls.state[EXCLUDED_RULES_KEY] = 'org.example.Rule';
    await checkStepPolicy(session, [Query.table(['lake', 'acme_silver', 'o']).rel], acme, subject);
    expect(calls.conf[0]![EXCLUDED_RULES_KEY]).toBe(['org.example.Rule', ...CHECK_EXCLUDED_RULES].join(','));
    expect(calls.state[EXCLUDED_RULES_KEY]).toBe('org.example.Rule');
    // Also after a refusal, the run's own queries are optimized as before.
    const refused = fakeSession(fixture('hostile.reflect'));
    await refusal(checkStepPolicy(refused.session, [bronze.rel], acme, subject));
    expect(refused.calls.unset).toEqual([EXCLUDED_RULES_KEY]);
    expect(refused.calls.state[EXCLUDED_RULES_KEY]).toBeUndefined();
  });

  it('judges input files only when the analysed plan has file relations', async () => {
    const { session, calls } = fakeSession(fixture('hostile.own'), ['file:///lake/beta/not-judged.parquet']);
    await checkStepPolicy(session, [Query.table(['lake', 'acme_silver', 'o']).rel], acme, subject);
    expect(calls).toMatchObject({ explain: 1, inputFiles: 1 });
  });

  it('asks a JDBC plan for no input files (that would only reconnect to the database)', async () => {
    const { session, calls } = fakeSession(fixture('jdbc-v1.probe-source'));
    const jdbc = Query.read('jdbc', { options: { url: 'jdbc:sqlite:shop.db', dbtable: 'orders_cdc' } }).filter(
      fn('startswith', fn('lower', col('customer')), lit('a')),
    );
    await checkStepPolicy(session, [jdbc.rel], acme, subject);
    expect(calls).toMatchObject({ explain: 1, inputFiles: 0 });
  });

  it('refuses with 78, naming the config path, the step and the offending table or function', async () => {
    const e = await refusal(checkStepPolicy(fakeSession(fixture('hostile.exists')).session, [bronze.rel], acme, subject));
    expect(e.issues).toEqual([
      { path: 'source.where', message: "refused by the tenant read policy (step check-batch): table lake.beta_silver.t is outside the tenant's namespaces" },
    ]);
    expect(e.report()).toMatchObject({ code: 'CONFIG_INVALID', path: 'source.where' });
    const r = await refusal(
      checkStepPolicy(fakeSession(fixture('hostile.reflect')).session, [bronze.rel], acme, { step: 'merge', configPaths: ['source.where', 'cdc.delete-when'] }),
    );
    expect(r.message).toBe('source.where, cdc.delete-when: refused by the tenant read policy (step merge): function reflect is not allowed');
  });

  it('refuses files outside the roots (file:/x and file:///x are one path), naming none of them', async () => {
    const files = ['file:/lake/beta/silver/d/part-0001.parquet', 'file:/lake/acme/bronze/x/part-0.parquet'];
    const e = await refusal(checkStepPolicy(fakeSession(fixture('hostile.deltaPath'), files).session, [testQuery('SELECT 1').rel], acme, subject));
    expect(e.issues.map((i) => i.message)).toEqual([
      "refused by the tenant read policy (step check-batch): reads 1 file(s) outside the tenant's storage roots",
    ]);
    expect(e.message).not.toContain('beta');
  });

  it('refuses sources outside the roots or with glob characters before anything is sent', async () => {
    const { session, calls } = fakeSession(fixture('hostile.own'));
    for (const path of ['file:///lake/beta/silver/d', 'file:///lake/acme/../beta', 'file:///lake/acme/*', 'file:///lake/acme/{a,b}', 'file:///lake/acme2']) {
      await refusal(checkStepPolicy(session, [Query.read('parquet', { paths: [path] }).rel], acme, subject));
    }
    await refusal(checkStepPolicy(session, [Query.read('parquet', { options: { path: 'file:///lake/beta' } }).rel], acme, subject));
    await refusal(checkStepPolicy(session, [Query.read('csv', { paths: ['file:///lake/acme/x'] }).rel], acme, subject));
    await refusal(checkStepPolicy(session, [Query.table(['lake', 'beta_silver', 't']).join(bronze, ['id']).rel], acme, subject));
    expect(calls).toMatchObject({ explain: 0, inputFiles: 0, conf: [] });
  });

  it('sends only SQL that is a query: EXECUTE IMMEDIATE and scripts would run while analysed', async () => {
    const { session, calls } = fakeSession(fixture('hostile.own'));
    for (const text of [
      "EXECUTE IMMEDIATE 'DROP TABLE lake.beta_silver.t'",
      'BEGIN SELECT * FROM lake.beta_silver.t; END',
      "/* SELECT */ EXECUTE IMMEDIATE 'x'",
      "-- SELECT\nEXECUTE IMMEDIATE 'x'",
      'DROP TABLE lake.acme_silver.o',
      "DECLARE VARIABLE v STRING DEFAULT 'x'",
      'SELECTx',
    ]) {
      const e = await refusal(checkStepPolicy(session, [testQuery(text).rel], acme, subject));
      expect(e.message, text).toContain('SQL text must be a query');
    }
    expect(calls.explain).toBe(0);
    for (const text of [
      'SELECT 1',
      ' with x AS (SELECT 1) SELECT * FROM x',
      'FROM lake.acme_silver.o |> SELECT id',
      'VALUES (1)',
      'TABLE lake.acme_silver.o',
      '(SELECT 1)',
    ])
      await checkStepPolicy(session, [testQuery(text).rel], acme, subject);
    expect(calls.conf[0]).toMatchObject({ 'spark.sql.scripting.enabled': 'false' });
  });

  it('refuses a plan that does not analyse with Spark’s error class only (its message may quote other tenants’ columns)', async () => {
    const failure = new SparkError({
      grpcCode: 3,
      errorClass: 'DATATYPE_MISMATCH.IN_SUBQUERY_LENGTH_MISMATCH',
      message: 'right hand side columns(length: 2): ["id", "secret_column"]',
      messageParameters: {},
      classes: [],
      causes: [],
    });
    const e = await refusal(checkStepPolicy(fakeSession(failure).session, [bronze.rel], acme, subject));
    expect(e.message).toContain('the plan does not analyse (DATATYPE_MISMATCH.IN_SUBQUERY_LENGTH_MISMATCH)');
    expect(e.message).not.toContain('secret_column');
    const unresolved = new SparkError({
      grpcCode: 3,
      errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION',
      message: 'did you mean secret_column',
      messageParameters: {},
      classes: [],
      causes: [],
    });
    expect((await refusal(checkStepPolicy(fakeSession(unresolved).session, [bronze.rel], acme, subject))).message).not.toContain('secret_column');
  });

  it('keeps missing inputs and an unreachable server as they are', async () => {
    const missing = new SparkError({
      grpcCode: 3,
      errorClass: 'PATH_NOT_FOUND',
      message: 'Path does not exist',
      messageParameters: {},
      classes: [],
      causes: [],
    });
    await expect(checkStepPolicy(fakeSession(missing).session, [bronze.rel], acme, subject)).rejects.toMatchObject({ exitCode: ExitCode.inputMissing });
    const down = new SparkError({ grpcCode: 14, message: 'connection refused', messageParameters: {}, classes: [], causes: [] });
    await expect(checkStepPolicy(fakeSession(down).session, [bronze.rel], acme, subject)).rejects.toMatchObject({ exitCode: ExitCode.unavailable });
  });
});

describe('the policy check never passes on Spark’s message (it prints the plan analysed so far)', () => {
  // What our server answered (Spark 4.1) for a transform whose first wall let a STREAM read of
  // another tenant's table through, joined with a missing table of the tenant's own: the missing
  // input's message carried the partly analysed plan, the other tenant's columns included.
  const leak =
    "[TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`acme_silver`.`no_such_table` cannot be found. SQLSTATE: 42P01; line 1 pos 83;\n'Project [*]\n+- 'Join Inner, true\n   :- ~StreamingRelationV2 lake.beta_silver.c, [], [secret_id#961L, secret_amount#962]\n   +- 'UnresolvedRelation [lake, acme_silver, no_such_table], [], false\n";
  const failures: [string, SparkError, ExitCode][] = [
    [
      'a missing table',
      new SparkError({
        grpcCode: 3,
        errorClass: 'TABLE_OR_VIEW_NOT_FOUND',
        sqlState: '42P01',
        message: leak,
        messageParameters: { relationName: '`lake`.`acme_silver`.`no_such_table`' },
        classes: [],
        causes: [leak],
      }),
      ExitCode.inputMissing,
    ],
    [
      'a denied permission',
      new SparkError({
        grpcCode: 7,
        message: 'Permission denied: access=READ, inode="/lake/beta/silver/secret_table"',
        messageParameters: {},
        classes: ['org.apache.hadoop.security.AccessControlException'],
        causes: [],
      }),
      ExitCode.permission,
    ],
    [
      'a timeout',
      new SparkError({ grpcCode: 4, message: 'deadline while resolving lake.beta_silver.secret_table', messageParameters: {}, classes: [], causes: [] }),
      ExitCode.transient,
    ],
  ];
  for (const [what, failure, exitCode] of failures)
    it(`${what}: its exit code and class, our own message, nothing of Spark's text`, async () => {
      const e = (await checkStepPolicy(fakeSession(failure).session, [bronze.rel], acme, subject).then(
        () => undefined,
        (x: unknown) => x,
      )) as { exitCode: number; message: string; report(): Record<string, unknown>; cause?: unknown };
      expect(e.exitCode).toBe(exitCode);
      const shown = JSON.stringify({ message: e.message, report: e.report(), cause: e.cause, own: { ...e } });
      for (const secret of ['secret_id', 'secret_amount', 'beta', 'StreamingRelationV2', 'secret_table']) expect(shown, what).not.toContain(secret);
      expect(e.message).toContain('step check-batch');
      expect(e.report()).toMatchObject({ retryable: failure.retryable, ...(failure.errorClass ? { sparkErrorClass: failure.errorClass } : {}) });
    });

  it('names the missing table as the tenant wrote it', async () => {
    const e = (await checkStepPolicy(fakeSession(failures[0]![1]).session, [bronze.rel], acme, subject).catch((x: unknown) => x)) as Error;
    expect(e.message).toContain('`lake`.`acme_silver`.`no_such_table`');
  });
});

describe('commandInputs', () => {
  it('analyses the input of writes and the source of a MERGE', () => {
    expect(commandInputs(bronze.writeFiles('file:///lake/acme/bronze/t', 'parquet', { mode: 'overwrite' }), subject)).toEqual([bronze.rel]);
    expect(commandInputs(bronze.writeTo(['lake', 'acme_bronze', 't'], 'append'), subject)).toEqual([bronze.rel]);
    expect(
      commandInputs(bronze.mergeInto(['lake', 'acme_silver', 't'], eq(col('t', 'id'), col('s', 'id')), { whenNotMatched: [{ action: 'insertAll' }] }), subject),
    ).toEqual([bronze.rel]);
  });

  it('refuses (as a template bug) a SQL statement, which it cannot see into', () => {
    expect(() => commandInputs(testCommand('DELETE FROM t'), subject)).toThrow(InternalError);
  });
});

describe('paths', () => {
  it('normalises Hadoop’s file:/x to file:///x', () => {
    expect(normaliseFileUri('file:/lake/acme/x')).toBe('file:///lake/acme/x');
    expect(normaliseFileUri('file:///lake/acme/x')).toBe('file:///lake/acme/x');
    expect(normaliseFileUri('s3a://bucket/acme/x')).toBe('s3a://bucket/acme/x');
  });

  it('accepts files under the roots only', () => {
    expect(fileViolations(['file:/lake/acme/a', 's3a://lake/acme/b'], { ...acme, roots: ['file:///lake/acme', 's3a://lake/acme'] })).toEqual([]);
    expect(fileViolations(['file:/lake/acme2/a'], acme)).toHaveLength(1);
    expect(relTreeViolations(bronze.rel, acme)).toEqual([]);
  });
});

describe('tenantReadPolicy', () => {
  const platform = platformSchema.parse({
    catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
    tenants: {
      acme: { 'storage-roots': ['file:///lake/acme', 's3a://archive/acme'], 'read-namespaces': ['lake.shared_ref'], 'read-roots': ['s3a://shared/ref'] },
      beta: { 'storage-roots': ['file:///lake/beta'] },
    },
  });

  it('is the tenant’s layers in every catalog, its roots and the platform’s grants', () => {
    expect(tenantReadPolicy(platform, tenantContext('acme', 'file:///lake/acme'))).toEqual({
      tenant: 'acme',
      namespaces: [
        'lake.acme_bronze',
        'lake.acme_silver',
        'lake.acme_gold',
        'spark_catalog.acme_bronze',
        'spark_catalog.acme_silver',
        'spark_catalog.acme_gold',
        'lake.shared_ref',
      ],
      roots: ['file:///lake/acme', 's3a://archive/acme', 's3a://shared/ref'],
    });
    expect(tenantReadPolicy(platform, tenantContext('beta', 'file:///lake/beta')).namespaces).not.toContain('lake.shared_ref');
  });

  it('without tenants in the platform config, the roots are the job’s storage root', () => {
    const local = platformSchema.parse({ catalogs: { lake: { format: 'iceberg' } } });
    expect(tenantReadPolicy(local, tenantContext('acme', 'file:///lake/acme/'))).toMatchObject({
      namespaces: ['lake.acme_bronze', 'lake.acme_silver', 'lake.acme_gold'],
      roots: ['file:///lake/acme'],
    });
  });

  it('refuses grants that are not catalog.namespace or not storage URIs', () => {
    const bad = platformSchema.safeParse({
      tenants: { acme: { 'storage-roots': ['file:///lake/acme'], 'read-namespaces': ['shared_ref', 'lake.shared.ref'], 'read-roots': ['/shared'] } },
    });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join('.'))).toEqual([
      'tenants.acme.read-namespaces.0',
      'tenants.acme.read-namespaces.1',
      'tenants.acme.read-roots.0',
    ]);
  });
});
