/**
 * Functions Spark runs as a java.util.regex pattern, by name, for the first wall of gold SQL to
 * refuse early (src/jobs/gold/transform-sql.ts). The allow-list that decides lives on the server
 * (spark-plugins/, LogicClasses), by expression class; there LIKE and its forms with a literal
 * pattern are rewritten into linear string functions, and the rest is refused. A pattern that
 * backtracks runs for hours on one row and no cancel stops it.
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
