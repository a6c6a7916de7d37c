import { DISCLOSING_FUNCTIONS, REFLECTION_FUNCTIONS, REGEX_FUNCTIONS } from '../../core/expression/functions.js';
import { NAME_PATTERN, quoteIdentifier, quoteName } from '../../core/naming.js';
import type { PositionMapper, SqlOrigin, SqlPosition } from '../template.js';

/**
 * The first wall around a tenant's transform SQL (gold-publish): a tokenizer that ends every token
 * where Spark's lexer does (string literals with backslash escapes, doubled quotes and raw `r'…'`
 * strings, quoted identifiers, numbers, `--` and nested bracketed comments), a screen over its tokens,
 * and the rewrite of the tenant's layer-qualified table names (`silver.orders`) into the tenant's own
 * tables (`lake`.`acme_silver`.`orders`). Never a regular expression over raw text: text inside a
 * literal or a quoted identifier is never mistaken for a table, a keyword or a statement separator.
 *
 * The screen is deliberately strict and judges structure only: one query (SELECT, WITH, FROM-first,
 * VALUES or TABLE), no `;`, no hints, no `${…}` (Spark substitutes configuration values into SQL
 * text, inside literals too), no positional `?` parameters, no statement keywords, no script
 * transforms (`USING 'script'`), `LIKE` only with a literal pattern, and every table a layer-qualified
 * name of the tenant's silver or gold layer, a table of a namespace the platform grants it by its
 * full name, or a CTE/step name. A quoted identifier is an identifier like any other: a backquoted
 * function name is judged as the function. Comments are dropped from the text sent, so Spark never
 * sees one. What the query may compute (functions, plan nodes) and what it reads in the end is judged
 * again on the server by the tenant policy (src/spark/policy), which does not rely on this screen.
 */

export type Token =
  | { readonly kind: 'ws'; readonly text: string; readonly start: number }
  | { readonly kind: 'comment'; readonly text: string; readonly start: number }
  | { readonly kind: 'word'; readonly text: string; readonly value: string; readonly quoted: boolean; readonly start: number }
  | { readonly kind: 'string'; readonly text: string; readonly start: number }
  | { readonly kind: 'number'; readonly text: string; readonly start: number }
  | { readonly kind: 'param'; readonly text: string; readonly name: string; readonly start: number }
  | { readonly kind: 'op'; readonly text: string; readonly start: number };

/** The layers a transform reads: gold is built from silver and from gold itself. */
export const READABLE_LAYERS = ['silver', 'gold'] as const;
export type ReadableLayer = (typeof READABLE_LAYERS)[number];

/** Named parameters the runner binds: each becomes a DATE literal of a checked date (rewriteTables says why not named arguments). */
export const TRANSFORM_PARAMETERS = ['logical_date', 'range_start', 'range_end'] as const;
export type TransformParameter = (typeof TRANSFORM_PARAMETERS)[number];

/** Keywords that only statements other than a query use: their presence is refused outright. */
const STATEMENT_WORDS = new Set([
  'insert',
  'update',
  'delete',
  'merge',
  'create',
  'drop',
  'alter',
  'truncate',
  'execute',
  'immediate',
  'call',
  'grant',
  'revoke',
  'msck',
  'cache',
  'uncache',
  'refresh',
  'load',
  'set',
  'reset',
  'use',
  'declare',
  'begin',
  'optimize',
  'vacuum',
  'restore',
  'add',
  'describe',
  'show',
  'explain',
  'analyze',
  'export',
  'import',
  'comment',
]);

/** Pipe operators (`|> DROP a`, `|> SET a = 1`) whose keyword is also a statement's. */
const PIPE_OPERATOR_WORDS = new Set(['drop', 'set']);

/**
 * Functions refused already here, for a clear early message (the policy's allow-list refuses these
 * and everything else not on it anyway): reflection into the JVM and what discloses the server or
 * session (the expression language's lists), reading files or tables by name, identifiers computed
 * from strings, and failing on purpose.
 */
const REFUSED_CALLS = new Set([
  ...REFLECTION_FUNCTIONS,
  ...DISCLOSING_FUNCTIONS,
  'identifier',
  'read_files',
  'assert_true',
  'raise_error',
  'from_avro',
  'from_protobuf',
  'table_changes',
  'stream',
]);

/** Functions Spark runs as a regular expression (core/expression/functions.ts). */
const REGEX_CALLS = new Set(REGEX_FUNCTIONS);

/** Operators Spark always runs as regular expressions. */
const REGEX_OPERATORS = new Set(['rlike', 'regexp']);

/** What may follow a LIKE pattern (a literal): anything else would make the pattern an expression. */
const PATTERN_END = new Set([
  'and',
  'or',
  'escape',
  'then',
  'else',
  'end',
  'when',
  'as',
  'from',
  'where',
  'group',
  'having',
  'order',
  'limit',
  'offset',
  'union',
  'intersect',
  'except',
  'minus',
  'window',
  'qualify',
  'sort',
  'cluster',
  'distribute',
  'join',
  'inner',
  'left',
  'right',
  'full',
  'cross',
  'natural',
  'semi',
  'anti',
  'lateral',
  'pivot',
  'unpivot',
  'select',
]);

