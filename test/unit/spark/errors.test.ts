import { create, toBinary } from '@bufbuild/protobuf';
import { anyPack, DurationSchema } from '@bufbuild/protobuf/wkt';
import { Metadata, status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../../src/core/errors.js';
import { Secret } from '../../../src/core/secrets.js';
import {
  SparkError,
  structFieldsOf,
  errorRules,
  failureFromGrpc,
  isRetryableGrpcError,
  ruleFor,
  withErrorDetails,
  type SparkFailure,
} from '../../../src/spark/errors.js';
import { ErrorInfoSchema, RetryInfoSchema, StatusSchema } from '../../../src/spark/proto/gen/google/rpc/status_pb.js';
import { FetchErrorDetailsResponseSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';

function failure(over: Partial<SparkFailure>): SparkFailure {
  return { grpcCode: status.INTERNAL, message: 'boom', messageParameters: {}, classes: [], causes: [], ...over };
}

/** A grpc-js call error as a Spark server sends it. */
function grpcError(code: number, details: string, info?: Record<string, string>, retryDelayMs?: number) {
  const metadata = new Metadata();
  const detailsAny = [];
  if (info)
    detailsAny.push(
      anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: 'org.apache.spark.SparkException', domain: 'org.apache.spark', metadata: info })),
    );
  if (retryDelayMs !== undefined) {
    detailsAny.push(
      anyPack(
        RetryInfoSchema,
        create(RetryInfoSchema, {
          retryDelay: create(DurationSchema, { seconds: BigInt(Math.floor(retryDelayMs / 1000)), nanos: (retryDelayMs % 1000) * 1e6 }),
        }),
      ),
    );
  }
  if (detailsAny.length) {
    metadata.set('grpc-status-details-bin', Buffer.from(toBinary(StatusSchema, create(StatusSchema, { code, message: details, details: detailsAny }))));
  }
  return Object.assign(new Error(details), { code, details, metadata });
}

