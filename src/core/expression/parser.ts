import { type ArithmeticOp, type BinaryOp, type ComparisonOp, type Literal, type Node, children } from './ast.js';
import { FUNCTIONS, REFUSED_FUNCTIONS } from './functions.js';
import { type Token, tokenize } from './lexer.js';
import { LikePatternError, readLikePattern } from './like.js';
import { sizeProblem } from './size.js';

/**
 * The config expression grammar (docs/expressions.md), by recursive descent with one function per
 * precedence level, loosest first: OR, AND, NOT, predicates (IS, IN, BETWEEN, LIKE), comparisons,
 * + -, * / %, unary sign, primaries. Everything the grammar does not name is refused at the first
 * token that cannot belong to it, with its 1-based position. Input length and nesting are bounded so
 * that hostile input costs bounded time and stack.
 */

export const MAX_EXPRESSION_LENGTH = 10_000;
/** Deeper than any honest filter; far below what would strain our stack or Spark's protobuf limit. */
export const MAX_EXPRESSION_DEPTH = 64;

export type ParseResult = { readonly ok: true; readonly ast: Node } | { readonly ok: false; readonly pos: number; readonly message: string };

class ExpressionSyntaxError extends Error {
  constructor(
    readonly pos: number,
    message: string,
  ) {
    super(message);
  }
}

export function parseExpression(text: string): ParseResult {
  if (text.trim() === '') return { ok: false, pos: 1, message: 'is empty' };
  if (text.length > MAX_EXPRESSION_LENGTH) return { ok: false, pos: MAX_EXPRESSION_LENGTH + 1, message: `is longer than ${MAX_EXPRESSION_LENGTH} characters` };
  try {
    const ast = new Parser(tokenize(text)).parse();
    const tooLarge = sizeProblem(ast);
    return tooLarge ? { ok: false, ...tooLarge } : { ok: true, ast };
  } catch (e) {
    if (e instanceof ExpressionSyntaxError) return { ok: false, pos: e.pos, message: e.message };
    throw e;
  }
}

const SUBQUERY = 'subqueries and table references are not allowed: an expression sees only the columns of its row';
/** Words that start SQL the language does not have, refused with the reason when written bare. */
const REFUSED_WORDS: ReadonlyMap<string, string> = new Map([
  ...['SELECT', 'FROM', 'TABLE', 'EXISTS', 'WITH', 'VALUES', 'LATERAL', 'UNION', 'INTERSECT', 'EXCEPT', 'JOIN', 'WHERE', 'GROUP', 'ORDER', 'LIMIT'].map(
    (w) => [w, SUBQUERY] as const,
  ),
  ['INTERVAL', 'INTERVAL literals are not supported: use date_add, date_sub or add_months'],
  ['OVER', 'window functions are not allowed'],
  ['DISTINCT', 'DISTINCT is not allowed: an expression sees only its row'],
]);
/** Grammar words: never a bare column name (backticks make them one: `end`). */
const KEYWORDS = new Set([
  'AND',
  'OR',
  'NOT',
  'IS',
  'IN',
  'BETWEEN',
  'LIKE',
  'ESCAPE',
  'CASE',
  'WHEN',
  'THEN',
  'ELSE',
  'END',
  'CAST',
  'AS',
  'NULL',
  'TRUE',
  'FALSE',
]);
/**
 * Names Spark reads as a function call when the row has no such column (its "literal functions"),
 * quoted or not: as column names they would let a typo read the session's user or clock.
 */
const FUNCTION_LIKE_COLUMNS = new Set([
  'current_date',
  'current_timestamp',
  'current_time',
  'current_user',
  'user',
  'session_user',
  'localtimestamp',
  'grouping__id',
]);

const COMPARISONS: ReadonlyMap<string, ComparisonOp> = new Map([
  ['=', '='],
  ['==', '='],
  ['!=', '!='],
  ['<>', '!='],
  ['<', '<'],
  ['<=', '<='],
  ['>', '>'],
  ['>=', '>='],
  ['<=>', '<=>'],
]);