/** Clause keywords that end a FROM list at their nesting level (a later `,` no longer starts a table). */
const FROM_LIST_END = new Set([
  'where',
  'group',
  'having',
  'order',
  'limit',
  'offset',
  'window',
  'qualify',
  'union',
  'intersect',
  'except',
  'minus',
  'select',
  'cluster',
  'distribute',
  'sort',
  'pivot',
  'unpivot',
  'lateral',
]);

/** Words that start a query (anything else inside parentheses in a table position starts a relation: a table). */
const QUERY_STARTS = new Set(['select', 'with', 'from', 'table', 'values', 'map', 'reduce']);

/** Path-based table prefixes (`delta.`/path``): named in the refusal, they are never a layer. */
const PATH_FORMATS = new Set(['delta', 'parquet', 'csv', 'json', 'orc', 'text', 'avro', 'binaryfile', 'iceberg', 'jdbc', 'hive']);

export interface TableRef {
  readonly layer: ReadableLayer;
  readonly table: string;
}

/** A table of a namespace the platform grants the tenant for reading (`tenants.<id>.read-namespaces`), by its full name. */
export interface GrantedTableRef {
  readonly catalog: string;
  readonly namespace: string;
  readonly table: string;
}

/** Where a table reference sits in the token list (first and last token, inclusive). */
export interface TableSpan {
  readonly first: number;
  readonly last: number;
  readonly ref: TableRef | GrantedTableRef;
}

type Word = Extract<Token, { kind: 'word' }>;

/** A screen's answer to one problem: what, and where in the text (an offset), when it is one place. */
export interface ScreenProblem {
  readonly message: string;
  readonly at?: number;
}

export type Screened =
  | {
      readonly ok: true;
      /** The tenant's text, as written. */
      readonly sql: string;
      readonly tokens: readonly Token[];
      readonly tables: readonly TableRef[];
      /** Tables of granted namespaces the query reads by their full names. */
      readonly granted: readonly GrantedTableRef[];
      readonly spans: readonly TableSpan[];
      readonly parameters: readonly TransformParameter[];
    }
  | { readonly ok: false; readonly problems: readonly string[] };

export interface ScreenOptions {
  /** Earlier transform steps, which the query may read by name. */
  readonly known?: readonly string[];
  /**
   * The namespaces (`catalog.namespace`) the platform grants the tenant for reading: a table of one
   * is read by its full name. Undefined where the grants are not known yet (the schema): a
   * three-part name then passes the screen and is checked when the plan is built, with the grants.
   */
  readonly readNamespaces?: readonly string[];
}

class Refusal {
  constructor(
    readonly message: string,
    readonly at: number,
  ) {}
}

/** Split SQL text into tokens; a problem (unterminated literal or comment, a hint, `;` …) stops it. */
export function tokenize(sql: string): { tokens: Token[] } | { problem: string; at: number } {
  try {
    return { tokens: lex(sql) };
  } catch (e) {
    if (e instanceof Refusal) return { problem: e.message, at: e.at };
    throw e;
  }
}

