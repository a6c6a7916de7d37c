/**
 * Spark Connect failures as LakehouseErrors. A failed call carries a gRPC status and, in
 * `grpc-status-details-bin`, a google.rpc.Status with an ErrorInfo: the Java exception classes,
 * Spark's error class, SQL state, message parameters and an error id for FetchErrorDetails (the
 * client uses it to replace a truncated message with the full one). `errorRules` turns that into
 * the exit codes of docs/contracts.md; it is the only place that decides.
 */
import { status as GrpcStatus, type Metadata } from '@grpc/grpc-js';
import { fromBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { BAD_VALUE_MARKER, ExitCode, LakehouseError, type ErrorCategory, type ErrorReport } from '../core/errors.js';
import { scrub } from '../core/secrets.js';
import { ErrorInfoSchema, RetryInfoSchema, StatusSchema } from './proto/gen/google/rpc/status_pb.js';
import type { FetchErrorDetailsResponse } from './proto/gen/spark/connect/base_pb.js';

export type GrpcCodeName = keyof typeof GrpcStatus;

export function grpcCodeName(code: number): GrpcCodeName | 'UNKNOWN' {
  const name = GrpcStatus[code];
  return (typeof name === 'string' ? name : 'UNKNOWN') as GrpcCodeName;
}

/** What the server told us about a failure, before classification. */
export interface SparkFailure {
  grpcCode: number;
  /** The server's message (scrubbed), the full one when FetchErrorDetails answered. */
  message: string;
  errorClass?: string;
  sqlState?: string;
  messageParameters: Record<string, string>;
  /** Java exception class and its superclasses, most specific first. */
  classes: string[];
  /** For FetchErrorDetails; present while the server still holds the error. */
  errorId?: string;
  /** Messages of the causes, outermost first (from FetchErrorDetails). */
  causes: string[];
  /** A server's advice on when to retry. */
  retryDelayMs?: number;
  /** Attempts made by the retry wrapper, when more than one. */
  attempts?: number;
}

// ---------------------------------------------------------------------------------------------
// Classification

type Outcome = 'permission' | 'input' | 'data' | 'transient' | 'unavailable' | 'config' | 'internal';

export interface ErrorRule {
  /** The `code` of the resulting error report. */
  code: string;
  outcome: Outcome;
  /** Matches when the gRPC status is one of these. */
  grpc?: readonly GrpcCodeName[];
  /** Matches when Spark's error class is one of these: `X` also matches `X.SUB`, `*` is a wildcard. */
  errorClass?: readonly string[];
  /** Matches against the Java exception classes, the message and the causes (wrapped exceptions). */
  exception?: RegExp;
  /** A further condition on top of the criteria above (all must hold). */
  when?: (f: ClassifiedFailure) => boolean;
  /** A message for people: what is wrong, where, and how to fix it (replaces the server's text). */
  explain?: (f: ClassifiedFailure) => { message: string; hint: string };
}

type ClassifiedFailure = Pick<SparkFailure, 'grpcCode' | 'errorClass' | 'classes' | 'message'> & Partial<Pick<SparkFailure, 'causes' | 'messageParameters'>>;

/**
 * Error classes named in the causes' messages (`[FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER] …`): a
 * failed Spark job often reaches us as "Job aborted due to stage failure" with the real error, and
 * its class, only in the cause chain.
 */
function causeErrorClasses(f: ClassifiedFailure): string[] {
  return (f.causes ?? []).flatMap((c) => [...c.matchAll(/\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]/g)].map((m) => m[1] as string));
}

/** The message parameter or the first `file:…`/`s3a:…` path in the message and its causes. */
function fileOf(f: ClassifiedFailure): string | undefined {
  const param = f.messageParameters?.path;
  if (param) return param;
  for (const text of [f.message, ...(f.causes ?? [])]) {
    const m = /\b((?:file|s3a?|gs|abfss?|hdfs):\/?[^\s,;]+?\.parquet)\b/.exec(text);
    if (m) return m[1];
  }
  return undefined;
}

