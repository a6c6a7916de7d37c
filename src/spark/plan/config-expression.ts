import type { ConfigExpression, Literal, Node } from '../../core/expression/index.js';
import { ANY_ONE, type LikePattern, type LikeSegment, readLikePattern } from '../../core/expression/like.js';
import { type Expr, type LiteralValue, and, cast, col, eq, eqNullSafe, fn, isIn, isNotNull, isNull, lit, not, or } from './expressions.js';

/**
 * A config expression's tree (src/core/expression) as plan nodes: columns become `col` (one quoted
 * identifier), literals `lit`, operators and allow-listed functions Spark's built-in function of
 * the same meaning, by name. Only this tree, never the config's text, reaches a plan.
 */
export function configExpr(e: ConfigExpression): Expr {
  const x = toExpr(e.ast);
  configLogic.add(x);
  return x;
}

/** The plan nodes made from config: the tenant policy checks the relations that hold them. */
const configLogic = new WeakSet<Expr>();

/** Is this expression (itself, not a part of it) one made from a config expression? */
export const isConfigExpr = (x: Expr): boolean => configLogic.has(x);

export function toExpr(n: Node): Expr {
  switch (n.kind) {
    case 'column':
      return col(n.name);
    case 'literal':
      return literal(n.value);
    case 'unary':
      if (n.op === 'not') return not(toExpr(n.operand));
      return n.op === '-' ? fn('negative', toExpr(n.operand)) : fn('positive', toExpr(n.operand));
    case 'binary': {
      const [l, r] = [toExpr(n.left), toExpr(n.right)];
      switch (n.op) {
        case 'and':
          return and(l, r);
        case 'or':
          return or(l, r);
        case '=':
          return eq(l, r);
        case '!=':
          return not(eq(l, r));
        case '<=>':
          return eqNullSafe(l, r);
        default:
          return fn(n.op, l, r);
      }
    }
    case 'isNull':
      return n.negated ? isNotNull(toExpr(n.operand)) : isNull(toExpr(n.operand));
    case 'isBoolean': {
      // Spark's own reading of IS [NOT] TRUE: a null-safe comparison, never NULL.
      const is = eqNullSafe(toExpr(n.operand), lit(n.value));
      return n.negated ? not(is) : is;
    }
    case 'in': {
      const inList = isIn(toExpr(n.operand), n.values.map(toExpr));
      return n.negated ? not(inList) : inList;
    }
    case 'between': {
      const x = toExpr(n.operand);
      const within = and(fn('>=', x, toExpr(n.low)), fn('<=', x, toExpr(n.high)));
      return n.negated ? not(within) : within;
    }
    case 'like': {
      // Never Spark's LIKE (a regular expression that can backtrack for hours): string functions.
      const like = likeExpr(toExpr(n.operand), readLikePattern(n.pattern, n.escape));
      return n.negated ? not(like) : like;
    }
    case 'case': {
      // Spark Connect's `when`: [condition, value, condition, value, …, else?], as PySpark sends it.
      const subject = n.subject === undefined ? undefined : toExpr(n.subject);
      const args = n.branches.flatMap((b) => [subject === undefined ? toExpr(b.when) : eq(subject, toExpr(b.when)), toExpr(b.then)]);
      return fn('when', ...args, ...(n.otherwise === undefined ? [] : [toExpr(n.otherwise)]));
    }
    case 'cast':
      return cast(toExpr(n.operand), n.type);
    case 'call':
      return fn(n.name, ...n.args.map(toExpr));
  }
}

function literal(v: Literal): Expr {
  switch (v.type) {
    case 'null':
      return lit(null);
    case 'boolean':
    case 'string':
    case 'int':
    case 'bigint':
      return lit(v.value);
    case 'decimal':
      return lit({ decimal: v.value, precision: v.precision, scale: v.scale } satisfies LiteralValue);
    case 'double':
      return lit({ double: v.value });
    case 'date':
      return lit({ date: v.value });
    case 'timestamp':
      // Spark's own string-to-timestamp reading: the session time zone unless the text has an offset,
      // and microseconds kept (a JavaScript Date would drop them).
      return cast(lit(v.value), 'timestamp');
  }
}

/**
 * `s LIKE pattern` in linear time, with LIKE's NULLs (NULL when `s` is NULL, else true or false):
 * the length is at least what the pattern's literal characters and `_`s need; the prefix and the
 * suffix are compared in place (`startswith`, `endswith`, or `substring` around the `_`s); the
 * segments between `%`s are found in order, each at its first place after the one before (which is
 * where any match can take it: a segment has no `_`, src/core/expression/like.ts), the last one
 * ending before the suffix starts. A segment not found makes every later `locate` start at NULL,
 * which `locate` answers with 0.
 */
export function likeExpr(s: Expr, p: LikePattern): Expr {
  const { segments } = p;
  const length = fn('length', s);
  const text = (seg: LikeSegment) => seg.join('');
  if (segments.length === 1) {
    const only = segments[0]!;
    return only.includes(ANY_ONE) ? and(eq(length, lit(only.length)), ...inPlace(s, only, 'start')) : eq(s, lit(text(only)));
  }
  const prefix = segments[0]!;
  const suffix = segments[segments.length - 1]!;
  const inner = segments.slice(1, -1);
  const need = segments.reduce((n, seg) => n + seg.length, 0);
  const conditions: Expr[] = [fn('>=', length, lit(need)), ...inPlace(s, prefix, 'start'), ...inPlace(s, suffix, 'end')];
  let found: Expr | undefined;
  let last = 0;
  for (const seg of inner) {
    const from = found === undefined ? lit(prefix.length + 1) : fn('+', fn('nullif', found, lit(0)), lit(last));
    found = fn('locate', lit(text(seg)), s, from);
    last = seg.length;
  }
  if (found !== undefined) conditions.push(fn('>', found, lit(0)), fn('<=', fn('+', found, lit(last - 1)), fn('-', length, lit(suffix.length))));
  // `locate` answers a NULL start with 0 even when the text is NULL: from the second segment on,
  // a NULL text would read as "no match" (false) where LIKE says NULL.
  return inner.length > 1 ? fn('if', isNull(s), lit(null), and(...conditions)) : and(...conditions);
}

/** A prefix or suffix compared in place: whole, or its literal runs around the `_`s. */
function inPlace(s: Expr, seg: LikeSegment, at: 'start' | 'end'): Expr[] {
  if (seg.length === 0) return [];
  if (!seg.includes(ANY_ONE)) return [fn(at === 'start' ? 'startswith' : 'endswith', s, lit(seg.join('')))];
  const out: Expr[] = [];
  for (let k = 0; k < seg.length;) {
    if (seg[k] === ANY_ONE) {
      k++;
      continue;
    }
    let end = k;
    while (end < seg.length && seg[end] !== ANY_ONE) end++;
    // 1-based from the start; from the end, a negative position counts back from the last character.
    const position = at === 'start' ? k + 1 : -(seg.length - k);
    out.push(eq(fn('substring', s, lit(position), lit(end - k)), lit(seg.slice(k, end).join(''))));
    k = end;
  }
  return out;
}