function lex(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const at = (k: number) => sql[k] ?? '';
  const refuse = (message: string, where = i): never => {
    throw new Refusal(message, where);
  };
  while (i < sql.length) {
    const c = sql[i]!;
    const start = i;
    if (/[ \t\r\n\f]/.test(c)) {
      while (i < sql.length && /[ \t\r\n\f]/.test(sql[i]!)) i++;
      tokens.push({ kind: 'ws', text: sql.slice(start, i), start });
      continue;
    }
    if (c === '-' && at(i + 1) === '-') {
      // Spark's SIMPLE_COMMENT: to the end of the line, a backslash before the line break continuing it.
      i += 2;
      while (i < sql.length) {
        if (sql[i] === '\\' && sql[i + 1] === '\n') i += 2;
        else if (sql[i] === '\r' || sql[i] === '\n') break;
        else i++;
      }
      if (sql[i] === '\r') i++;
      if (sql[i] === '\n') i++;
      tokens.push({ kind: 'comment', text: sql.slice(start, i), start });
      continue;
    }
    if (c === '/' && at(i + 1) === '*') {
      if (at(i + 2) === '+') refuse('hints (/*+ … */) are not allowed: the server plans the query');
      // Spark's BRACKETED_COMMENT: nested, each /* (but /*+) opening one more level.
      let depth = 1;
      i += 2;
      while (depth > 0) {
        if (i >= sql.length) refuse('the comment is not closed', start);
        if (sql.startsWith('*/', i)) {
          depth--;
          i += 2;
        } else if (sql.startsWith('/*', i) && at(i + 2) !== '+') {
          depth++;
          i += 2;
        } else i++;
      }
      tokens.push({ kind: 'comment', text: sql.slice(start, i), start });
      continue;
    }
    if (c === '$' && at(i + 1) === '{') refuse('${…} is not allowed (Spark substitutes configuration values into SQL text)');
    if (c === "'" || c === '"') {
      // A raw string (no escapes inside) is r or R directly before the quote, where Spark's lexer
      // starts a token: after a character that cannot continue an identifier. The r then ends the
      // token before it (the word r, or `:r`), which gives it up to the literal.
      const raw = /[rR]/.test(at(i - 1)) && !IDENTIFIER_CHAR.test(at(i - 2));
      const end = stringEnd(sql, i, raw);
      if (end < 0) refuse('the string literal is not closed');
      const text = sql.slice(i, end);
      if (text.includes('${')) refuse('${…} is not allowed, not even in a literal (Spark substitutes configuration values into SQL text)');
      let from = i;
      if (raw) {
        const prev = tokens.pop()!;
        const rest = prev.text.slice(0, -1);
        if (rest) tokens.push({ kind: 'op', text: rest, start: prev.start });
        from = i - 1;
      }
      tokens.push({ kind: 'string', text: sql.slice(from, end), start: from });
      i = end;
      continue;
    }
    if (c === '`') {
      let j = i + 1;
      let value = '';
      for (;;) {
        if (j >= sql.length) refuse('the quoted identifier is not closed');
        if (sql[j] === '`') {
          if (sql[j + 1] === '`') {
            value += '`';
            j += 2;
            continue;
          }
          break;
        }
        value += sql[j];
        j++;
      }
      i = j + 1;
      if (value.includes('${')) refuse('${…} is not allowed (Spark substitutes configuration values into SQL text)', start);
      tokens.push({ kind: 'word', text: sql.slice(start, i), value, quoted: true, start });
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      while (i < sql.length && /[A-Za-z0-9_]/.test(sql[i]!)) i++;
      const text = sql.slice(start, i);
      tokens.push({ kind: 'word', text, value: text.toLowerCase(), quoted: false, start });
      continue;
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(at(i + 1)) && tokens.at(-1)?.kind !== 'word')) {
      // As Spark's lexer: a '.' or an exponent's sign belongs to a number only with digits after
      // it, and identifier characters continue it (1e, 12L, 1.5BD); `1e+r'…'` is 1e, + and a raw
      // string, `1e+reflect(` is 1e, + and a call, never one token hiding the rest.
      NUMBER.lastIndex = i;
      i += NUMBER.exec(sql)![0].length;
      tokens.push({ kind: 'number', text: sql.slice(start, i), start });
      continue;
    }
    const two = sql.slice(i, i + 2);
    if (two === '::' || two === '||' || two === '|>') {
      i += 2;
      tokens.push({ kind: 'op', text: two, start });
      continue;
    }
    if (c === ':' && /[A-Za-z_]/.test(at(i + 1))) {
      i++;
      while (i < sql.length && /[A-Za-z0-9_]/.test(sql[i]!)) i++;
      tokens.push({ kind: 'param', text: sql.slice(start, i), name: sql.slice(start + 1, i), start });
      continue;
    }
    if (c === ';') refuse('";" is not allowed: the transform is exactly one query');
    if (c === '?') refuse('positional parameters (?) are not allowed; the runner binds :logical_date, :range_start and :range_end');
    if (/[^\x21-\x7e]/.test(c)) refuse('only ASCII is allowed outside string literals, quoted identifiers and comments');
    i++;
    tokens.push({ kind: 'op', text: c, start });
  }
  return tokens;
}

/** A character that continues an identifier or a number in Spark's lexer (IDENTIFIER: (LETTER | DIGIT | '_')+). */
const IDENTIFIER_CHAR = /^[A-Za-z0-9_]$/;
/** A number token, from where the tokenizer found a digit (or a '.' before one). */
const NUMBER = /(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[A-Za-z0-9_]*/y;

/** The index after the string literal starting at `i` (-1 when it is not closed). */
function stringEnd(sql: string, i: number, raw: boolean): number {
  const quote = sql[i]!;
  let j = i + 1;
  while (j < sql.length) {
    const ch = sql[j]!;
    if (!raw && ch === '\\') {
      j += 2;
      continue;
    }
    if (ch === quote) {
      if (!raw && sql[j + 1] === quote) {
        j += 2;
        continue;
      }
      return j + 1;
    }
    j++;
  }
  return -1;
}

/** Line and column (both from 1) of an offset in a text. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  return lineIndex(text)(offset);
}

/** Line and column of any offset of `text`, each found by a binary search over the line starts. */
function lineIndex(text: string): (offset: number) => { line: number; column: number } {
  const starts = [0];
  for (let k = text.indexOf('\n'); k >= 0; k = text.indexOf('\n', k + 1)) starts.push(k + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - starts[lo]! + 1 };
  };
}

