import { DISCLOSING_FUNCTIONS, REFLECTION_FUNCTIONS } from '../../core/expression/functions.js';
import { NAME_PATTERN, quoteIdentifier, quoteName } from '../../core/naming.js';
import { REGEX_FUNCTIONS } from '../../spark/policy/allow-list.js';

/**
 * The first wall around a tenant's transform SQL (gold-publish): a tokenizer that knows Spark
 * SQL's string literals (with backslash escapes, doubled quotes and raw `r'…'` strings), quoted
 * identifiers and comments, a screen over its tokens, and the rewrite of the tenant's
 * layer-qualified table names (`silver.orders`) into the tenant's own tables
 * (`lake`.`acme_silver`.`orders`). Never a regular expression over raw text: text inside a literal
 * or a quoted identifier is never mistaken for a table, a keyword or a statement separator.
 *
 * The screen is deliberately strict and judges structure only: one query (SELECT or WITH), no
 * `;`, no comments, no `${…}` (Spark substitutes configuration values into SQL text, inside
 * literals too), no positional `?` parameters, no statement keywords, and every table a
 * layer-qualified name of the tenant's silver or gold layer (or a CTE/step name). What the query
 * may compute (functions, plan nodes) and what it reads in the end is judged again on the server
 * by the tenant policy (src/spark/policy), which does not rely on this screen.
 */

export type Token =
  | { readonly kind: 'ws'; readonly text: string }
  | { readonly kind: 'word'; readonly text: string; readonly value: string; readonly quoted: boolean }
  | { readonly kind: 'string'; readonly text: string }
  | { readonly kind: 'number'; readonly text: string }
  | { readonly kind: 'param'; readonly text: string; readonly name: string }
  | { readonly kind: 'op'; readonly text: string };

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

/** Operators Spark runs as regular expressions (the policy refuses them too: REGEX_FUNCTIONS). */
const REGEX_OPERATORS = new Set(['like', 'ilike', 'rlike', 'regexp']);

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

/** Words that start a query inside parentheses (anything else there starts a relation: a table). */
const QUERY_STARTS = new Set(['select', 'with', 'from', 'table', 'values', 'map', 'reduce']);

/** Path-based table prefixes (`delta.`/path``): named in the refusal, they are never a layer. */
const PATH_FORMATS = new Set(['delta', 'parquet', 'csv', 'json', 'orc', 'text', 'avro', 'binaryfile', 'iceberg', 'jdbc', 'hive']);

export interface TableRef {
  readonly layer: ReadableLayer;
  readonly table: string;
}

/** Where a table reference sits in the token list (first and last token, inclusive). */
export interface TableSpan {
  readonly first: number;
  readonly last: number;
  readonly ref: TableRef;
}

type Word = Extract<Token, { kind: 'word' }>;

export type Screened =
  | {
      readonly ok: true;
      readonly tokens: readonly Token[];
      readonly tables: readonly TableRef[];
      readonly spans: readonly TableSpan[];
      readonly parameters: readonly TransformParameter[];
    }
  | { readonly ok: false; readonly problems: readonly string[] };

