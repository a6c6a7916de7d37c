/**
 * What a step carrying config-supplied logic may contain, as the analyzed plan names it. One list,
 * fail closed: a plan node or function missing here is refused, so a Spark upgrade or a new
 * template that needs one more name gets a clear refusal (and an entry here), never a silent pass.
 * Documented in docs/security-policy.md.
 */

/**
 * Logical plan nodes that only transform rows. Relation leaves are judged separately (policy.ts):
 * their kind and identity or files. `View` and `CTERelationRef` are allowed because the plan
 * shows what they expand to, and that is judged like any other part of the plan.
 */
export const ALLOWED_NODES: ReadonlySet<string> = new Set([
  'Project',
  'Filter',
  'Aggregate',
  'Window',
  'Join',
  'Sort',
  'GlobalLimit',
  'LocalLimit',
  'Offset',
  'Deduplicate',
  'Distinct',
  'Union',
  'Intersect',
  'Except',
  'Expand',
  'SubqueryAlias',
  'WithCTE',
  'CTERelationDef',
  'CTERelationRef',
  'View',
  'PipeOperator',
  'Repartition',
  'RepartitionByExpression',
  'LateralJoin',
  // scd2-dim-load: a stored version becomes its start and end points (explode of a literal-shaped array)
  'Generate',
  // relation leaves (judged in policy.ts)
  'RelationV2',
  'Relation',
  'LocalRelation',
  'Range',
  'OneRowRelation',
]);

/**
 * Functions and expressions as Catalyst prints them in analyzed plans (`prettyName`, lower case).
 * Two groups: what our templates' own plans use, and the pure built-ins a tenant expression may use.
 * Nothing here reads files, tables, the environment or the JVM (no reflect, java_method,
 * input_file_name, read_files, current_user, assert_true/raise_error, UDFs, lambdas).
 */
export const TEMPLATE_FUNCTIONS: readonly string[] = [
  // window functions and their specification
  'row_number',
  'rank',
  'dense_rank',
  'windowspecdefinition',
  'specifiedwindowframe',
  'unboundedpreceding$',
  'unboundedfollowing$',
  'currentrow$',
  // aggregates
  'count',
  'sum',
  'min',
  'max',
  'avg',
  'count_if',
  'first',
  'last',
  'any_value',
  'bool_and',
  'bool_or',
  // rows, structs and JSON
  'to_json',
  'struct',
  'named_struct',
  'xxhash64',
  'coalesce',
  'isnull',
  'isnotnull',
  'if',
  'nvl',
  'ifnull',
  'nullif',
  'cast',
  'try_cast',
  'outer',
  'current_timestamp',
  'current_date',
  'make_dt_interval',
  'make_interval',
  // how the analyzed plan prints some expressions: `if (c) a else b`, `x IN (…)`, `(a AND (b))`,
  // `NOT (…)`, `CASE WHEN (…)`, type names in casts (`decimal(12,2)`), a time zone (`Some(Etc/UTC)`)
  'if',
  'in',
  'and',
  'or',
  'not',
  'case',
  'when',
  'then',
  'else',
  'decimal',
  'varchar',
  'char',
  'some',
  // scd2-dim-load: versions from points (lag, lead, explode), the surrogate key, type-1 values, signatures
  'lag',
  'lead',
  'explode',
  'xxhash64',
  'max_by',
  'substring_index',
  // dv-satellite: a key's previous change in a batch (lag, above)
];

export const EXPRESSION_FUNCTIONS: readonly string[] = [
  // strings
  'lower',
  'upper',
  'trim',
  'ltrim',
  'rtrim',
  'btrim',
  'substring',
  'substr',
  'left',
  'right',
  'length',
  'char_length',
  'concat',
  'concat_ws',
  'replace',
  'lpad',
  'rpad',
  'startswith',
  'endswith',
  'contains',
  'instr',
  'locate',
  'initcap',
  'reverse',
  'split_part',
  'translate',
  'format_string',
  'repeat',
  'md5',
  'sha1',
  'sha2',
  'hash',
  'crc32',
  // numbers
  'abs',
  'round',
  'bround',
  'floor',
  'ceil',
  'ceiling',
  'greatest',
  'least',
  'mod',
  'pmod',
  'sign',
  'signum',
  'sqrt',
  'power',
  'pow',
  'exp',
  'ln',
  'log',
  'log10',
  'positive',
  'negative',
  'try_add',
  'try_subtract',
  'try_multiply',
  'try_divide',
  'isnan',
  'nanvl',
  // dates and times
  'to_date',
  'to_timestamp',
  'date_add',
  'date_sub',
  'datediff',
  'add_months',
  'months_between',
  'date_trunc',
  'trunc',
  'date_format',
  'year',
  'quarter',
  'month',
  'day',
  'dayofmonth',
  'dayofweek',
  'dayofyear',
  'weekofyear',
  'hour',
  'minute',
  'second',
  'last_day',
  'next_day',
  'make_date',
  'make_timestamp',
  'unix_timestamp',
  'from_unixtime',
  'timestamp_seconds',
  'timestamp_millis',
  'from_utc_timestamp',
  'to_utc_timestamp',
  'extract',
  'date_part',
  // conditions and collections of literals
  'in',
  'between',
  'nvl2',
  'array',
  'array_contains',
  'size',
  'element_at',
];

export const ALLOWED_FUNCTIONS: ReadonlySet<string> = new Set([...TEMPLATE_FUNCTIONS, ...EXPRESSION_FUNCTIONS]);

/**
 * What Spark runs as a java.util.regex pattern: LIKE (`like` stands for the infix `x LIKE p` too,
 * see plan-text.ts), RLIKE/REGEXP and the regexp_ family, split. A pattern that backtracks (several
 * `%` in a LIKE, nested quantifiers in a regex) can take hours on one row, in the optimizer already
 * when both sides are literals, and no cancel stops a regex match: one tenant would keep a core of
 * the shared server busy after its run ended. None is on the allow-list; this list only explains the
 * refusal. Config expressions compile LIKE to string functions (src/spark/plan/config-expression.ts).
 */
export const REGEX_FUNCTIONS: ReadonlySet<string> = new Set([
  'like',
  'ilike',
  'rlike',
  'likeall',
  'likeany',
  'notlikeall',
  'notlikeany',
  'regexp',
  'regexp_like',
  'regexp_replace',
  'regexp_extract',
  'regexp_extract_all',
  'regexp_count',
  'regexp_instr',
  'regexp_substr',
  'split',
  'str_to_map',
]);

/** Data source formats a step may read by path (the files must still be the tenant's). */
export const ALLOWED_SOURCE_FORMATS: ReadonlySet<string> = new Set(['parquet', 'delta', 'jdbc']);