/** The offset of a line (from 1) and column (from 0, as Spark's parse errors count it) in a text. */
export function offsetOf(text: string, line: number, column0: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf('\n', offset);
    if (nl < 0) return text.length;
    offset = nl + 1;
  }
  return Math.min(offset + column0, text.length);
}

/** At most this many problems of one query are reported: a hostile text gets a readable answer. */
const MAX_PROBLEMS = 20;

/** Problems with their places: `line 3, column 14: …`. */
function located(sql: string, problems: readonly ScreenProblem[]): string[] {
  const where = lineIndex(sql);
  const out = [
    ...new Set(
      problems.map((p) => {
        if (p.at === undefined) return p.message;
        const { line, column } = where(p.at);
        return `line ${line}, column ${column}: ${p.message}`;
      }),
    ),
  ];
  return out.length <= MAX_PROBLEMS ? out : [...out.slice(0, MAX_PROBLEMS), `${out.length - MAX_PROBLEMS} more problem(s) not shown`];
}

/**
 * Screen one query. `known` are the names the query may use as tables besides layer-qualified ones
 * (earlier transform steps); its own CTE names are found in it.
 */
export function screenTransform(sql: string, options: ScreenOptions | readonly string[] = {}): Screened {
  const opts: ScreenOptions = Array.isArray(options) ? { known: options as readonly string[] } : (options as ScreenOptions);
  const lexed = tokenize(sql);
  if ('problem' in lexed) return { ok: false, problems: located(sql, [{ message: lexed.problem, at: lexed.at }]) };
  const tokens = lexed.tokens;
  // The significant tokens, with their index in `tokens` (where a rewrite replaces them).
  const sig = tokens.flatMap((t, i) => (t.kind === 'ws' || t.kind === 'comment' ? [] : [{ t, i }]));
  const tok = (k: number): Token | undefined => sig[k]?.t;
  const problems: ScreenProblem[] = [];
  const refuse = (message: string, t: Token | undefined) => problems.push({ message, ...(t ? { at: t.start } : {}) });
  let lead = 0;
  while (tok(lead)?.text === '(') lead++;
  const first = tok(lead);
  if (!first || first.kind !== 'word' || first.quoted || !['select', 'with', 'from', 'values', 'table'].includes(first.value))
    return {
      ok: false,
      problems: located(sql, [{ message: 'must be one query starting with SELECT, WITH, FROM, VALUES or TABLE', ...(first ? { at: first.start } : {}) }]),
    };

  // CTE names, each where Spark sees it: earlier steps everywhere, a WITH's names in their scope only.
  const steps = new Set((opts.known ?? []).map((k) => k.toLowerCase()));
  const scopes = cteScopes(sig.map(({ t }) => t));
  const isCte = (name: string, at: number) => steps.has(name) || scopes.some((s) => s.name === name && s.from <= at && at < s.to);
  for (let k = 0; k < sig.length; k++) {
    const t = tok(k)!;
    if (t.kind === 'param' && !(TRANSFORM_PARAMETERS as readonly string[]).includes(t.name))
      refuse(`unknown parameter :${t.name} (the runner binds ${TRANSFORM_PARAMETERS.map((p) => `:${p}`).join(', ')})`, t);
    if (t.kind !== 'word') continue;
    const next = tok(k + 1);
    const called = next?.text === '(';
    // A quoted name is a name: `reflect`(…) is the function reflect (Spark resolves names in any case).
    const fnName = t.quoted ? t.value.toLowerCase() : t.value;
    const fnNames = [fnName, fnName.split('.').at(-1)!];
    if (called && fnNames.includes('identifier')) refuse('IDENTIFIER(…) is not allowed: tables are named as silver.<table> or gold.<table>', t);
    else if (called && fnNames.some((n) => REFUSED_CALLS.has(n))) refuse(`function ${fnName}() is not allowed`, t);
    else if (called && fnNames.some((n) => REGEX_CALLS.has(n)) && !(isWord(t, 'like') || isWord(t, 'ilike'))) refuse(regexRefusal(`function ${fnName}()`), t);
    if (t.quoted) continue;
    if (REGEX_OPERATORS.has(t.value)) refuse(regexRefusal(t.text.toUpperCase()), t);
    else if (t.value === 'like' || t.value === 'ilike') {
      const problem = likePattern(sig, k);
      if (problem) refuse(problem, t);
    } else if (STATEMENT_WORDS.has(t.value) && !called && !(PIPE_OPERATOR_WORDS.has(t.value) && tok(k - 1)?.text === '|>'))
      refuse(`"${t.text}" is not allowed: the transform is one query (backquote a column of that name: \`${t.text}\`)`, t);
    else if (t.value === 'using' && next?.kind === 'string') refuse("script transforms (USING '…') are not allowed: they run a program on the Spark server", t);
    else if (['recordreader', 'recordwriter', 'serde', 'serdeproperties'].includes(t.value))
      refuse(`${t.text.toUpperCase()} is not allowed: it names a class the Spark server would load`, t);
    else if (t.value === 'with' && called) refuse('table options (WITH (…)) are not allowed: a table is read as its catalog defines it', t);
  }

  // Table positions: after FROM, JOIN and TABLE, and after a comma of a FROM list.
  const tables: TableRef[] = [];
  const granted: GrantedTableRef[] = [];
  const spans: TableSpan[] = [];
  const fromList: boolean[] = [false];
  // Inside a VALUES list of a FROM clause, a comma separates rows, or ends the list: see below.
  const valuesList: boolean[] = [false];
  let depth = 0;
  let expectTable = false;
  let afterLateral = false;
  for (let k = 0; k < sig.length; k++) {
    const t = tok(k)!;
    if (expectTable) {
      expectTable = false;
      const lateral = afterLateral;
      afterLateral = false;
      if (t.text === '(') {
        // A subquery (its own FROMs are screened where they are), or, as Spark's grammar also
        // has '(' relation ')', a table in parentheses: then a table (or another '(') comes next.
        const next = tok(k + 1);
        if (!(next?.kind === 'word' && !next.quoted && QUERY_STARTS.has(next.value))) expectTable = true;
      } else if (isWord(t, 'values')) {
        valuesList[depth] = true;
      } else if (isWord(t, 'lateral')) {
        // Spark's grammar has LATERAL before any relation: a subquery, a table-valued function
        // (explode(…)), or a table, which is then a table position like any other.
        afterLateral = true;
        expectTable = true;
        continue;
      } else if (t.kind === 'word') {
        const chain = [t];
        let m = k + 1;
        while (tok(m)?.text === '.' && tok(m + 1)?.kind === 'word') {
          chain.push(tok(m + 1) as Word);
          m += 2;
        }
        const called = tok(m)?.text === '(';
        const ref = isWord(t, 'stream')
          ? 'STREAM is not allowed: Spark reads STREAM <table> as a streaming read of that table (backquote a CTE or step of that name: `stream`)'
          : lateral && called
            ? undefined // a lateral table-valued function: judged by the tenant policy on the server
            : classify(chain, called, (name) => isCte(name, k), opts.readNamespaces);
        if (typeof ref === 'string') refuse(ref, t);
        else if (ref) {
          if ('layer' in ref) tables.push(ref);
          else granted.push(ref);
          spans.push({ first: sig[k]!.i, last: sig[m - 1]!.i, ref });
        }
        k = m - 1;
        continue;
      } else refuse(`a table name is expected after FROM/JOIN, not ${JSON.stringify(t.text)}`, t);
    }
    if (t.text === '(') {
      depth++;
      fromList[depth] = false;
      valuesList[depth] = false;
      continue;
    }
    if (t.text === ')') {
      depth = Math.max(0, depth - 1);
      continue;
    }
    if (t.text === '|>') fromList[depth] = valuesList[depth] = false;
    if (t.kind === 'word' && !t.quoted) {
      if (t.value === 'from' || t.value === 'join') {
        fromList[depth] = true;
        valuesList[depth] = false;
        expectTable = true;
      } else if (t.value === 'table') expectTable = true;
      else if (FROM_LIST_END.has(t.value)) fromList[depth] = valuesList[depth] = false;
    }
    if (t.text === ',' && fromList[depth]) expectTable = !(valuesList[depth] && isValuesRow(sig, k + 1));
  }
  if (expectTable) refuse('a table name is expected at the end', undefined);
  if (problems.length) return { ok: false, problems: located(sql, problems) };
  const parameters = [...new Set(sig.flatMap(({ t }) => (t.kind === 'param' ? [t.name as TransformParameter] : [])))];
  return { ok: true, sql, tokens, tables, granted, spans, parameters };
}