describe('classification', () => {
  const cases: [string, Partial<SparkFailure>, number, string][] = [
    ['unauthenticated', { grpcCode: status.UNAUTHENTICATED }, ExitCode.permission, 'SPARK_AUTH'],
    ['permission denied', { grpcCode: status.PERMISSION_DENIED }, ExitCode.permission, 'SPARK_AUTH'],
    ['unavailable after retries', { grpcCode: status.UNAVAILABLE }, ExitCode.unavailable, 'SPARK_UNAVAILABLE'],
    ['deadline', { grpcCode: status.DEADLINE_EXCEEDED }, ExitCode.transient, 'SPARK_TIMEOUT'],
    [
      'postgres refuses the password',
      { message: 'org.postgresql.util.PSQLException: FATAL: password authentication failed for user "x"' },
      ExitCode.permission,
      'SOURCE_AUTH',
    ],
    ['mysql refuses the user', { message: "java.sql.SQLException: Access denied for user 'x'@'h'" }, ExitCode.permission, 'SOURCE_AUTH'],
    [
      'iceberg REST catalog refused',
      {
        classes: ['org.apache.iceberg.exceptions.RESTException', 'java.lang.RuntimeException'],
        message: 'Error occurred while processing GET request',
        causes: ['org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException: Connect to http://127.0.0.1:9 failed: Connection refused'],
      },
      ExitCode.unavailable,
      'CATALOG_UNAVAILABLE',
    ],
    [
      'iceberg REST catalog answers 503',
      { classes: ['org.apache.iceberg.exceptions.ServiceUnavailableException'], message: 'Service unavailable' },
      ExitCode.unavailable,
      'CATALOG_UNAVAILABLE',
    ],
    [
      'iceberg REST catalog answers 400 (not an outage)',
      { classes: ['org.apache.iceberg.exceptions.RESTException'], message: 'Malformed request: bad namespace' },
      ExitCode.internal,
      'SPARK_ERROR',
    ],
    // What Spark 4.1 with S3A 3.4.2 answered on the local stack (causes as FetchErrorDetails gives them).
    [
      'object store: a key the store does not know',
      {
        errorClass: 'FAILED_TO_CREATE_PLAN_FOR_DIRECT_QUERY',
        causes: [
          'java.nio.file.AccessDeniedException: s3a://stale-key/acme/x: getFileStatus on s3a://stale-key/acme/x: software.amazon.awssdk.services.s3.model.S3Exception: Forbidden (Service: S3, Status Code: 403, Request ID: 4442587FB7D0A2F9):null',
        ],
      },
      ExitCode.permission,
      'OBJECT_STORE_AUTH',
    ],
    [
      'object store: no key at all',
      {
        causes: [
          'org.apache.hadoop.fs.s3a.auth.NoAuthWithAWSException: No AWS Credentials provided by EnvironmentVariableCredentialsProvider : s3a://lake/acme/silver/orders',
        ],
      },
      ExitCode.permission,
      'OBJECT_STORE_AUTH',
    ],
    [
      'object store: the bucket does not exist',
      {
        causes: [
          "org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://nobucket/acme/x': getFileStatus on s3a://nobucket/acme/x: software.amazon.awssdk.services.s3.model.NoSuchBucketException: The specified bucket does not exist (Service: S3, Status Code: 404)",
        ],
      },
      ExitCode.inputMissing,
      'OBJECT_STORE_BUCKET_MISSING',
    ],
    [
      'object store: the endpoint does not answer',
      {
        causes: [
          'java.net.ConnectException: getFileStatus on s3a://unreachable/acme/x: software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused (SDK Attempt Count: 3)',
          'org.apache.http.conn.HttpHostConnectException: Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused',
        ],
      },
      ExitCode.unavailable,
      'OBJECT_STORE_UNAVAILABLE',
    ],
    // A local file the server may not read is no object store's refusal.
    ['a local file refused', { causes: ['java.nio.file.AccessDeniedException: /lake/acme/x'] }, ExitCode.internal, 'SPARK_ERROR'],
    ['source unreachable', { message: 'org.postgresql.util.PSQLException: Connection to 127.0.0.1:1 refused.' }, ExitCode.unavailable, 'SOURCE_UNAVAILABLE'],
    ['source host unknown', { classes: ['java.net.UnknownHostException'] }, ExitCode.unavailable, 'SOURCE_UNAVAILABLE'],
    [
      'kafka unreachable',
      { message: 'org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. Call: describeTopics' },
      ExitCode.unavailable,
      'KAFKA_UNAVAILABLE',
    ],
    ['session not found', { errorClass: 'INVALID_HANDLE.SESSION_NOT_FOUND' }, ExitCode.transient, 'SPARK_SESSION_LOST'],
    ['session closed', { errorClass: 'INVALID_HANDLE.SESSION_CLOSED' }, ExitCode.transient, 'SPARK_SESSION_LOST'],
    ['session changed', { errorClass: 'INVALID_HANDLE.SESSION_CHANGED' }, ExitCode.transient, 'SPARK_SESSION_LOST'],
    // Lost create races, as the stack's servers answered eight creates at once (docs/catalogs.md, "Concurrent first runs").
    [
      'JDBC catalog: another run inserted the table first',
      { classes: ['org.apache.iceberg.exceptions.AlreadyExistsException', 'java.lang.RuntimeException'], message: 'Table already exists: acme_silver.orders' },
      ExitCode.transient,
      'CREATE_RACE',
    ],
    [
      "REST catalog: another run's create met the assert-create requirement",
      { classes: ['org.apache.iceberg.exceptions.AlreadyExistsException', 'java.lang.RuntimeException'], message: 'Requirement failed: table already exists' },
      ExitCode.transient,
      'CREATE_RACE',
    ],
    [
      "REST catalog on JDBC: the namespace insert lost (the server's 500)",
      {
        classes: ['org.apache.iceberg.exceptions.ServiceFailureException', 'org.apache.iceberg.exceptions.RESTException'],
        message:
          'Server error: UncheckedSQLException: Failed to execute: INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?,?,?,?), (?,?,?,?)',
      },
      ExitCode.transient,
      'CREATE_RACE',
    ],
    [
      "JDBC catalog on PostgreSQL: the namespace row's unique key",
      {
        classes: ['org.apache.iceberg.jdbc.UncheckedSQLException'],
        message: 'Failed to execute: INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?,?,?,?)',
        causes: ['org.postgresql.util.PSQLException: ERROR: duplicate key value violates unique constraint "iceberg_namespace_properties_pkey"'],
      },
      ExitCode.transient,
      'CREATE_RACE',
    ],
    ['session catalog: the table exists', { errorClass: 'TABLE_OR_VIEW_ALREADY_EXISTS' }, ExitCode.transient, 'CREATE_RACE'],
    ['session catalog: the schema exists', { errorClass: 'SCHEMA_ALREADY_EXISTS' }, ExitCode.transient, 'CREATE_RACE'],
    ['two streaming queries of one checkpoint', { errorClass: 'CONCURRENT_QUERY' }, ExitCode.transient, 'CREATE_RACE'],
    ['two streaming queries writing one checkpoint log', { errorClass: 'CONCURRENT_STREAM_LOG_UPDATE' }, ExitCode.transient, 'CREATE_RACE'],
    [
      'two streaming queries of one checkpoint, by message',
      {
        classes: ['java.util.ConcurrentModificationException'],
        message: 'Multiple streaming queries are concurrently using file:/lake/acme/_checkpoints/t/offsets',
      },
      ExitCode.transient,
      'CREATE_RACE',
    ],
    // Not a race: a column of that name exists, a REST catalog failing otherwise.
    ['a column that exists', { errorClass: 'COLUMN_ALREADY_EXISTS' }, ExitCode.internal, 'SPARK_ERROR'],
    [
      'a catalog that is down is no race',
      { classes: ['org.apache.iceberg.exceptions.ServiceFailureException'], message: 'Server error: NullPointerException' },
      ExitCode.internal,
      'SPARK_ERROR',
    ],
    ['iceberg commit conflict', { classes: ['org.apache.iceberg.exceptions.CommitFailedException'] }, ExitCode.transient, 'COMMIT_CONFLICT'],
    [
      'wrapped iceberg conflict',
      { message: 'Job aborted: org.apache.iceberg.exceptions.CommitFailedException: Cannot commit' },
      ExitCode.transient,
      'COMMIT_CONFLICT',
    ],
    ['delta conflict class', { classes: ['io.delta.exceptions.ConcurrentAppendException'] }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['delta conflict error class', { errorClass: 'DELTA_CONCURRENT_APPEND.WITHOUT_HINT' }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['operation cancelled', { errorClass: 'OPERATION_CANCELED' }, ExitCode.transient, 'SPARK_OPERATION_CANCELLED'],
    ['table not found', { errorClass: 'TABLE_OR_VIEW_NOT_FOUND' }, ExitCode.inputMissing, 'INPUT_MISSING'],
    ['path not found', { errorClass: 'PATH_NOT_FOUND' }, ExitCode.inputMissing, 'INPUT_MISSING'],
    ['schema not found', { errorClass: 'SCHEMA_NOT_FOUND' }, ExitCode.inputMissing, 'INPUT_MISSING'],
    ['iceberg no such table', { classes: ['org.apache.iceberg.exceptions.NoSuchTableException'] }, ExitCode.inputMissing, 'INPUT_MISSING'],
    ['cast', { errorClass: 'CAST_INVALID_INPUT' }, ExitCode.data, 'DATA_INVALID'],
    ['divide by zero', { errorClass: 'DIVIDE_BY_ZERO' }, ExitCode.data, 'DATA_INVALID'],
    ['overflow', { errorClass: 'ARITHMETIC_OVERFLOW' }, ExitCode.data, 'DATA_INVALID'],
    ['numeric range', { errorClass: 'NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION' }, ExitCode.data, 'DATA_INVALID'],
    ['merge cardinality', { errorClass: 'MERGE_CARDINALITY_VIOLATION' }, ExitCode.data, 'DATA_INVALID'],
    ['delta merge cardinality', { errorClass: 'DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE' }, ExitCode.data, 'DATA_INVALID'],
    ['missing column', { errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION' }, ExitCode.data, 'SOURCE_SCHEMA_CONTRACT'],
    ['parse error', { errorClass: 'PARSE_SYNTAX_ERROR' }, ExitCode.config, 'SPARK_PARSE_ERROR'],
    ["delta table on another table's location", { errorClass: 'DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION' }, ExitCode.config, 'TABLE_LOCATION_TAKEN'],
    // Iceberg's conflict validation (the loser of two overlapping MERGEs, as the real server reports it).
    [
      'iceberg conflicting files',
      {
        classes: ['org.apache.iceberg.exceptions.ValidationException', 'java.lang.RuntimeException'],
        message: 'Found conflicting files that can contain records matching true: [/lake/t/data/00000-1.parquet]',
      },
      ExitCode.transient,
      'COMMIT_CONFLICT',
    ],
    [
      'iceberg missing files to delete',
      { classes: ['org.apache.iceberg.exceptions.ValidationException'], message: 'Missing required files to delete: /lake/t/data/1.parquet' },
      ExitCode.transient,
      'COMMIT_CONFLICT',
    ],
    [
      'iceberg conflict in a cause',
      {
        message: 'Job aborted',
        causes: ['org.apache.iceberg.exceptions.ValidationException: Found new conflicting delete files that can apply to records matching true'],
      },
      ExitCode.transient,
      'COMMIT_CONFLICT',
    ],
    ['delta concurrent delete-read', { errorClass: 'DELTA_CONCURRENT_DELETE_READ' }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['delta concurrent delete-delete', { classes: ['io.delta.exceptions.ConcurrentDeleteDeleteException'] }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['delta concurrent transaction', { errorClass: 'DELTA_CONCURRENT_TRANSACTION' }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['delta metadata changed', { errorClass: 'DELTA_METADATA_CHANGED' }, ExitCode.transient, 'COMMIT_CONFLICT'],
    ['delta protocol changed', { classes: ['io.delta.exceptions.ProtocolChangedException'] }, ExitCode.transient, 'COMMIT_CONFLICT'],
    // Bad source files, as the real server reports them.
    [
      'corrupt parquet file',
      {
        errorClass: 'FAILED_READ_FILE.NO_HINT',
        messageParameters: { path: 'file:///lake/bronze/t/d=1/b.parquet' },
        causes: ['java.lang.RuntimeException: file:/lake/bronze/t/d=1/b.parquet is not a Parquet file. Expected magic number at tail'],
      },
      ExitCode.data,
      'SOURCE_FILE_CORRUPT',
    ],
    [
      'corrupt parquet footer in a cause (schema merging)',
      {
        message: 'Job aborted due to stage failure: …',
        causes: [
          'org.apache.spark.SparkException: Exception thrown in awaitResult: ',
          'org.apache.spark.SparkException: [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER] Encountered error while reading file file:/lake/b.parquet. Could not read footer.',
        ],
      },
      ExitCode.data,
      'SOURCE_FILE_CORRUPT',
    ],
    [
      'nanosecond timestamps',
      { errorClass: 'PARQUET_TYPE_ILLEGAL', messageParameters: { parquetType: 'INT64 (TIMESTAMP(NANOS,false))' } },
      ExitCode.data,
      'SOURCE_TYPE_UNSUPPORTED',
    ],
    ['column type differs in one file', { errorClass: 'FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH' }, ExitCode.data, 'SOURCE_TYPE_MISMATCH'],
    ['schemas cannot be merged', { errorClass: 'CANNOT_MERGE_SCHEMAS' }, ExitCode.data, 'SOURCE_TYPE_MISMATCH'],
    // A JDBC source table that does not exist: each database says it its own way.
    [
      'sqlite no such table',
      { classes: ['org.sqlite.SQLiteException'], message: '[SQLITE_ERROR] SQL error or missing database (no such table: orders)' },
      ExitCode.inputMissing,
      'SOURCE_TABLE_NOT_FOUND',
    ],
    [
      'postgres relation missing',
      { message: 'org.postgresql.util.PSQLException: ERROR: relation "public.orders" does not exist' },
      ExitCode.inputMissing,
      'SOURCE_TABLE_NOT_FOUND',
    ],
    [
      'mysql table missing',
      { message: "java.sql.SQLSyntaxErrorException: Table 'shop.orders' doesn't exist" },
      ExitCode.inputMissing,
      'SOURCE_TABLE_NOT_FOUND',
    ],
    [
      'sql server table missing',
      { message: "com.microsoft.sqlserver.jdbc.SQLServerException: Invalid object name 'dbo.orders'." },
      ExitCode.inputMissing,
      'SOURCE_TABLE_NOT_FOUND',
    ],
    [
      'oracle table missing',
      { message: 'java.sql.SQLSyntaxErrorException: ORA-00942: table or view does not exist' },
      ExitCode.inputMissing,
      'SOURCE_TABLE_NOT_FOUND',
    ],
    // Lost Kafka offsets, as the real server reports them (a streaming query's failure).
    [
      'kafka data loss',
      {
        errorClass: 'STREAM_FAILED',
        message:
          '[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Some data may have been lost because they are not available in Kafka any more;',
      },
      ExitCode.data,
      'SOURCE_DATA_LOST',
    ],
    [
      'kafka data loss class',
      { errorClass: 'KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE', message: '[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] …' },
      ExitCode.data,
      'SOURCE_DATA_LOST',
    ],
    [
      'another streaming failure',
      { errorClass: 'STREAM_FAILED', message: '[STREAM_FAILED] Query terminated with exception: boom' },
      ExitCode.internal,
      'SPARK_ERROR',
    ],
    ['a refusal of the tenant policy', { errorClass: 'LAKEHOUSE_TENANT_POLICY', messageParameters: { reason: 'x' } }, ExitCode.config, 'TENANT_POLICY'],
    [
      "the tenant's own mistake in its logic",
      { errorClass: 'LAKEHOUSE_TENANT_ANALYSIS', messageParameters: { errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION' } },
      ExitCode.config,
      'TENANT_ANALYSIS',
    ],
    [
      'a missing table in tenant logic',
      { errorClass: 'LAKEHOUSE_TENANT_ANALYSIS', messageParameters: { errorClass: 'TABLE_OR_VIEW_NOT_FOUND' } },
      ExitCode.inputMissing,
      'TENANT_ANALYSIS',
    ],
    [
      "the watchdog cancelled a tenant's operation for its rows",
      { errorClass: 'SPARK_JOB_CANCELLED', message: 'Job 3 cancelled: LAKEHOUSE_WATCHDOG_ROWS: an operator produced more than 10 rows' },
      ExitCode.data,
      'ROW_GROWTH',
    ],
    [
      "the watchdog cancelled a tenant's operation for its time (the reason in a cause)",
      {
        message: 'Job aborted',
        causes: ['org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 4 cancelled: LAKEHOUSE_WATCHDOG_TIME: the operation ran longer than 5 s'],
      },
      ExitCode.transient,
      'STEP_TIMEOUT',
    ],
    ['anything else', { errorClass: 'INTERNAL_ERROR' }, ExitCode.internal, 'SPARK_ERROR'],
    ['no class at all', {}, ExitCode.internal, 'SPARK_ERROR'],
  ];

  it.each(cases)('%s', (_name, over, exitCode, code) => {
    const e = new SparkError(failure(over));
    expect(e.exitCode).toBe(exitCode);
    expect(e.code).toBe(code);
  });

  it('names the config key of a config-class failure once, and leaves other failures unlocated', () => {
    const taken = new SparkError(failure({ errorClass: 'DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION', message: 'Cannot create table' }));
    taken.at('target.table').at('target.other');
    expect(taken.message).toBe('target.table: [DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table');
    expect(taken.report()).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'target.table', category: 'config' });
    const transient = new SparkError(failure({ errorClass: 'DELTA_CONCURRENT_TRANSACTION', message: 'conflict' })).at('target.table');
    expect(transient.report().path).toBeUndefined();
    expect(transient.message).not.toContain('target.table');
  });

  it('counts an Iceberg ValidationException as a conflict only for its conflict messages', () => {
    const other = failure({ classes: ['org.apache.iceberg.exceptions.ValidationException'], message: 'Cannot add column, name already exists: id' });
    expect(ruleFor(other).code).toBe('SPARK_ERROR');
  });

  it('counts FAILED_READ_FILE as bad data only when the file itself is unreadable', () => {
    // An I/O failure reading the file is not the data's fault.
    const io = failure({ errorClass: 'FAILED_READ_FILE.NO_HINT', causes: ['java.net.SocketTimeoutException: Read timed out'] });
    expect(ruleFor(io).code).toBe('SPARK_ERROR');
  });

  it('names the file, the column and the fix for bad source files', () => {
    const corrupt = new SparkError(
      failure({
        errorClass: 'FAILED_READ_FILE.NO_HINT',
        messageParameters: { path: 'file:///lake/acme/bronze/orders/d=1/b.parquet' },
        causes: ['java.lang.RuntimeException: … is not a Parquet file'],
      }),
    );
    expect(corrupt.message).toContain('unreadable source file file:///lake/acme/bronze/orders/d=1/b.parquet');
    expect(corrupt.report()).toMatchObject({
      code: 'SOURCE_FILE_CORRUPT',
      category: 'data',
      retryable: false,
      hint: expect.stringContaining('rerun the ingest'),
    });

    const mismatch = new SparkError(
      failure({
        errorClass: 'FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH',
        messageParameters: { path: 'file:///lake/b.parquet', column: '[amount]', expectedType: 'int', actualType: 'BINARY' },
      }),
    );
    expect(mismatch.message).toMatch(
      /^source file file:\/\/\/lake\/b\.parquet: column amount is BINARY in the file, but int in the other files of the source\. Fix: /,
    );

    const merge = new SparkError(
      failure({
        errorClass: 'CANNOT_MERGE_SCHEMAS',
        messageParameters: {
          left: '"STRUCT<id: BIGINT, amount: INT, tags: ARRAY<STRING>>"',
          right: '"STRUCT<id: BIGINT, amount: STRING, tags: ARRAY<STRING>>"',
        },
      }),
    );
    expect(merge.message).toMatch(/^source files disagree on the type of column amount \(INT vs STRING\)/);
    expect(merge.hint).toContain('cast');

    const nanos = new SparkError(failure({ errorClass: 'PARQUET_TYPE_ILLEGAL', messageParameters: { parquetType: 'INT64 (TIMESTAMP(NANOS,false))' } }));
    expect(nanos.message).toContain('INT64 (TIMESTAMP(NANOS,false))');
    expect(nanos.hint).toContain('coerce_timestamps="us"');
  });

  it('does not mistake look-alike classes', () => {
    expect(ruleFor(failure({ errorClass: 'TABLE_OR_VIEW_NOT_FOUNDX' })).code).toBe('SPARK_ERROR');
    expect(ruleFor(failure({ message: 'java.util.ConcurrentModificationException' })).code).toBe('SPARK_ERROR');
    expect(ruleFor(failure({ grpcCode: status.UNAVAILABLE, errorClass: 'TABLE_OR_VIEW_NOT_FOUND' })).code).toBe('SPARK_UNAVAILABLE');
  });

  it('ends with a catch-all rule', () => {
    const last = errorRules[errorRules.length - 1];
    expect(last?.grpc ?? last?.errorClass ?? last?.exception).toBeUndefined();
  });

  it('marks transient and unavailable failures retryable, others not', () => {
    expect(new SparkError(failure({ grpcCode: status.UNAVAILABLE })).retryable).toBe(true);
    expect(new SparkError(failure({ errorClass: 'INVALID_HANDLE.SESSION_NOT_FOUND' })).retryable).toBe(true);
    expect(new SparkError(failure({ errorClass: 'DIVIDE_BY_ZERO' })).retryable).toBe(false);
  });

  it('reports the error class and SQL state', () => {
    const e = new SparkError(failure({ errorClass: 'TABLE_OR_VIEW_NOT_FOUND', sqlState: '42P01', message: '[TABLE_OR_VIEW_NOT_FOUND] no t' }));
    expect(e.report()).toEqual({
      code: 'INPUT_MISSING',
      category: 'input',
      message: '[TABLE_OR_VIEW_NOT_FOUND] no t',
      retryable: false,
      sparkErrorClass: 'TABLE_OR_VIEW_NOT_FOUND',
      sqlState: '42P01',
    });
  });
});

describe('structFieldsOf', () => {
  it('splits top-level fields only', () => {
    expect([...structFieldsOf('"STRUCT<id: BIGINT, m: MAP<STRING, INT>, d: DECIMAL(10,2), `a b`: STRING>"')]).toEqual([
      ['id', 'BIGINT'],
      ['m', 'MAP<STRING, INT>'],
      ['d', 'DECIMAL(10,2)'],
      ['a b', 'STRING'],
    ]);
    expect(structFieldsOf('INT').size).toBe(0);
  });
});

describe('decoding grpc-status-details-bin', () => {
  it('reads ErrorInfo metadata', () => {
    const f = failureFromGrpc(
      grpcError(status.INTERNAL, '[DIVIDE_BY_ZERO] Division by zero.', {
        errorClass: 'DIVIDE_BY_ZERO',
        sqlState: '22012',
        messageParameters: '{"config":"\\"spark.sql.ansi.enabled\\""}',
        classes: '["org.apache.spark.SparkArithmeticException","java.lang.ArithmeticException"]',
        errorId: 'e-1',
      }),
    );
    expect(f).toMatchObject({
      grpcCode: status.INTERNAL,
      errorClass: 'DIVIDE_BY_ZERO',
      sqlState: '22012',
      messageParameters: { config: '"spark.sql.ansi.enabled"' },
      classes: ['org.apache.spark.SparkArithmeticException', 'java.lang.ArithmeticException'],
      errorId: 'e-1',
    });
    expect(new SparkError(f).exitCode).toBe(ExitCode.data);
  });

  it('survives missing or malformed details', () => {
    expect(failureFromGrpc({ code: status.UNAVAILABLE, details: 'connect ECONNREFUSED' })).toMatchObject({ message: 'connect ECONNREFUSED', classes: [] });
    const md = new Metadata();
    md.set('grpc-status-details-bin', Buffer.from([0xff, 0xff, 0xff]));
    expect(failureFromGrpc({ code: 13, details: 'x', metadata: md }).message).toBe('x');
    const bad = grpcError(13, 'y', { messageParameters: 'not json', classes: '{}' });
    expect(failureFromGrpc(bad)).toMatchObject({ messageParameters: {}, classes: ['org.apache.spark.SparkException'] });
  });

  it('scrubs known secrets out of server messages', () => {
    const token = new Secret('tok-4f9a8b7c');
    token.reveal();
    const f = failureFromGrpc(grpcError(13, `bad header Bearer tok-4f9a8b7c`, { errorClass: 'X', messageParameters: '{"v":"tok-4f9a8b7c"}' }));
    expect(f.message).not.toContain('tok-4f9a8b7c');
    expect(f.messageParameters.v).toBe('[redacted]');
  });

  it('takes the full message and chain from FetchErrorDetails', () => {
    const base = failureFromGrpc(grpcError(13, 'short…', { errorClass: 'USER_RAISED_EXCEPTION', errorId: 'e-2' }));
    const details = create(FetchErrorDetailsResponseSchema, {
      rootErrorIdx: 0,
      errors: [
        {
          errorTypeHierarchy: ['org.apache.spark.SparkRuntimeException'],
          message: 'x'.repeat(5000),
          causeIdx: 1,
          sparkThrowable: { errorClass: 'USER_RAISED_EXCEPTION', sqlState: 'P0001', messageParameters: { errorMessage: 'x' } },
        },
        { errorTypeHierarchy: ['java.lang.IllegalStateException'], message: 'inner' },
      ],
    });
    const f = withErrorDetails(base, details);
    expect(f.message).toHaveLength(5000);
    expect(f).toMatchObject({ errorClass: 'USER_RAISED_EXCEPTION', sqlState: 'P0001', causes: ['java.lang.IllegalStateException: inner'] });
  });
});

describe('isRetryableGrpcError', () => {
  it('retries UNAVAILABLE, INVALID_CURSOR.DISCONNECTED and RetryInfo, nothing else', () => {
    expect(isRetryableGrpcError(grpcError(status.UNAVAILABLE, 'down'))).toBe(true);
    expect(isRetryableGrpcError(grpcError(status.INTERNAL, '[INVALID_CURSOR.DISCONNECTED] other stream'))).toBe(true);
    expect(isRetryableGrpcError(grpcError(status.INTERNAL, 'x', { errorClass: 'INVALID_CURSOR.DISCONNECTED' }))).toBe(true);
    expect(isRetryableGrpcError(grpcError(status.RESOURCE_EXHAUSTED, 'slow down', undefined, 2500))).toEqual({ minDelayMs: 2500 });
    expect(isRetryableGrpcError(grpcError(status.INTERNAL, 'x', { errorClass: 'DIVIDE_BY_ZERO' }))).toBe(false);
    expect(isRetryableGrpcError(grpcError(status.DEADLINE_EXCEEDED, 'late'))).toBe(false);
    expect(isRetryableGrpcError(new Error('not grpc'))).toBe(false);
  });
});

describe('object-storage failures name the location and its bucket, never the server text', () => {
  it.each([
    [
      'java.nio.file.AccessDeniedException: s3a://stale-key/acme/x: getFileStatus on s3a://stale-key/acme/x: S3Exception: Forbidden',
      /credentials for s3a:\/\/stale-key\/acme\/x \(bucket stale-key\)/,
    ],
    [
      "org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://nobucket/acme/x': NoSuchBucket",
      /the bucket of s3a:\/\/nobucket\/acme\/x \(bucket nobucket\) does not exist/,
    ],
    [
      'java.net.ConnectException: getFileStatus on s3a://lake/acme: Unable to execute HTTP request: Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused',
      /could not reach the object store for s3a:\/\/lake\/acme \(bucket lake\): .*Connection refused/,
    ],
  ])('%s', (cause, message) => {
    const e = new SparkError(failure({ message: '[FAILED_TO_CREATE_PLAN_FOR_DIRECT_QUERY] Failed to create plan', causes: [cause] }));
    expect(e.message).toMatch(message);
    expect(e.message).not.toContain('FAILED_TO_CREATE_PLAN');
  });
});