const CAST_TYPES: ReadonlyMap<string, string> = new Map([
  ['BOOLEAN', 'boolean'],
  ['TINYINT', 'tinyint'],
  ['BYTE', 'tinyint'],
  ['SMALLINT', 'smallint'],
  ['SHORT', 'smallint'],
  ['INT', 'int'],
  ['INTEGER', 'int'],
  ['BIGINT', 'bigint'],
  ['LONG', 'bigint'],
  ['FLOAT', 'float'],
  ['REAL', 'float'],
  ['DOUBLE', 'double'],
  ['STRING', 'string'],
  ['DATE', 'date'],
  ['TIMESTAMP', 'timestamp'],
  ['TIMESTAMP_NTZ', 'timestamp_ntz'],
]);
const DECIMAL_TYPES = new Set(['DECIMAL', 'DEC', 'NUMERIC']);

const INT_MIN = -(2n ** 31n);
const INT_MAX = 2n ** 31n - 1n;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

class Parser {
  private i = 0;
  private depth = 0;
  /** The height of each node built, so long operator chains are bounded like nested parentheses. */
  private readonly heights = new WeakMap<Node, number>();

  constructor(private readonly tokens: Token[]) {}

  parse(): Node {
    const node = this.expr();
    const t = this.peek();
    if (t.t !== 'eof')
      this.unexpected(t, t.t === 'ident' && REFUSED_WORDS.has(t.upper) && !t.quoted ? REFUSED_WORDS.get(t.upper) : 'expected an operator or the end');
    return node;
  }

  // --- precedence levels, loosest first

  private expr(): Node {
    return this.nested(() => this.or());
  }

  private or(): Node {
    let left = this.and();
    while (this.word('OR')) left = this.binary('or', left, this.and(), left.pos);
    return left;
  }

  private and(): Node {
    let left = this.not();
    while (this.word('AND')) left = this.binary('and', left, this.not(), left.pos);
    return left;
  }

  private not(): Node {
    const t = this.peek();
    if (this.word('NOT')) return this.node({ kind: 'unary', op: 'not', operand: this.nested(() => this.not()), pos: t.pos });
    return this.predicate();
  }

  private predicate(): Node {
    const operand = this.comparison();
    const t = this.peek();
    if (this.word('IS')) {
      const negated = this.word('NOT');
      if (this.word('NULL')) return this.node({ kind: 'isNull', operand, negated, pos: t.pos });
      if (this.word('TRUE')) return this.node({ kind: 'isBoolean', operand, value: true, negated, pos: t.pos });
      if (this.word('FALSE')) return this.node({ kind: 'isBoolean', operand, value: false, negated, pos: t.pos });
      this.unexpected(this.peek(), 'IS takes NULL, TRUE or FALSE');
    }
    const after = this.peek(1);
    const negated = this.peekWord('NOT') && after.t === 'ident' && !after.quoted && ['IN', 'BETWEEN', 'LIKE'].includes(after.upper) && this.word('NOT');
    if (this.word('IN')) {
      this.expectOp('(', 'IN takes a parenthesised list of literals');
      const values = [this.literal('IN takes literals only')];
      while (this.op(',')) values.push(this.literal('IN takes literals only'));
      this.expectOp(')', 'expected "," or ")" in the IN list');
      return this.node({ kind: 'in', operand, values, negated, pos: t.pos });
    }
    if (this.word('BETWEEN')) {
      const low = this.additive();
      if (!this.word('AND')) this.unexpected(this.peek(), 'BETWEEN takes "low AND high"');
      const high = this.additive();
      return this.node({ kind: 'between', operand, low, high, negated, pos: t.pos });
    }
    if (this.word('LIKE')) {
      const p = this.peek();
      const pattern = this.string('LIKE takes a string literal pattern');
      let escape: string | undefined;
      if (this.word('ESCAPE')) {
        const e = this.peek();
        escape = this.string('ESCAPE takes a one-character string literal');
        if ([...escape].length !== 1) throw new ExpressionSyntaxError(e.pos, 'ESCAPE takes a one-character string literal');
      }
      // Read as Spark would (and as it is compiled, without a regular expression): refused here, at validate.
      try {
        readLikePattern(pattern, escape);
      } catch (e) {
        if (e instanceof LikePatternError) throw new ExpressionSyntaxError(p.pos, e.message);
        throw e;
      }
      return this.node({ kind: 'like', operand, pattern, escape, negated, pos: t.pos });
    }
    return operand;
  }

  private comparison(): Node {
    let left = this.additive();
    for (;;) {
      const t = this.peek();
      const op = t.t === 'op' ? COMPARISONS.get(t.text) : undefined;
      if (!op) return left;
      this.i++;
      left = this.binary(op, left, this.additive(), left.pos);
    }
  }

