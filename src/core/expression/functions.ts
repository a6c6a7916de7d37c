/**
 * The functions a config expression may call: pure, deterministic built-ins of Spark SQL that see
 * only their arguments. Each has fixed arity bounds, checked at validate. A function is missing here
 * on purpose when it reads anything but its arguments (files, the session, the user, the clock),
 * varies between runs (rand, uuid), runs code (reflect, java_method, UDFs), takes a lambda or
 * aggregates rows. docs/expressions.md lists them; an integration test runs each one on Spark.
 */

export interface FunctionSpec {
  readonly min: number;
  /** `Infinity` for variadic functions. */
  readonly max: number;
}

const f = (min: number, max = min): FunctionSpec => Object.freeze({ min, max });
const VARIADIC = Infinity;

export const FUNCTIONS: ReadonlyMap<string, FunctionSpec> = new Map([
  // numbers
  ['abs', f(1)],
  ['ceil', f(1, 2)],
  ['floor', f(1, 2)],
  ['round', f(1, 2)],
  ['sign', f(1)],
  ['sqrt', f(1)],
  ['exp', f(1)],
  ['ln', f(1)],
  ['log10', f(1)],
  ['power', f(2)],
  ['mod', f(2)],
  ['pmod', f(2)],
  ['greatest', f(2, VARIADIC)],
  ['least', f(2, VARIADIC)],
  ['isnan', f(1)],
  // NULLs and conditions
  ['coalesce', f(1, VARIADIC)],
  ['nullif', f(2)],
  ['nvl', f(2)],
  ['ifnull', f(2)],
  ['nvl2', f(3)],
  ['if', f(3)],
  // strings
  ['lower', f(1)],
  ['upper', f(1)],
  ['initcap', f(1)],
  ['trim', f(1)],
  ['ltrim', f(1)],
  ['rtrim', f(1)],
  ['length', f(1)],
  ['char_length', f(1)],
  ['substring', f(2, 3)],
  ['substr', f(2, 3)],
  ['left', f(2)],
  ['right', f(2)],
  ['concat', f(1, VARIADIC)],
  ['concat_ws', f(1, VARIADIC)],
  ['replace', f(2, 3)],
  ['lpad', f(2, 3)],
  ['rpad', f(2, 3)],
  ['repeat', f(2)],
  ['reverse', f(1)],
  ['startswith', f(2)],
  ['endswith', f(2)],
  ['contains', f(2)],
  ['instr', f(2)],
  ['locate', f(2, 3)],
  ['split_part', f(3)],
  ['md5', f(1)],
  ['sha2', f(2)],
  // dates and timestamps
  ['to_date', f(1, 2)],
  ['to_timestamp', f(1, 2)],
  ['date_format', f(2)],
  ['date_add', f(2)],
  ['date_sub', f(2)],
  ['add_months', f(2)],
  ['datediff', f(2)],
  ['make_date', f(3)],
  ['last_day', f(1)],
  ['year', f(1)],
  ['quarter', f(1)],
  ['month', f(1)],
  ['day', f(1)],
  ['dayofmonth', f(1)],
  ['dayofweek', f(1)],
  ['dayofyear', f(1)],
  ['weekofyear', f(1)],
  ['hour', f(1)],
  ['minute', f(1)],
  ['second', f(1)],
  ['date_trunc', f(2)],
  ['trunc', f(2)],
]);

/** Functions that call into the JVM by reflection: Java code on the shared server. */
export const REFLECTION_FUNCTIONS: readonly string[] = ['reflect', 'java_method', 'try_reflect'];

/** Functions that tell about the server, the session or the files read, not about the row. */
export const DISCLOSING_FUNCTIONS: readonly string[] = [
  'input_file_name',
  'input_file_block_start',
  'input_file_block_length',
  'current_user',
  'user',
  'session_user',
  'current_database',
  'current_schema',
  'current_catalog',
  'version',
  'spark_partition_id',
];

/**
 * Functions Spark runs as a java.util.regex pattern, which backtracks for hours on one row and
 * ignores a cancel (docs/security.md): gold's first wall refuses them by name. `like`/`ilike` as
 * functions too: the LIKE operator with a literal pattern is what the server's judge makes linear.
 */
export const REGEX_FUNCTIONS: readonly string[] = [
  'like',
  'ilike',
  'rlike',
  'regexp',
  'likeall',
  'likeany',
  'notlikeall',
  'notlikeany',
  'regexp_like',
  'regexp_replace',
  'regexp_extract',
  'regexp_extract_all',
  'regexp_count',
  'regexp_instr',
  'regexp_substr',
  'split',
  'str_to_map',
];

/** Why some well-known functions are refused, for a clearer message than "not allowed". */
export const REFUSED_FUNCTIONS: ReadonlyMap<string, string> = new Map([
  ...REFLECTION_FUNCTIONS.map((n) => [n, 'reflection runs Java code on the shared server'] as const),
  ...DISCLOSING_FUNCTIONS.map((n) => [n, 'it discloses the server and session, not the row'] as const),
  ...['rand', 'random', 'randn', 'uuid', 'shuffle', 'monotonically_increasing_id', 'current_date', 'current_timestamp', 'now', 'curdate', 'localtimestamp'].map(
    (n) => [n, 'it is not deterministic: a rerun must select the same rows'] as const,
  ),
  ...['count', 'sum', 'avg', 'min', 'max', 'collect_list', 'collect_set', 'first', 'last'].map((n) => [n, 'aggregates see more than one row'] as const),
  ...['transform', 'filter', 'exists', 'forall', 'aggregate', 'reduce', 'zip_with', 'map_filter', 'transform_keys', 'transform_values'].map(
    (n) => [n, 'lambdas are not part of the language'] as const,
  ),
]);
