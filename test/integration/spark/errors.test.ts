// Server errors as the runner sees them: SparkErrors with Spark's error class, SQL state and the
// exit code of docs/contracts.md.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../../src/core/errors.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { SparkError } from '../../../src/spark/errors.js';
import { connect, sql } from './support.js';
import { needs } from '../../support/needs.js';

needs('spark');

let client: SparkConnectClient;
beforeAll(() => {
  client = connect();
});
afterAll(async () => {
  await client.releaseSession();
  client.close();
});

async function failure(query: string): Promise<SparkError> {
  const e = await client.execute(sql(query)).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(SparkError);
  return e as SparkError;
}

describe('error mapping', () => {
  it('a missing table is missing input (66)', async () => {
    const e = await failure('SELECT * FROM lakehouse_it_no_such_table');
    expect(e).toMatchObject({ exitCode: ExitCode.inputMissing, code: 'INPUT_MISSING', errorClass: 'TABLE_OR_VIEW_NOT_FOUND', sqlState: '42P01' });
    expect(e.messageParameters.relationName).toBe('`lakehouse_it_no_such_table`');
    expect(e.report()).toMatchObject({ sparkErrorClass: 'TABLE_OR_VIEW_NOT_FOUND', sqlState: '42P01', retryable: false });
  });

  it('the same from AnalyzePlan', async () => {
    const e = await client.analyze.schema(sql('SELECT * FROM lakehouse_it_no_such_table')).catch((x: unknown) => x);
    expect(e).toMatchObject({ exitCode: ExitCode.inputMissing, errorClass: 'TABLE_OR_VIEW_NOT_FOUND' });
  });

  it('SQL that does not parse is a config error (78)', async () => {
    const e = await failure('SELEC 1');
    expect(e).toMatchObject({ exitCode: ExitCode.config, code: 'SPARK_PARSE_ERROR', errorClass: 'PARSE_SYNTAX_ERROR', sqlState: '42601' });
  });

  it('division by zero under ANSI is a data error (65)', async () => {
    await client.config.set({ 'spark.sql.ansi.enabled': 'true' });
    const e = await failure('SELECT id / (id - id) FROM range(1, 3)');
    expect(e).toMatchObject({ exitCode: ExitCode.data, code: 'DATA_INVALID', errorClass: 'DIVIDE_BY_ZERO', sqlState: '22012' });
  });

  it('a bad cast is a data error (65)', async () => {
    const e = await failure("SELECT CAST('twelve' AS INT)");
    expect(e).toMatchObject({ exitCode: ExitCode.data, errorClass: 'CAST_INVALID_INPUT' });
  });

  it('a column the source lacks breaks the schema contract (65)', async () => {
    const e = await failure('SELECT no_such_column FROM range(1)');
    expect(e).toMatchObject({ exitCode: ExitCode.data, code: 'SOURCE_SCHEMA_CONTRACT' });
    expect(e.errorClass).toMatch(/^UNRESOLVED_COLUMN\./);
  });

  it('anything else is internal (70) and keeps the Java classes', async () => {
    const e = await failure("SELECT raise_error('plain failure')");
    expect(e).toMatchObject({ exitCode: ExitCode.internal, errorClass: 'USER_RAISED_EXCEPTION' });
    expect(e.classes[0]).toMatch(/^org\.apache\.spark\./);
  });

  it('an Iceberg REST catalog that does not answer is unavailable (69, retryable), as ping says it, not internal', async () => {
    // A catalog of this session only, at a port nothing listens on: what a catalog outage looks like.
    const catalog = `lakehouse_it_dead_rest_${Date.now()}`;
    await client.config.set({
      [`spark.sql.catalog.${catalog}`]: 'org.apache.iceberg.spark.SparkCatalog',
      [`spark.sql.catalog.${catalog}.type`]: 'rest',
      [`spark.sql.catalog.${catalog}.uri`]: 'http://127.0.0.1:9/',
    });
    const e = await failure(`SELECT * FROM ${catalog}.some_namespace.some_table`);
    expect(e).toMatchObject({ exitCode: ExitCode.unavailable, code: 'CATALOG_UNAVAILABLE', retryable: true });
    expect(e.message).toMatch(/could not reach its Iceberg REST catalog: .*Connection refused/);
    expect(e.hint).toContain('ping');
  });

  it('a long message truncated in the gRPC status comes back whole from FetchErrorDetails', async () => {
    const long = 'lakehouse-'.repeat(800);
    const e = await failure(`SELECT raise_error('${long}')`);
    expect(e.errorId).toBeDefined();
    // The status itself carries an abbreviated message …
    const status = (e.cause as { details: string }).details;
    expect(status.length).toBeLessThan(long.length);
    // … the error carries the full one.
    expect(e.serverMessage).toContain(long);
    expect(e.message).toContain(long);
  });
});