/** Top-level fields of a Spark type string `"STRUCT<id: BIGINT, amount: INT>"`, name → type. */
export function structFieldsOf(type: string): Map<string, string> {
  const body = /STRUCT<(.*)>/s.exec(type)?.[1] ?? '';
  const fields = new Map<string, string>();
  let depth = 0;
  let start = 0;
  const take = (end: number): void => {
    const field = body.slice(start, end).trim();
    const colon = field.indexOf(':');
    if (colon > 0) fields.set(field.slice(0, colon).trim().replace(/^`|`$/g, ''), field.slice(colon + 1).trim());
  };
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (ch === '<' || ch === '(') depth++;
    else if (ch === '>' || ch === ')') depth--;
    else if (ch === ',' && depth === 0) {
      take(i);
      start = i + 1;
    }
  }
  take(body.length);
  return fields;
}

const TYPE_CLASH_HINT =
  'the bronze files disagree on a column type (e.g. one snapshot date wrote it as INT, another as STRING): rewrite the odd partition with the ' +
  'agreed type (rerun its ingest with a cast in the source query), or move it aside, then rerun';

/** Bad source data: the file and column in the message, and what to do about it. */
const dataExplanations = {
  corrupt: (f: ClassifiedFailure) => ({
    message: `unreadable source file ${fileOf(f) ?? '(file not named by Spark)'}: it is not a valid Parquet file (truncated or corrupt)`,
    hint: 'restore or rewrite the file from its source (rerun the ingest for its date), or move it out of the bronze path, then rerun',
  }),
  typeMismatch: (f: ClassifiedFailure) => {
    const p = f.messageParameters ?? {};
    return {
      message:
        `source file ${p.path ?? fileOf(f) ?? '(file not named by Spark)'}: column ${(p.column ?? '?').replace(/^\[|\]$/g, '')} is ` +
        `${p.actualType ?? '?'} in the file, but ${p.expectedType ?? '?'} in the other files of the source`,
      hint: TYPE_CLASH_HINT,
    };
  },
  mergeSchemas: (f: ClassifiedFailure) => {
    const p = f.messageParameters ?? {};
    const left = structFieldsOf(p.left ?? '');
    const right = structFieldsOf(p.right ?? '');
    const clashes = [...right]
      .filter(([name, type]) => left.has(name) && left.get(name) !== type)
      .map(([name, type]) => `${name} (${left.get(name)} vs ${type})`);
    return {
      message: `source files disagree on the type of column${clashes.length === 1 ? '' : 's'} ${clashes.length ? clashes.join(', ') : '(not named by Spark)'}: their schemas cannot be merged`,
      hint: TYPE_CLASH_HINT,
    };
  },
  illegalType: (f: ClassifiedFailure) => {
    const type = f.messageParameters?.parquetType ?? '?';
    const nanos = /NANOS/.test(type);
    const file = fileOf(f);
    return {
      // Spark names neither the file nor the column here; the type tells which writer setting to fix.
      message: `${file ? `source file ${file}` : 'a source file'} has a Parquet type Spark cannot read: ${type}`,
      hint: nanos
        ? 'Spark reads timestamps with microsecond precision: have the writer store microseconds (pyarrow: coerce_timestamps="us"; pandas: to_parquet(..., coerce_timestamps="us")) and rewrite the file'
        : 'rewrite the file with types Spark supports (see the Spark Parquet data source documentation)',
    };
  },
};

/** How an HTTP client says it did not reach its server (Iceberg's REST client is Apache HttpClient 5). */
const CATALOG_CONNECT_FAILURE =
  /\b(?:[\w.$]*\.)?(?:HttpHostConnectException|ConnectException|UnknownHostException|NoRouteToHostException|SocketTimeoutException|ConnectTimeoutException|NoHttpResponseException)\b|Connection refused/;

/**
 * The object-storage location (s3a:// or s3://) an S3A failure names, and its bucket. S3A puts the
 * path first in its messages (`getFileStatus on s3a://lake/acme/x: …`).
 */
function objectStoreLocation(f: ClassifiedFailure): { location: string; bucket: string } | undefined {
  for (const text of [f.message, ...(f.causes ?? [])]) {
    const m = /\b(s3a?:\/\/([A-Za-z0-9._-]+)(?:\/[A-Za-z0-9._=+@~/-]*)?)/.exec(text);
    if (m) return { location: m[1]!.replace(/\/+$/, ''), bucket: m[2]! };
  }
  return undefined;
}
const onObjectStore = (f: ClassifiedFailure) => objectStoreLocation(f) !== undefined;
const where = (f: ClassifiedFailure) => {
  const at = objectStoreLocation(f);
  return at ? `${at.location} (bucket ${at.bucket})` : 'an object-storage location';
};
/** How S3A and the AWS SDK say the endpoint did not answer. */
const STORE_CONNECT_FAILURE =
  /\b(?:[\w.$]*\.)?(?:ConnectException|UnknownHostException|NoRouteToHostException|SocketTimeoutException|ConnectTimeoutException|NoHttpResponseException)\b|Unable to execute HTTP request/;