/** Split SQL text into tokens; a problem (unterminated literal, comment, `;` …) stops it. */
export function tokenize(sql: string): { tokens: Token[] } | { problem: string } {
  const tokens: Token[] = [];
  let i = 0;
  const at = (k: number) => sql[k] ?? '';
  while (i < sql.length) {
    const c = sql[i]!;
    const start = i;
    if (/[ \t\r\n\f]/.test(c)) {
      while (i < sql.length && /[ \t\r\n\f]/.test(sql[i]!)) i++;
      tokens.push({ kind: 'ws', text: sql.slice(start, i) });
      continue;
    }
    if ((c === '-' && at(i + 1) === '-') || (c === '/' && at(i + 1) === '*'))
      return { problem: `at position ${i}: comments are not allowed in transform SQL (they could hide text, and Spark nests /* */ comments)` };
    if (c === '$' && at(i + 1) === '{') return { problem: `at position ${i}: \${…} is not allowed (Spark substitutes configuration values into SQL text)` };
    if (c === "'" || c === '"') {
      // A raw string (no escapes inside) is r or R directly before the quote, where Spark's lexer
      // starts a token: after a character that cannot continue an identifier. The r then ends the
      // token before it (the word r, or `:r`), which gives it up to the literal.
      const raw = /[rR]/.test(at(i - 1)) && !IDENTIFIER_CHAR.test(at(i - 2));
      const end = stringEnd(sql, i, raw);
      if (end < 0) return { problem: `at position ${i}: the string literal is not closed` };
      const text = sql.slice(i, end);
      if (text.includes('${'))
        return { problem: `at position ${i}: \${…} is not allowed, not even in a literal (Spark substitutes configuration values into SQL text)` };
      if (raw) {
        const prev = tokens.pop()!;
        const rest = prev.text.slice(0, -1);
        if (rest) tokens.push({ kind: 'op', text: rest });
      }
      tokens.push({ kind: 'string', text: raw ? sql.slice(i - 1, end) : text });
      i = end;
      continue;
    }
    if (c === '`') {
      let j = i + 1;
      let value = '';
      for (;;) {
        if (j >= sql.length) return { problem: `at position ${i}: the quoted identifier is not closed` };
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
      if (value.includes('${')) return { problem: `at position ${start}: \${…} is not allowed (Spark substitutes configuration values into SQL text)` };
      tokens.push({ kind: 'word', text: sql.slice(start, i), value, quoted: true });
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      while (i < sql.length && /[A-Za-z0-9_]/.test(sql[i]!)) i++;
      const text = sql.slice(start, i);
      tokens.push({ kind: 'word', text, value: text.toLowerCase(), quoted: false });
      continue;
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(at(i + 1)) && tokens.at(-1)?.kind !== 'word')) {
      // As Spark's lexer: a '.' or an exponent's sign belongs to a number only with digits after
      // it, and identifier characters continue it (1e, 12L, 1.5BD); `1e+r'…'` is 1e, + and a raw
      // string, `1e+reflect(` is 1e, + and a call, never one token hiding the rest.
      NUMBER.lastIndex = i;
      i += NUMBER.exec(sql)![0].length;
      tokens.push({ kind: 'number', text: sql.slice(start, i) });
      continue;
    }
    if (c === ':' && at(i + 1) === ':') {
      i += 2;
      tokens.push({ kind: 'op', text: '::' });
      continue;
    }
    if (c === ':' && /[A-Za-z_]/.test(at(i + 1))) {
      i++;
      while (i < sql.length && /[A-Za-z0-9_]/.test(sql[i]!)) i++;
      tokens.push({ kind: 'param', text: sql.slice(start, i), name: sql.slice(start + 1, i) });
      continue;
    }
    if (c === ';') return { problem: `at position ${i}: ";" is not allowed: the transform is exactly one query` };
    if (c === '?')
      return { problem: `at position ${i}: positional parameters (?) are not allowed; the runner binds :logical_date, :range_start and :range_end` };
    if (/[^\x21-\x7e]/.test(c)) return { problem: `at position ${i}: only ASCII is allowed outside string literals and quoted identifiers` };
    i++;
    tokens.push({ kind: 'op', text: c });
  }
  return { tokens };
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

/**
 * Screen one query. `known` are the names the query may use as tables besides layer-qualified ones
 * (earlier transform steps); its own CTE names are found in it.
 */
export function screenTransform(sql: string, known: readonly string[] = []): Screened {
  const lexed = tokenize(sql);
  if ('problem' in lexed) return { ok: false, problems: [lexed.problem] };
  const tokens = lexed.tokens;
  // The significant tokens, with their index in `tokens` (where a rewrite replaces them).
  const sig = tokens.flatMap((t, i) => (t.kind === 'ws' ? [] : [{ t, i }]));
  const tok = (k: number): Token | undefined => sig[k]?.t;
  const problems: string[] = [];
  const first = tok(0);
  if (!first || first.kind !== 'word' || first.quoted || !['select', 'with'].includes(first.value))
    return { ok: false, problems: ['must be one query starting with SELECT or WITH'] };

  // CTE names, each where Spark sees it: earlier steps everywhere, a WITH's names in their scope only.
  const steps = new Set(known.map((k) => k.toLowerCase()));
  const scopes = cteScopes(sig.map(({ t }) => t));
  const isCte = (name: string, at: number) => steps.has(name) || scopes.some((s) => s.name === name && s.from <= at && at < s.to);
  for (let k = 0; k < sig.length; k++) {
    const t = tok(k)!;
    if (t.kind === 'param' && !(TRANSFORM_PARAMETERS as readonly string[]).includes(t.name))
      problems.push(`unknown parameter :${t.name} (the runner binds ${TRANSFORM_PARAMETERS.map((p) => `:${p}`).join(', ')})`);
    if (t.kind !== 'word' || t.quoted) continue;
    const called = tok(k + 1)?.text === '(';
    if (t.value === 'identifier' && called) problems.push('IDENTIFIER(…) is not allowed: tables are named as silver.<table> or gold.<table>');
    else if (REFUSED_CALLS.has(t.value) && called) problems.push(`function ${t.value}() is not allowed`);
    else if (REGEX_OPERATORS.has(t.value) || (REGEX_FUNCTIONS.has(t.value) && called))
      problems.push(
        `${called ? `function ${t.value}()` : t.text.toUpperCase()} is not allowed: Spark runs it as a regular expression, which can backtrack for hours on the shared server (use startswith, endswith, contains, locate, replace or split_part)`,
      );
    else if (STATEMENT_WORDS.has(t.value) && !called)
      problems.push(`"${t.text}" is not allowed: the transform is one query (backquote a column of that name: \`${t.text}\`)`);
  }

  // Table positions: after FROM, JOIN and TABLE, and after a comma of a FROM list.
  const tables: TableRef[] = [];
  const spans: TableSpan[] = [];
  const fromList: boolean[] = [false];
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
        // an inline table
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
            : classify(chain, called, (name) => isCte(name, k));
        if (typeof ref === 'string') problems.push(ref);
        else if (ref) {
          tables.push(ref);
          spans.push({ first: sig[k]!.i, last: sig[m - 1]!.i, ref });
        }
        k = m - 1;
        continue;
      } else problems.push(`a table name is expected after FROM/JOIN, not ${JSON.stringify(t.text)}`);
    }
    if (t.text === '(') {
      depth++;
      fromList[depth] = false;
      continue;
    }
    if (t.text === ')') {
      depth = Math.max(0, depth - 1);
      continue;
    }
    if (t.kind === 'word' && !t.quoted) {
      if (t.value === 'from' || t.value === 'join') {
        fromList[depth] = true;
        expectTable = true;
      } else if (t.value === 'table') expectTable = true;
      else if (FROM_LIST_END.has(t.value)) fromList[depth] = false;
    }
    if (t.text === ',' && fromList[depth]) expectTable = true;
  }
  if (expectTable) problems.push('a table name is expected at the end');
  if (problems.length) return { ok: false, problems: [...new Set(problems)] };
  const parameters = [...new Set(sig.flatMap(({ t }) => (t.kind === 'param' ? [t.name as TransformParameter] : [])))];
  return { ok: true, tokens, tables, spans, parameters };
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