function regexRefusal(what: string): string {
  return `${what} is not allowed: Spark runs it as a regular expression, which can backtrack for hours on the shared server (use LIKE with a literal pattern, startswith, endswith, contains, locate, replace or split_part)`;
}

/**
 * The pattern after LIKE/ILIKE at significant token `k`: a string literal (adjacent literals are
 * one, parentheses around it are nothing), then an optional `ESCAPE '<c>'`, ending the expression.
 * The server's judge turns such a pattern into linear string functions; anything else (a column, a
 * concatenation, `LIKE ANY (…)`) is refused with why. Undefined when it is such a literal.
 */
function likePattern(sig: readonly { t: Token }[], k: number): string | undefined {
  const tok = (n: number) => sig[n]?.t;
  const what = (tok(k) as Word).text.toUpperCase();
  let m = k + 1;
  if (['any', 'some', 'all'].includes(tok(m)?.kind === 'word' ? (tok(m) as Word).value : ''))
    return `${what} ${(tok(m) as Word).text.toUpperCase()} (…) is not allowed: write one ${what} per pattern, joined with OR or AND`;
  let open = 0;
  while (tok(m)?.text === '(') {
    open++;
    m++;
  }
  if (tok(m)?.kind !== 'string') {
    if (
      open &&
      tok(k - 1) &&
      ['select', ',', '(', 'where', 'and', 'or', 'not', 'when', 'then', 'else', 'on', 'having', 'by'].includes(tok(k - 1)!.text.toLowerCase())
    )
      return `function ${what.toLowerCase()}() is not allowed: write column ${what} 'pattern'`;
    return `the pattern of ${what} must be a string literal ('abc%'): the server runs it in linear time only then`;
  }
  while (tok(m)?.kind === 'string') m++;
  for (; open > 0; open--, m++)
    if (tok(m)?.text !== ')') return `the pattern of ${what} must be a string literal alone (put the LIKE in parentheses: (s ${what} 'a%'))`;
  if (isWord(tok(m), 'escape')) {
    if (tok(m + 1)?.kind !== 'string') return `ESCAPE takes a string literal of one character`;
    m += 2;
  }
  const after = tok(m);
  if (
    after === undefined ||
    after.text === ')' ||
    after.text === ',' ||
    after.text === '|>' ||
    (after.kind === 'word' && !after.quoted && PATTERN_END.has(after.value))
  )
    return undefined;
  return `the pattern of ${what} must be a string literal alone, not an expression continued by ${JSON.stringify(after.text)} (put the LIKE in parentheses: (s ${what} 'a%'))`;
}