const ICEBERG_CONFLICT =
  /Found (?:new )?conflicting|Missing required files to delete|found new delete for replaced data file|Cannot commit, missing data files/i;

/**
 * A JDBC catalog's insert of a namespace or table row that another writer's insert beat: the
 * database's unique key (PostgreSQL, SQLite, MySQL, SQL Server, Oracle wordings), or Iceberg's
 * JdbcCatalog wrapping the failed INSERT into its own tables without the database's words.
 */
const JDBC_CATALOG_INSERT =
  /duplicate key value violates unique constraint|UNIQUE constraint failed|Duplicate entry .* for key|Violation of PRIMARY KEY constraint|ORA-00001|Failed to execute: INSERT INTO iceberg_(?:namespace_properties|tables)\b/i;

/** First match wins; a rule without criteria matches everything. */
export const errorRules: readonly ErrorRule[] = [
  // The server's tenant policy (spark-plugins/, docs/security-policy.md): a refusal, and an analysis
  // error of tenant logic (src/spark/policy/refusals.ts puts both at their config paths).
  { code: 'TENANT_POLICY', outcome: 'config', errorClass: ['LAKEHOUSE_TENANT_POLICY'] },
  {
    code: 'TENANT_ANALYSIS',
    outcome: 'input',
    errorClass: ['LAKEHOUSE_TENANT_ANALYSIS'],
    when: (f) => /^(TABLE_OR_VIEW_NOT_FOUND|PATH_NOT_FOUND)/.test(f.messageParameters?.errorClass ?? ''),
  },
  { code: 'TENANT_ANALYSIS', outcome: 'config', errorClass: ['LAKEHOUSE_TENANT_ANALYSIS'] },
  // The server's watchdog cancelled an operation of the tenant's (its reason travels in the
  // cancelled job's error): an operator's rows grew past the platform's limits (the data's or the
  // logic's doing, 65), or it ran past the tenant's step time (75, a rerun may fit).
  { code: 'ROW_GROWTH', outcome: 'data', exception: /LAKEHOUSE_WATCHDOG_ROWS/ },
  { code: 'STEP_TIMEOUT', outcome: 'transient', exception: /LAKEHOUSE_WATCHDOG_TIME/ },
  { code: 'SPARK_AUTH', outcome: 'permission', grpc: ['UNAUTHENTICATED', 'PERMISSION_DENIED'] },
  { code: 'SPARK_AUTH', outcome: 'permission', errorClass: ['INSUFFICIENT_PERMISSIONS'] },
  // Object storage (S3A): the store refused the server's key (wrong, rotated, missing, or no right
  // on the bucket), the bucket does not exist, or the endpoint does not answer. Each names the
  // location; the key is the platform's, so none of these is the tenant's doing but the last may pass.
  {
    code: 'OBJECT_STORE_AUTH',
    outcome: 'permission',
    exception:
      /\b(?:java\.nio\.file\.AccessDeniedException|NoAuthWithAWSException|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|InvalidToken)\b|S3Exception: (?:Forbidden|Access Denied)/,
    when: onObjectStore,
    explain: (f) => ({
      message: `the object store refused the Spark server's credentials for ${where(f)}: its key is wrong, expired or missing, or has no right on that bucket`,
      hint: "give the Spark server a valid key for the bucket (its environment or the platform's per-bucket S3A settings); job configs never carry storage credentials",
    }),
  },
  {
    code: 'OBJECT_STORE_BUCKET_MISSING',
    outcome: 'input',
    exception: /\b(?:[\w.$]*\.)?UnknownStoreException\b|\bNoSuchBucket\b/,
    explain: (f) => ({
      message: `the bucket of ${where(f)} does not exist on the object store`,
      hint: "create the bucket, or fix the storage root (tenant.storage-root, the platform config's tenants.<id>.storage-roots)",
    }),
  },
  {
    code: 'OBJECT_STORE_UNAVAILABLE',
    outcome: 'unavailable',
    exception: STORE_CONNECT_FAILURE,
    when: onObjectStore,
    explain: (f) => ({
      message: `the Spark server could not reach the object store for ${where(f)}: ${
        [...(f.causes ?? []), f.message]
          .find((m) => /Connect to |Connection refused|UnknownHost|timed out/i.test(m))
          ?.replace(/\s+/g, ' ')
          .slice(0, 300) ?? 'no answer from its endpoint'
      }`,
      hint: "check that the object store is up and reachable from the Spark server and its executors (the endpoint of the platform's S3A settings); the run may be retried",
    }),
  },
  // A JDBC source refused our credentials (PostgreSQL, MySQL/MariaDB, SQL Server, Oracle).
  {
    code: 'SOURCE_AUTH',
    outcome: 'permission',
    exception: /password authentication failed|Access denied for user|Login failed for user|ORA-01017|invalid username\/password/i,
  },
  // The server's Iceberg REST catalog does not answer (refused, unknown host, timed out) or answers
  // 503: the same 69 as `ping`'s check of that catalog, not an internal error. Its client wraps the
  // connection failure in a RESTException, so the cause decides.
  {
    code: 'CATALOG_UNAVAILABLE',
    outcome: 'unavailable',
    exception: /\b(?:[\w.$]*\.)?(?:RESTException|ServiceUnavailableException)\b/,
    when: (f) =>
      f.classes.some((c) => c.endsWith('.ServiceUnavailableException')) ||
      (f.causes ?? []).some((m) => CATALOG_CONNECT_FAILURE.test(m)) ||
      CATALOG_CONNECT_FAILURE.test(f.message),
    explain: (f) => ({
      message: `the Spark server could not reach its Iceberg REST catalog: ${[...(f.causes ?? []), f.message].find((m) => CATALOG_CONNECT_FAILURE.test(m)) ?? f.message}`,
      hint: "check that the catalog service is up and reachable from the Spark server (`lakehouse-jobs ping --env <platform config>` checks the platform's REST catalogs); the run may be retried",
    }),
  },
  // A JDBC source that cannot be reached (the server connects to it, we only see its error).
  {
    code: 'SOURCE_UNAVAILABLE',
    outcome: 'unavailable',
    exception: /\bjava\.net\.(?:ConnectException|UnknownHostException|NoRouteToHostException)\b|Connection to [^ ]+ refused|Communications link failure/,
  },
  // The Kafka cluster did not answer within the consumer's timeouts (down, unreachable, or no broker
  // for the partitions): the same 69 as any unreachable source; the check steps name the cluster.
  {
    code: 'KAFKA_UNAVAILABLE',
    outcome: 'unavailable',
    exception: /\borg\.apache\.kafka\.common\.errors\.(?:TimeoutException|NetworkException|DisconnectException)\b/,
    explain: (f) => ({
      message: `the Spark server could not reach the Kafka cluster: ${
        [f.message, ...(f.causes ?? [])]
          .find((m) => /org\.apache\.kafka\.common\.errors\./.test(m))
          ?.replace(/\s+/g, ' ')
          .slice(0, 300) ?? f.message
      }`,
      hint: "check that the brokers of the platform config's kafka.clusters.<name>.bootstrap-servers are up and reachable from the Spark server and its executors; the run may be retried",
    }),
  },
  // The JDBC source table does not exist (SQLite, PostgreSQL, MySQL/MariaDB, SQL Server, Oracle, H2).
  {
    code: 'SOURCE_TABLE_NOT_FOUND',
    outcome: 'input',
    exception:
      /\bno such table: |\brelation "[^"]+" does not exist|\bTable '[^']+' doesn't exist|\bInvalid object name '|\bORA-00942\b|\bTable "[^"]+" not found/,
  },
  {
    code: 'SPARK_SESSION_LOST',
    outcome: 'transient',
    errorClass: ['INVALID_HANDLE.SESSION_NOT_FOUND', 'INVALID_HANDLE.SESSION_CLOSED', 'INVALID_HANDLE.SESSION_CHANGED'],
  },
  // Another writer committed first (optimistic concurrency). Rerunning is safe: our writes are
  // idempotent (MERGE by key, replace by date), so the orchestrator's retry resolves it.
  {
    code: 'COMMIT_CONFLICT',
    outcome: 'transient',
    errorClass: ['DELTA_CONCURRENT_*', 'DELTA_METADATA_CHANGED', 'DELTA_PROTOCOL_CHANGED'],
    exception:
      /\b(?:[\w.$]*\.)?(?:CommitFailedException|Concurrent(?:Append|DeleteRead|DeleteDelete|Transaction|Write)Exception|ProtocolChangedException|MetadataChangedException)\b/,
  },
  // Two runs created the same namespace or table at once and this one lost (docs/catalogs.md,
  // "Concurrent first runs"): Iceberg's catalogs say AlreadyExists (JDBC's unique key, REST's 409 or
  // its assert-create requirement), a JDBC catalog's own database may only say its insert failed (a
  // REST server on JDBC answers that as 500), Spark's own classes say it for the session catalog. A
  // create step goes on with the winner's object (src/runner/steps/ensure-table.ts); elsewhere the
  // rerun finds it.
  {
    code: 'CREATE_RACE',
    outcome: 'transient',
    errorClass: ['TABLE_OR_VIEW_ALREADY_EXISTS', 'SCHEMA_ALREADY_EXISTS'],
    exception: /\b(?:[\w.$]*\.)?(?:AlreadyExistsException|TableAlreadyExistsException|NamespaceAlreadyExistsException|AlreadyExistsError)\b/,
  },
  {
    code: 'CREATE_RACE',
    outcome: 'transient',
    exception: /\b(?:[\w.$]*\.)?(?:UncheckedSQLException|ServiceFailureException|SQLIntegrityConstraintViolationException)\b/,
    when: (f) => [f.message, ...(f.causes ?? [])].some((m) => JDBC_CATALOG_INSERT.test(m)),
  },
  // Two streaming queries of one checkpoint at once (two runs of one target): the second stops
  // before it writes; the rerun resumes from the winner's checkpoint.
  {
    code: 'CREATE_RACE',
    outcome: 'transient',
    errorClass: ['CONCURRENT_QUERY', 'CONCURRENT_STREAM_LOG_UPDATE'],
    exception: /Multiple streaming queries are concurrently using/,
  },
  // Iceberg's conflict validation: its ValidationException also reports other invalid operations,
  // so only its conflict messages count.
  {
    code: 'COMMIT_CONFLICT',
    outcome: 'transient',
    exception: /\bValidationException\b/,
    when: (f) => [f.message, ...(f.causes ?? [])].some((m) => ICEBERG_CONFLICT.test(m)),
  },
  { code: 'SPARK_TIMEOUT', outcome: 'transient', grpc: ['DEADLINE_EXCEEDED'] },
  { code: 'SPARK_OPERATION_CANCELLED', outcome: 'transient', errorClass: ['OPERATION_CANCELED'] },
  { code: 'SPARK_OPERATION_CANCELLED', outcome: 'transient', grpc: ['CANCELLED'] },
  { code: 'SPARK_UNAVAILABLE', outcome: 'unavailable', grpc: ['UNAVAILABLE'] },
  {
    code: 'INPUT_MISSING',
    outcome: 'input',
    errorClass: ['TABLE_OR_VIEW_NOT_FOUND', 'PATH_NOT_FOUND', 'SCHEMA_NOT_FOUND', 'DELTA_TABLE_NOT_FOUND', 'DELTA_MISSING_DELTA_TABLE'],
    exception: /\b(?:[\w.$]*\.)?(?:NoSuchTableException|NoSuchNamespaceException)\b/,
  },
  {
    code: 'DATA_INVALID',
    outcome: 'data',
    errorClass: [
      'CAST_INVALID_INPUT',
      'CAST_OVERFLOW',
      'DIVIDE_BY_ZERO',
      'ARITHMETIC_OVERFLOW',
      'NUMERIC_VALUE_OUT_OF_RANGE',
      'MERGE_CARDINALITY_VIOLATION',
      'DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE',
    ],
  },
  // Bad source files: corrupt, of a type Spark cannot read, or disagreeing with each other.
  {
    code: 'SOURCE_FILE_CORRUPT',
    outcome: 'data',
    errorClass: ['FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER', 'FAILED_READ_FILE.NO_HINT'],
    when: (f) =>
      [f.message, ...(f.causes ?? [])].some((m) =>
        /is not a Parquet file|Could not read footer|ParquetDecodingException|can not read class org\.apache\.parquet/i.test(m),
      ),
    explain: dataExplanations.corrupt,
  },
  {
    code: 'SOURCE_TYPE_MISMATCH',
    outcome: 'data',
    errorClass: ['FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH'],
    explain: dataExplanations.typeMismatch,
  },
  {
    code: 'SOURCE_TYPE_MISMATCH',
    outcome: 'data',
    errorClass: ['CANNOT_MERGE_SCHEMAS', 'CANNOT_MERGE_INCOMPATIBLE_DATA_TYPE'],
    explain: dataExplanations.mergeSchemas,
  },
  {
    code: 'SOURCE_TYPE_UNSUPPORTED',
    outcome: 'data',
    errorClass: ['PARQUET_TYPE_ILLEGAL', 'PARQUET_TYPE_NOT_SUPPORTED', 'PARQUET_TYPE_NOT_RECOGNIZED'],
    explain: dataExplanations.illegalType,
  },
  // A record's value does not fit its declared column: the template's own check raised it (with
  // raise_error) naming the record and the column, before the micro-batch was written.
  {
    code: 'SOURCE_BAD_VALUE',
    outcome: 'data',
    errorClass: ['STREAM_FAILED', 'USER_RAISED_EXCEPTION'],
    when: (f) => [f.message, ...(f.causes ?? [])].some((m) => m.includes(BAD_VALUE_MARKER)),
    explain: (f) => {
      const m = [f.message, ...(f.causes ?? [])].find((x) => x.includes(BAD_VALUE_MARKER)) ?? f.message;
      const text = m
        .slice(m.indexOf(BAD_VALUE_MARKER) + BAD_VALUE_MARKER.length)
        .replace(/\s*\(set source\.bad-values[^)]*\).*$/s, '')
        .trim();
      return { message: text, hint: 'correct the record or the declared type, or set source.bad-values = set-null to keep such values NULL and count them' };
    },
  },
  // Kafka offsets a streaming query must read are gone (retention, a recreated topic) and the source
  // fails on data loss: rerunning cannot bring them back, the data is lost (kafka-bronze-ingest).
  {
    code: 'SOURCE_DATA_LOST',
    outcome: 'data',
    errorClass: ['STREAM_FAILED', 'KAFKA_DATA_LOSS.*'],
    when: (f) => [f.message, ...(f.causes ?? [])].some((m) => /KAFKA_DATA_LOSS|Some data may have been lost because they are not available in Kafka/.test(m)),
  },
  // A column the job expects is missing from its input: the source broke its schema contract.
  { code: 'SOURCE_SCHEMA_CONTRACT', outcome: 'data', errorClass: ['UNRESOLVED_COLUMN'] },
  // SQL text comes from config (transforms, filters): when it does not parse, the config is wrong.
  { code: 'SPARK_PARSE_ERROR', outcome: 'config', errorClass: ['PARSE_SYNTAX_ERROR'] },
  // A table's location is the tenant's layout (<storage-root>/<layer>/<table>) whatever its catalog:
  // a Delta table named like another catalog's table of the layer finds that table's files there.
  // The config must name another table; retrying cannot help.
  { code: 'TABLE_LOCATION_TAKEN', outcome: 'config', errorClass: ['DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION'] },
  { code: 'SPARK_ERROR', outcome: 'internal' },
];