  private additive(): Node {
    let left = this.multiplicative();
    for (;;) {
      const t = this.peek();
      if (t.t !== 'op' || (t.text !== '+' && t.text !== '-')) return left;
      this.i++;
      left = this.binary(t.text as ArithmeticOp, left, this.multiplicative(), left.pos);
    }
  }

  private multiplicative(): Node {
    let left = this.unary();
    for (;;) {
      const t = this.peek();
      if (t.t !== 'op' || (t.text !== '*' && t.text !== '/' && t.text !== '%')) return left;
      this.i++;
      left = this.binary(t.text as ArithmeticOp, left, this.unary(), left.pos);
    }
  }

  private unary(): Node {
    const t = this.peek();
    if (t.t === 'op' && (t.text === '-' || t.text === '+')) {
      this.i++;
      // -2147483648 is one INT literal, as in SQL, not the negation of a BIGINT.
      const next = this.peek();
      if (next.t === 'number') {
        this.i++;
        return this.node({ kind: 'literal', value: numberLiteral(next, t.text === '-'), pos: t.pos });
      }
      return this.node({ kind: 'unary', op: t.text, operand: this.nested(() => this.unary()), pos: t.pos });
    }
    return this.primary();
  }

  private primary(): Node {
    const t = this.peek();
    switch (t.t) {
      case 'error':
        throw new ExpressionSyntaxError(t.pos, t.message);
      case 'eof':
        return this.unexpected(t);
      case 'number':
        this.i++;
        return this.node({ kind: 'literal', value: numberLiteral(t, false), pos: t.pos });
      case 'string':
        this.i++;
        return this.node({ kind: 'literal', value: { type: 'string', value: t.value }, pos: t.pos });
      case 'op':
        if (t.text !== '(') return this.unexpected(t);
        this.i++;
        {
          const inner = this.expr();
          this.expectOp(')', 'expected ")"');
          return inner;
        }
      case 'ident':
        return this.identifier(t);
    }
  }

  private identifier(t: Extract<Token, { t: 'ident' }>): Node {
    const next = this.peek(1);
    const call = next.t === 'op' && next.text === '(';
    if (t.quoted) {
      if (call) throw new ExpressionSyntaxError(t.pos, 'backticked function names are not allowed');
      return this.column(t);
    }
    const refused = REFUSED_WORDS.get(t.upper);
    if (refused) return this.unexpected(t, refused);
    if (t.upper === 'TRUE' || t.upper === 'FALSE' || t.upper === 'NULL') {
      this.i++;
      return this.node({ kind: 'literal', value: literalWord(t.upper), pos: t.pos });
    }
    if ((t.upper === 'DATE' || t.upper === 'TIMESTAMP') && next.t === 'string') {
      this.i += 2;
      return this.node({ kind: 'literal', value: typedLiteral(t.upper, next), pos: t.pos });
    }
    if (t.upper === 'CASE') return this.caseExpr(t);
    if (t.upper === 'CAST') return this.castExpr(t);
    if (KEYWORDS.has(t.upper)) return this.unexpected(t);
    if (call) return this.call(t);
    return this.column(t);
  }

  private column(t: Extract<Token, { t: 'ident' }>): Node {
    if (FUNCTION_LIKE_COLUMNS.has(t.text.toLowerCase()))
      throw new ExpressionSyntaxError(t.pos, `"${t.text}" cannot be a column name here: Spark reads it as a function when the row has no such column`);
    this.i++;
    return this.node({ kind: 'column', name: t.text, pos: t.pos });
  }

  private call(t: Extract<Token, { t: 'ident' }>): Node {
    const name = t.text.toLowerCase();
    const spec = FUNCTIONS.get(name);
    if (!spec) {
      const why = REFUSED_FUNCTIONS.get(name) ?? 'it is not in the function allow-list (docs/expressions.md)';
      throw new ExpressionSyntaxError(t.pos, `function ${name} is not allowed: ${why}`);
    }
    this.i += 2;
    const args: Node[] = [];
    if (!this.op(')')) {
      do args.push(this.expr());
      while (this.op(','));
      this.expectOp(')', `expected "," or ")" in the arguments of ${name}`);
    }
    if (args.length < spec.min || args.length > spec.max) {
      const bounds = spec.min === spec.max ? `${spec.min}` : spec.max === Infinity ? `at least ${spec.min}` : `${spec.min} to ${spec.max}`;
      throw new ExpressionSyntaxError(t.pos, `${name} takes ${bounds} argument${spec.min === 1 && spec.max === 1 ? '' : 's'}, not ${args.length}`);
    }
    return this.node({ kind: 'call', name, args, pos: t.pos });
  }