/**
 * After a comma inside a VALUES list of a FROM clause: a row, or, once the list has ended with its
 * alias, the next relation of the FROM list. Spark's relation starts with a name or `(`, so only
 * what cannot start one is a row here: a literal, a sign, or a parenthesised tuple whose first value
 * is one, or whose first name is followed by a comma (a relation in parentheses has none at its
 * top). Anything else is screened as a table, so no relation passes unscreened (a row of VALUES
 * that starts with a name, `VALUES 1, true`, is refused: write `(true)`… as `(true, …)` or first).
 */
function isValuesRow(sig: readonly { t: Token }[], k: number): boolean {
  const t = sig[k]?.t;
  if (!t) return false;
  if (t.kind === 'string' || t.kind === 'number' || t.kind === 'param' || ['-', '+', '~'].includes(t.text)) return true;
  if (t.text !== '(') return false;
  let m = k + 1;
  while (sig[m]?.t.text === '(') m++;
  const first = sig[m]?.t;
  if (!first) return false;
  if (first.kind !== 'word') return first.text !== ')';
  return sig[m + 1]?.t.text === ',';
}

/** Where a CTE name resolves to its CTE: significant tokens [from, to). */
interface CteScope {
  readonly name: string;
  readonly from: number;
  readonly to: number;
}

/**
 * The CTEs of a query as Spark's grammar defines them (`WITH [RECURSIVE] name [(columns)] [AS]
 * ( query ) [, …]`), each with the tokens where its name means it: from the end of its definition
 * (from its own body with RECURSIVE) to the end of the parenthesised query that holds the WITH.
 * Anywhere else Spark resolves a one-part name to a temporary view or a table of the session's
 * current namespace, so a name is a CTE only inside its scope: not a window's name (`WINDOW w AS
 * (…)`), not the CTE of a subquery named outside it, not a CTE inside its own definition.
 */
function cteScopes(sig: readonly Token[]): CteScope[] {
  const close = new Map<number, number>();
  const enclosing: number[] = new Array<number>(sig.length).fill(sig.length);
  const open: number[] = [];
  sig.forEach((t, k) => {
    if (t.text === ')' && open.length) close.set(open.pop()!, k);
    if (t.text === '(') open.push(k);
  });
  // The end of the innermost parenthesised group around each token (the text's end at the top).
  const stack: number[] = [];
  sig.forEach((t, k) => {
    if (t.text === ')') stack.pop();
    enclosing[k] = stack.length ? (close.get(stack.at(-1)!) ?? sig.length) : sig.length;
    if (t.text === '(') stack.push(k);
  });
  const scopes: CteScope[] = [];
  sig.forEach((t, k) => {
    if (!isWord(t, 'with')) return;
    let m = k + 1;
    const recursive = isWord(sig[m], 'recursive');
    if (recursive) m++;
    for (;;) {
      const name = sig[m];
      if (name?.kind !== 'word' || (!name.quoted && isKeyword(name.value))) return;
      m++;
      // Column aliases, unless the parenthesis opens the query itself (AS is optional).
      const next = sig[m + 1];
      if (sig[m]?.text === '(' && !(next?.kind === 'word' && !next.quoted && QUERY_STARTS.has(next.value))) m = (close.get(m) ?? sig.length) + 1;
      if (isWord(sig[m], 'as')) m++;
      if (sig[m]?.text !== '(') return;
      const end = close.get(m);
      if (end === undefined) return;
      scopes.push({ name: name.value.toLowerCase(), from: recursive ? m : end + 1, to: enclosing[k]! });
      m = end + 1;
      if (sig[m]?.text !== ',') return;
      m++;
    }
  });
  return scopes;
}

