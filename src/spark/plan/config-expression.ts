import type { ConfigExpression, Literal, Node } from '../../core/expression/index.js';
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

/** The plan nodes made from config: the tenant read policy checks the relations that hold them. */
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
      const args = [toExpr(n.operand), lit(n.pattern), ...(n.escape === undefined ? [] : [lit(n.escape)])];
      const like = fn('like', ...args);
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