  private caseExpr(t: Token): Node {
    this.i++;
    if (this.peekWord('END')) this.unexpected(this.peek(), 'CASE needs at least one WHEN');
    const subject = this.peekWord('WHEN') ? undefined : this.expr();
    const branches: { when: Node; then: Node }[] = [];
    while (this.word('WHEN')) {
      const when = this.expr();
      if (!this.word('THEN')) this.unexpected(this.peek(), 'expected THEN');
      branches.push({ when, then: this.expr() });
    }
    if (branches.length === 0) this.unexpected(this.peek(), 'CASE needs at least one WHEN');
    const otherwise = this.word('ELSE') ? this.expr() : undefined;
    if (!this.word('END')) this.unexpected(this.peek(), 'expected WHEN, ELSE or END');
    return this.node({ kind: 'case', subject, branches, otherwise, pos: t.pos });
  }

  private castExpr(t: Token): Node {
    this.i++;
    this.expectOp('(', 'CAST takes (expression AS type)');
    const operand = this.expr();
    if (!this.word('AS')) this.unexpected(this.peek(), 'CAST takes (expression AS type)');
    const type = this.castType();
    this.expectOp(')', 'expected ")" after the CAST type');
    return this.node({ kind: 'cast', operand, type, pos: t.pos });
  }

  private castType(): string {
    const t = this.peek();
    const why = `CAST takes a primitive type: ${[...new Set(CAST_TYPES.values())].join(', ')} or decimal(p,s)`;
    if (t.t !== 'ident' || t.quoted) return this.unexpected(t, why);
    const simple = CAST_TYPES.get(t.upper);
    if (simple) {
      this.i++;
      return simple;
    }
    if (!DECIMAL_TYPES.has(t.upper)) return this.unexpected(t, why);
    this.i++;
    if (!this.op('(')) return 'decimal(10,0)';
    const precision = this.smallInt(1, 38, 'the precision of a decimal is 1 to 38');
    const scale = this.op(',') ? this.smallInt(0, precision, `the scale of a decimal is 0 to its precision (${precision})`) : 0;
    this.expectOp(')', 'expected ")" after the decimal precision and scale');
    return `decimal(${precision},${scale})`;
  }

  private smallInt(min: number, max: number, why: string): number {
    const t = this.peek();
    if (t.t !== 'number' || !/^\d+$/.test(t.text) || Number(t.text) < min || Number(t.text) > max) return this.unexpected(t, why);
    this.i++;
    return Number(t.text);
  }

  /** A literal in an IN list: a number (optionally signed), a string, TRUE, FALSE, NULL or a typed literal. */
  private literal(why: string): Node {
    const t = this.peek();
    if (t.t === 'op' && t.text === '-' && this.peek(1).t === 'number') {
      this.i += 2;
      return this.node({ kind: 'literal', value: numberLiteral(this.tokens[this.i - 1] as Extract<Token, { t: 'number' }>, true), pos: t.pos });
    }
    if (t.t === 'number' || t.t === 'string') return this.primary();
    if (t.t === 'error') throw new ExpressionSyntaxError(t.pos, t.message);
    if (t.t === 'ident' && !t.quoted) {
      const refused = REFUSED_WORDS.get(t.upper);
      if (refused) return this.unexpected(t, refused);
      if (['TRUE', 'FALSE', 'NULL'].includes(t.upper) || ((t.upper === 'DATE' || t.upper === 'TIMESTAMP') && this.peek(1).t === 'string'))
        return this.primary();
    }
    return this.unexpected(t, why);
  }

  private string(why: string): string {
    const t = this.peek();
    if (t.t !== 'string') return this.unexpected(t, why);
    this.i++;
    return t.value;
  }

  // --- helpers

  private binary(op: BinaryOp, left: Node, right: Node, pos: number): Node {
    return this.node({ kind: 'binary', op, left, right, pos });
  }