/**
 * A table reference: the tenant's layer table, a granted namespace's table by its full name, a CTE
 * (undefined), or why it is refused. `readNamespaces` undefined: a three-part name is checked later.
 */
function classify(
  chain: Word[],
  called: boolean,
  isCte: (name: string) => boolean,
  readNamespaces: readonly string[] | undefined,
): TableRef | GrantedTableRef | string | undefined {
  const written = chain.map((w) => w.text).join('.');
  if (called) return `table-valued function ${written}(…) is not allowed: read tables as silver.<table> or gold.<table>`;
  if (chain.length === 1) {
    if (isCte(chain[0]!.value.toLowerCase())) return undefined;
    return `table ${written} is not layer-qualified: write silver.<table> or gold.<table> (or name an earlier step or CTE)`;
  }
  if (chain.length === 3) return grantedTable(chain, readNamespaces);
  if (chain.length > 3) return `table ${written}: a table name has at most three parts; write silver.<table> or gold.<table>`;
  const [layer, table] = [chain[0]!.value.toLowerCase(), chain[1]!.value];
  if (PATH_FORMATS.has(layer)) return `path-based table ${written} is not allowed: read tables as silver.<table> or gold.<table>`;
  if (!(READABLE_LAYERS as readonly string[]).includes(layer))
    return `table ${written}: the layer must be silver or gold (a transform reads the tenant's silver and gold tables, and a namespace the platform grants by its full name, catalog.namespace.table)`;
  if (!NAME_PATTERN.test(table)) return `table ${written}: the table name must match ${NAME_PATTERN.source}`;
  return { layer: layer as ReadableLayer, table };
}

/** `catalog.namespace.table` of a namespace the platform grants, in the grant's own spelling. */
function grantedTable(chain: Word[], readNamespaces: readonly string[] | undefined): GrantedTableRef | string {
  const written = chain.map((w) => w.text).join('.');
  const [catalog, namespace, table] = chain.map((w) => (w.quoted ? w.value : w.text)) as [string, string, string];
  if (PATH_FORMATS.has(namespace.toLowerCase()) || /[/:]/.test(table))
    return `path-based table ${written} is not allowed: read tables as silver.<table> or gold.<table>`;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(table)) return `table ${written}: the table name must be letters, digits and _`;
  if (readNamespaces === undefined) return { catalog, namespace, table };
  const grant = readNamespaces.find((g) => g.toLowerCase() === `${catalog}.${namespace}`.toLowerCase());
  if (!grant)
    return `table ${written}: ${catalog}.${namespace} is not a namespace the platform grants this tenant for reading (tenants.<id>.read-namespaces); write silver.<table> or gold.<table> for the tenant's own tables`;
  const [c, n] = grant.split('.') as [string, string];
  return { catalog: c, namespace: n, table };
}

function isWord(t: Token | undefined, value: string): boolean {
  return t?.kind === 'word' && !t.quoted && t.value === value;
}

/** Words that can precede `AS (` without naming a CTE. */
function isKeyword(value: string): boolean {
  return ['select', 'with', 'recursive', 'from', 'as', 'cast', 'try_cast', 'not', 'and', 'or'].includes(value);
}

/**
 * The screened query's text as it is sent: every layer-qualified table replaced by the fully quoted
 * name `resolve` gives (a granted table by its grant's quoted name), every parameter by its DATE
 * literal, every comment by white space; rebuilt from the tokens, so literals and quoted identifiers
 * pass verbatim and nothing else changes. `origin` maps a position of the text back to the tenant's.
 *
 * Why parameters are not sent as the SQL relation's named arguments: Spark 4.1 substitutes them in
 * a parser pre-processor that the Iceberg and Delta SQL extensions' parsers bypass, so with the
 * extensions installed every named argument stays unbound (UNBOUND_SQL_PARAMETER; apache/iceberg
 * issue 16625, SPARK-59672). Spark 4.1 itself substitutes parameters as literal text; we do the same
 * with the one kind of value we bind, a date that `dateLiteral` re-checks to be digits and dashes.
 */