const outcomes: Record<Outcome, { exitCode: ExitCode; category: ErrorCategory; retryable: boolean }> = {
  permission: { exitCode: ExitCode.permission, category: 'permission', retryable: false },
  input: { exitCode: ExitCode.inputMissing, category: 'input', retryable: false },
  data: { exitCode: ExitCode.data, category: 'data', retryable: false },
  transient: { exitCode: ExitCode.transient, category: 'transient', retryable: true },
  unavailable: { exitCode: ExitCode.unavailable, category: 'unavailable', retryable: true },
  config: { exitCode: ExitCode.config, category: 'config', retryable: false },
  internal: { exitCode: ExitCode.internal, category: 'spark', retryable: false },
};

function classMatches(pattern: string, errorClass: string): boolean {
  if (pattern.includes('*')) {
    const re = new RegExp(
      `^${pattern
        .split('*')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    return re.test(errorClass);
  }
  return errorClass === pattern || errorClass.startsWith(`${pattern}.`);
}

export function ruleFor(f: ClassifiedFailure): ErrorRule {
  const code = grpcCodeName(f.grpcCode);
  const errorClasses = [...(f.errorClass ? [f.errorClass] : []), ...causeErrorClasses(f)];
  for (const rule of errorRules) {
    if (rule.grpc && !rule.grpc.includes(code as GrpcCodeName)) continue;
    if (rule.errorClass || rule.exception) {
      const byClass = !!rule.errorClass?.some((p) => errorClasses.some((c) => classMatches(p, c)));
      const byException = !!rule.exception && [...f.classes, f.message, ...(f.causes ?? [])].some((s) => rule.exception?.test(s));
      if (!byClass && !byException) continue;
    }
    if (rule.when && !rule.when(f)) continue;
    return rule;
  }
  throw new Error('errorRules has no catch-all rule');
}

/** A failure reported by (or on the way to) the Spark Connect server. */
export class SparkError extends LakehouseError {
  readonly exitCode: ExitCode;
  readonly category: ErrorCategory;
  readonly code: string;
  override readonly retryable: boolean;
  readonly grpcCode: number;
  readonly grpcCodeName: string;
  readonly errorClass: string | undefined;
  readonly sqlState: string | undefined;
  readonly messageParameters: Readonly<Record<string, string>>;
  readonly classes: readonly string[];
  readonly serverMessage: string;
  readonly errorId: string | undefined;
  readonly causes: readonly string[];
  /** How to fix it, for the failures we can explain (bad source files). */
  readonly hint: string | undefined;
  /** The config key the failed statement came from, when the caller knows it (see `at`). */
  private configPath: string | undefined;

  constructor(failure: SparkFailure, options?: { cause?: unknown }) {
    const rule = ruleFor(failure);
    const explained = rule.explain?.(failure);
    super(explained ? `${explained.message}. Fix: ${explained.hint}` : describe(failure), options);
    this.hint = explained?.hint;
    const o = outcomes[rule.outcome];
    this.exitCode = o.exitCode;
    this.category = o.category;
    this.retryable = o.retryable;
    this.code = rule.code;
    this.grpcCode = failure.grpcCode;
    this.grpcCodeName = grpcCodeName(failure.grpcCode);
    this.errorClass = failure.errorClass;
    this.sqlState = failure.sqlState;
    this.messageParameters = failure.messageParameters;
    this.classes = failure.classes;
    this.serverMessage = failure.message;
    this.errorId = failure.errorId;
    this.causes = failure.causes;
  }

  /**
   * Name the config key a config-class failure comes from (a table create refused for its
   * location is the job's `target.table`): the message and the report carry it, like a
   * ConfigError's. Other failures are not the config's doing and stay unlocated.
   */
  at(configPath: string): this {
    if (this.category !== 'config' || this.configPath !== undefined) return this;
    this.configPath = configPath;
    this.message = `${configPath}: ${this.message}`;
    return this;
  }

  override report(): ErrorReport {
    return {
      ...super.report(),
      ...(this.configPath ? { path: this.configPath } : {}),
      ...(this.errorClass ? { sparkErrorClass: this.errorClass } : {}),
      ...(this.sqlState ? { sqlState: this.sqlState } : {}),
      ...(this.hint ? { hint: this.hint } : {}),
    };
  }
}

function describe(f: SparkFailure): string {
  const code = grpcCodeName(f.grpcCode);
  const retried = f.attempts && f.attempts > 1 ? ` after ${f.attempts} attempts` : '';
  if (code === 'UNAVAILABLE') return `Spark Connect server unreachable${retried}: ${f.message}`;
  if (code === 'DEADLINE_EXCEEDED') return `Spark Connect call timed out${retried}: ${f.message}`;
  if (code === 'UNAUTHENTICATED' || code === 'PERMISSION_DENIED') return `Spark Connect refused the credentials (${code}): ${f.message}`;
  if (f.errorClass && !f.message.startsWith(`[${f.errorClass}]`)) return `[${f.errorClass}] ${f.message}`;
  return f.message || `Spark Connect call failed with ${code}`;
}

// ---------------------------------------------------------------------------------------------
// Decoding

/** The shape of a grpc-js call error. */
export interface GrpcCallError {
  code: number;
  details: string;
  metadata?: Metadata;
}

export function isGrpcCallError(e: unknown): e is GrpcCallError {
  return typeof e === 'object' && e !== null && typeof (e as GrpcCallError).code === 'number' && typeof (e as GrpcCallError).details === 'string';
}

function parseJson<T>(text: string | undefined, guard: (v: unknown) => v is T): T | undefined {
  if (text === undefined) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return guard(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isStringRecord = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');

/** Read the status, ErrorInfo and RetryInfo of a failed call. Never throws. */
export function failureFromGrpc(e: GrpcCallError): SparkFailure {
  const failure: SparkFailure = {
    grpcCode: e.code,
    message: scrub(e.details ?? ''),
    messageParameters: {},
    classes: [],
    causes: [],
  };
  const raw = e.metadata?.get('grpc-status-details-bin')[0];
  if (!(raw instanceof Uint8Array)) return failure;
  try {
    const st = fromBinary(StatusSchema, raw);
    if (st.message) failure.message = scrub(st.message);
    for (const any of st.details) {
      const info = anyUnpack(any, ErrorInfoSchema);
      if (info) {
        const m = info.metadata;
        if (m.errorClass) failure.errorClass = m.errorClass;
        if (m.sqlState) failure.sqlState = m.sqlState;
        if (m.errorId) failure.errorId = m.errorId;
        failure.messageParameters = scrubRecord(parseJson(m.messageParameters, isStringRecord) ?? {});
        failure.classes = parseJson(m.classes, isStringArray) ?? (info.reason ? [info.reason] : []);
        continue;
      }
      const retry = anyUnpack(any, RetryInfoSchema);
      if (retry?.retryDelay) {
        failure.retryDelayMs = Number(retry.retryDelay.seconds) * 1000 + Math.floor(retry.retryDelay.nanos / 1e6);
      }
    }
  } catch {
    // A status we cannot decode still has its code and message.
  }
  return failure;
}

function scrubRecord(r: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, scrub(v)]));
}

/** Fold FetchErrorDetails' answer (the full, untruncated chain) into a failure. */
export function withErrorDetails(f: SparkFailure, details: FetchErrorDetailsResponse): SparkFailure {
  if (details.errors.length === 0) return f;
  const rootIdx = details.rootErrorIdx ?? 0;
  const root = details.errors[rootIdx];
  if (!root) return f;
  const out: SparkFailure = { ...f, message: scrub(root.message) || f.message };
  if (root.errorTypeHierarchy.length) out.classes = [...root.errorTypeHierarchy];
  const t = root.sparkThrowable;
  if (t?.errorClass) out.errorClass = t.errorClass;
  if (t?.sqlState) out.sqlState = t.sqlState;
  if (t && Object.keys(t.messageParameters).length) out.messageParameters = scrubRecord({ ...t.messageParameters });
  const causes: string[] = [];
  const seen = new Set([rootIdx]);
  for (let i = root.causeIdx; i !== undefined && !seen.has(i);) {
    seen.add(i);
    const c = details.errors[i];
    if (!c) break;
    causes.push(scrub(`${c.errorTypeHierarchy[0] ?? 'Error'}: ${c.message}`));
    i = c.causeIdx;
  }
  out.causes = causes;
  return out;
}

export function errorClassOf(e: unknown): string | undefined {
  if (e instanceof SparkError) return e.errorClass;
  if (!isGrpcCallError(e)) return undefined;
  return failureFromGrpc(e).errorClass ?? /\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]/.exec(e.details)?.[1];
}

/**
 * Whether a failed call may be retried: the server was unreachable, another reattach took over
 * the result stream (INVALID_CURSOR.DISCONNECTED), or the server asked for a retry (RetryInfo).
 */
export function isRetryableGrpcError(e: unknown): boolean | { minDelayMs: number } {
  if (!isGrpcCallError(e)) return false;
  const f = failureFromGrpc(e);
  if (f.retryDelayMs !== undefined) return { minDelayMs: f.retryDelayMs };
  if (e.code === GrpcStatus.UNAVAILABLE) return true;
  const cls = f.errorClass ?? '';
  return cls === 'INVALID_CURSOR.DISCONNECTED' || (e.code === GrpcStatus.INTERNAL && e.details.includes('INVALID_CURSOR.DISCONNECTED'));
}

/** The operation was cancelled through its AbortSignal without a LakehouseError as the reason. */
export class OperationCancelledError extends LakehouseError {
  readonly exitCode = ExitCode.transient;
  readonly category = 'cancelled' as const;
  readonly code = 'SPARK_OPERATION_CANCELLED';
  override readonly retryable = true;
  constructor(
    readonly operationId: string,
    reason?: unknown,
  ) {
    super(`Spark operation ${operationId} cancelled${reason instanceof Error ? `: ${reason.message}` : typeof reason === 'string' ? `: ${reason}` : ''}`, {
      cause: reason,
    });
  }
}