/** A table reference: the tenant's layer table, a CTE (undefined), or why it is refused. */
function classify(chain: Word[], called: boolean, isCte: (name: string) => boolean): TableRef | string | undefined {
  const written = chain.map((w) => w.text).join('.');
  if (called) return `table-valued function ${written}(…) is not allowed: read tables as silver.<table> or gold.<table>`;
  if (chain.length === 1) {
    if (isCte(chain[0]!.value.toLowerCase())) return undefined;
    return `table ${written} is not layer-qualified: write silver.<table> or gold.<table> (or name an earlier step or CTE)`;
  }
  if (chain.length > 2)
    return `table ${written}: three-part names are not allowed; write silver.<table> or gold.<table> (the runner resolves them to your namespaces)`;
  const [layer, table] = [chain[0]!.value.toLowerCase(), chain[1]!.value];
  if (PATH_FORMATS.has(layer)) return `path-based table ${written} is not allowed: read tables as silver.<table> or gold.<table>`;
  if (!(READABLE_LAYERS as readonly string[]).includes(layer))
    return `table ${written}: the layer must be silver or gold (a transform reads the tenant's silver and gold tables)`;
  if (!NAME_PATTERN.test(table)) return `table ${written}: the table name must match ${NAME_PATTERN.source}`;
  return { layer: layer as ReadableLayer, table };
}

function isWord(t: Token | undefined, value: string): boolean {
  return t?.kind === 'word' && !t.quoted && t.value === value;
}

/** Words that can precede `AS (` without naming a CTE. */
function isKeyword(value: string): boolean {
  return ['select', 'with', 'recursive', 'from', 'as', 'cast', 'try_cast', 'not', 'and', 'or'].includes(value);
}

/**
 * The screened query's text with every layer-qualified table replaced by the fully quoted name
 * `resolve` gives, and every parameter by its DATE literal: rebuilt from the tokens, so literals and
 * quoted identifiers pass verbatim and nothing but the table names and parameter markers changes.
 *
 * Why parameters are not sent as the SQL relation's named arguments: Spark 4.1 substitutes them in
 * a parser pre-processor that the Iceberg and Delta SQL extensions' parsers bypass, so with the
 * extensions installed every named argument stays unbound (UNBOUND_SQL_PARAMETER; apache/iceberg
 * issue 16625, SPARK-59672). Spark 4.1 itself substitutes parameters as literal text; we do the same
 * with the one kind of value we bind, a date that `dateLiteral` re-checks to be digits and dashes.
 */
export function rewriteTables(
  screened: Extract<Screened, { ok: true }>,
  resolve: (ref: TableRef) => readonly string[],
  parameter: (name: TransformParameter) => string = (name) => {
    throw new Error(`rewriteTables: no value for :${name}`);
  },
): string {
  const byFirst = new Map(screened.spans.map((s) => [s.first, s]));
  const out: string[] = [];
  for (let i = 0; i < screened.tokens.length; i++) {
    const span = byFirst.get(i);
    const t = screened.tokens[i]!;
    if (span) {
      out.push(quoteName(resolve(span.ref)));
      i = span.last;
    } else if (t.kind === 'param') out.push(dateLiteral(parameter(t.name as TransformParameter)));
    else out.push(t.text);
  }
  return out.join('');
}

/** A DATE literal of an ISO date, which is checked again here: nothing but digits and dashes reaches the text. */
export function dateLiteral(date: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) throw new Error(`not an ISO date: ${JSON.stringify(date)}`);
  return `DATE'${date}'`;
}

/** Named steps as one query: each step a CTE over the earlier ones, the last one selected. */
export function composeSteps(steps: readonly { name: string; sql: string }[]): string {
  const last = steps.at(-1);
  if (!last) throw new Error('composeSteps: no steps');
  const ctes = steps.map((s) => `${quoteIdentifier(s.name)} AS (\n${s.sql}\n)`).join(',\n');
  return `WITH ${ctes}\nSELECT * FROM ${quoteIdentifier(last.name)}`;
}