export function rewriteTransform(
  screened: Extract<Screened, { ok: true }>,
  resolve: (ref: TableRef) => readonly string[],
  parameter: (name: TransformParameter) => string = (name) => {
    throw new Error(`rewriteTables: no value for :${name}`);
  },
  path = 'transform.sql',
): { text: string; origin: SqlOrigin } {
  const byFirst = new Map(screened.spans.map((s) => [s.first, s]));
  const out: string[] = [];
  const pieces: Piece[] = [];
  let length = 0;
  const emit = (text: string, src: number, verbatim: boolean) => {
    pieces.push({ out: length, src, length: text.length, verbatim });
    out.push(text);
    length += text.length;
  };
  for (let i = 0; i < screened.tokens.length; i++) {
    const span = byFirst.get(i);
    const t = screened.tokens[i]!;
    if (span) {
      emit(quoteName('layer' in span.ref ? resolve(span.ref) : [span.ref.catalog, span.ref.namespace, span.ref.table]), t.start, false);
      i = span.last;
    } else if (t.kind === 'param') emit(dateLiteral(parameter(t.name as TransformParameter)), t.start, false);
    else if (t.kind === 'comment') emit(t.text.includes('\n') ? '\n' : ' ', t.start, false);
    else emit(t.text, t.start, true);
  }
  const text = out.join('');
  return { text, origin: pieceOrigin(text, pieces, screened.sql, path) };
}

/** The screened query's text as it is sent (rewriteTransform without its origin). */
export function rewriteTables(
  screened: Extract<Screened, { ok: true }>,
  resolve: (ref: TableRef) => readonly string[],
  parameter?: (name: TransformParameter) => string,
): string {
  return rewriteTransform(screened, resolve, parameter).text;
}

/** A run of the sent text and where it came from: copied verbatim, or a replacement of the text at `src`. */
interface Piece {
  readonly out: number;
  readonly src: number;
  readonly length: number;
  readonly verbatim: boolean;
}

function pieceOrigin(sent: string, pieces: readonly Piece[], original: string, path: string): SqlOrigin {
  const where = lineIndex(original);
  const locate = (offset: number): SqlPosition | undefined => {
    if (!Number.isInteger(offset) || offset < 0 || offset > sent.length) return undefined;
    // The last piece starting at or before the offset (pieces are in order and cover the text).
    let lo = 0;
    let hi = pieces.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (pieces[mid]!.out <= offset) lo = mid;
      else hi = mid - 1;
    }
    const p = pieces[lo];
    const src = p === undefined ? original.length : p.verbatim ? p.src + Math.min(offset - p.out, p.length) : p.src;
    return { path, offset: src, ...where(src) };
  };
  return originOf(sent, locate);
}

function originOf(sent: string, locate: (offset: number) => SqlPosition | undefined): SqlOrigin {
  return {
    locate,
    locateLineColumn: (line, column0) => locate(offsetOf(sent, line, column0)),
  };
}

/** A DATE literal of an ISO date, which is checked again here: nothing but digits and dashes reaches the text. */
export function dateLiteral(date: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) throw new Error(`not an ISO date: ${JSON.stringify(date)}`);
  return `DATE'${date}'`;
}

/** Named steps as one query: each step a CTE over the earlier ones, the last one selected. */
export function composeSteps(steps: readonly { name: string; sql: string }[]): string {
  return composeStepsWithOrigin(steps.map((s) => ({ name: s.name, sql: s.sql }))).text;
}

/**
 * Named steps as one query, with the origin of every position: a position inside step i's text
 * maps through that step's own origin (to `transform.steps[i].sql`), one in the text the
 * composition adds to the step it introduces.
 */
export function composeStepsWithOrigin(steps: readonly { name: string; sql: string; origin?: SqlOrigin }[]): { text: string; origin: SqlOrigin } {
  const last = steps.at(-1);
  if (!last) throw new Error('composeSteps: no steps');
  const parts: { start: number; length: number; origin?: SqlOrigin; step: number }[] = [];
  let text = 'WITH ';
  steps.forEach((s, i) => {
    if (i > 0) text += ',\n';
    text += `${quoteIdentifier(s.name)} AS (\n`;
    parts.push({ start: text.length, length: s.sql.length, ...(s.origin ? { origin: s.origin } : {}), step: i });
    text += `${s.sql}\n)`;
  });
  text += `\nSELECT * FROM ${quoteIdentifier(last.name)}`;
  const sent = text;
  const locate = (offset: number): SqlPosition | undefined => {
    const part = parts.find((p) => offset >= p.start && offset <= p.start + p.length) ?? parts.filter((p) => p.start <= offset).at(-1);
    if (!part?.origin) return undefined;
    return part.origin.locate(Math.max(0, Math.min(offset - part.start, part.length)));
  };
  return { text: sent, origin: originOf(sent, locate) };
}

/**
 * The origin as the tenant policy's position mapper (a step's hook for the server's refusals and
 * analysis errors): where a position of the text sent lies in the tenant's own text, at the config
 * path of that SQL (`transform.steps[i].sql` for a composed step); undefined leaves it as sent.
 * The offset, when the server knows it, is exact; else line and column.
 */
export function sentPositionMapper(origin: SqlOrigin): PositionMapper {
  return (sent) => {
    const at = sent.offset !== undefined ? origin.locate(sent.offset) : origin.locateLineColumn(sent.line, sent.column - 1);
    return at && { configPath: at.path, line: at.line, column: at.column };
  };
}