  /** Registers a node's height; refuses the expression once it is deeper than the bound. */
  private node(n: Node): Node {
    let below = 0;
    for (const child of children(n)) below = Math.max(below, this.heights.get(child) ?? 1);
    if (below + 1 > MAX_EXPRESSION_DEPTH) throw new ExpressionSyntaxError(n.pos, `nests deeper than ${MAX_EXPRESSION_DEPTH} levels`);
    this.heights.set(n, below + 1);
    return n;
  }

  /** Recursion guard: 100k "(" must be a config error, not a stack overflow. */
  private nested<T>(f: () => T): T {
    if (++this.depth > MAX_EXPRESSION_DEPTH) throw new ExpressionSyntaxError(this.peek().pos, `nests deeper than ${MAX_EXPRESSION_DEPTH} levels`);
    try {
      return f();
    } finally {
      this.depth--;
    }
  }

  private peek(ahead = 0): Token {
    return this.tokens[Math.min(this.i + ahead, this.tokens.length - 1)]!;
  }

  private peekWord(upper: string): boolean {
    const t = this.peek();
    return t.t === 'ident' && !t.quoted && t.upper === upper;
  }

  private word(upper: string): boolean {
    if (!this.peekWord(upper)) return false;
    this.i++;
    return true;
  }

  private op(text: string): boolean {
    const t = this.peek();
    if (t.t !== 'op' || t.text !== text) return false;
    this.i++;
    return true;
  }

  private expectOp(text: string, why: string): void {
    if (!this.op(text)) this.unexpected(this.peek(), why);
  }

  private unexpected(t: Token, why?: string): never {
    if (t.t === 'error') throw new ExpressionSyntaxError(t.pos, t.message);
    const what = t.t === 'eof' ? 'unexpected end of expression' : `unexpected ${JSON.stringify(t.text)}`;
    throw new ExpressionSyntaxError(t.pos, why ? `${what} (${why})` : what);
  }
}

function literalWord(upper: string): Literal {
  return upper === 'NULL' ? { type: 'null' } : { type: 'boolean', value: upper === 'TRUE' };
}

/** Integers are INT, then BIGINT, then DECIMAL(38,0) as they grow (as Spark SQL types them); `1.50` is DECIMAL(3,2); `1e3` is DOUBLE. */
function numberLiteral(t: Extract<Token, { t: 'number' }>, negative: boolean): Literal {
  const sign = negative ? '-' : '';
  if (/[eE]/.test(t.text)) {
    const value = Number(sign + t.text);
    if (!Number.isFinite(value)) throw new ExpressionSyntaxError(t.pos, `${t.text} is out of range for a DOUBLE`);
    return { type: 'double', value };
  }
  const [whole = '', fraction] = t.text.split('.');
  if (fraction === undefined) {
    const n = BigInt(sign + whole);
    if (n >= INT_MIN && n <= INT_MAX) return { type: 'int', value: Number(n) };
    if (n >= LONG_MIN && n <= LONG_MAX) return { type: 'bigint', value: n };
  }
  const digits = whole.replace(/^0+/, '');
  const scale = fraction?.length ?? 0;
  const precision = Math.max(digits.length + scale, 1);
  if (precision > 38) throw new ExpressionSyntaxError(t.pos, `${t.text} has more than 38 digits`);
  return { type: 'decimal', value: `${sign}${digits || '0'}${fraction === undefined ? '' : `.${fraction}`}`, precision, scale };
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?)?(?:Z|[+-]\d{2}:\d{2})?$/;

function validDate(iso: string): boolean {
  const d = new Date(`${iso}T00:00:00Z`);
  return DATE.test(iso) && !Number.isNaN(d.getTime()) && d.toISOString().startsWith(iso);
}

function typedLiteral(keyword: string, t: Extract<Token, { t: 'string' }>): Literal {
  if (keyword === 'DATE') {
    if (!validDate(t.value)) throw new ExpressionSyntaxError(t.pos, `DATE ${t.text} is not a calendar date like '2026-07-05'`);
    return { type: 'date', value: t.value };
  }
  const m = TIMESTAMP.exec(t.value);
  const ok = m !== null && validDate(m[1]!) && Number(m[2] ?? 0) < 24 && Number(m[3] ?? 0) < 60 && Number(m[4] ?? 0) < 60;
  if (!ok)
    throw new ExpressionSyntaxError(t.pos, `TIMESTAMP ${t.text} is not a timestamp like '2026-07-05 10:30:00' (optionally with .ffffff and Z or ±hh:mm)`);
  return { type: 'timestamp', value: t.value };
}
