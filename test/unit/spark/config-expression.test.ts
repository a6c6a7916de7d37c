import { describe, expect, it } from 'vitest';
import { toJson } from '@bufbuild/protobuf';
import { expression as configExpression } from '../../../src/core/config/validate.js';
import { compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { configExpr } from '../../../src/spark/plan/config-expression.js';
import { type Expr, and, cast, col, eq, eqNullSafe, fn, isIn, isNotNull, isNull, lit, not, or } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';

/** What a config expression becomes in a plan: Spark's built-in functions by name, never SQL text. */
const compiled = (text: string): Expr => configExpr(configExpression('test').parse(text));

describe('config expressions as plan nodes', () => {
  it.each<[string, Expr]>([
    ['a', col('a')],
    ['`Weird_Name`', col('Weird_Name')],
    ['a = 1', eq(col('a'), lit(1))],
    ['a == 1', eq(col('a'), lit(1))],
    ["a != 'x'", not(eq(col('a'), lit('x')))],
    ["a <> 'x'", not(eq(col('a'), lit('x')))],
    ['a <=> b', eqNullSafe(col('a'), col('b'))],
    ['a < 1', fn('<', col('a'), lit(1))],
    ['a <= 1', fn('<=', col('a'), lit(1))],
    ['a > 1', fn('>', col('a'), lit(1))],
    ['a >= 1', fn('>=', col('a'), lit(1))],
    ['a + b * c', fn('+', col('a'), fn('*', col('b'), col('c')))],
    ['a - b / c % d', fn('-', col('a'), fn('%', fn('/', col('b'), col('c')), col('d')))],
    ['-a', fn('negative', col('a'))],
    ['+a', fn('positive', col('a'))],
    ['a AND b OR NOT c', or(and(col('a'), col('b')), not(col('c')))],
    ['a IS NULL', isNull(col('a'))],
    ['a IS NOT NULL', isNotNull(col('a'))],
    ['a IS TRUE', eqNullSafe(col('a'), lit(true))],
    ['a IS NOT FALSE', not(eqNullSafe(col('a'), lit(false)))],
    ["a IN (1, 'x', NULL)", isIn(col('a'), [lit(1), lit('x'), lit(null)])],
    ['a NOT IN (-1)', not(isIn(col('a'), [lit(-1)]))],
    ['a BETWEEN 1 AND b', and(fn('>=', col('a'), lit(1)), fn('<=', col('a'), col('b')))],
    ['a NOT BETWEEN 1 AND 2', not(and(fn('>=', col('a'), lit(1)), fn('<=', col('a'), lit(2))))],
    // LIKE: string functions in linear time, never Spark's LIKE (a regular expression).
    ["a LIKE 'x'", eq(col('a'), lit('x'))],
    ["a LIKE 'x%'", and(fn('>=', fn('length', col('a')), lit(1)), fn('startswith', col('a'), lit('x')))],
    ["a NOT LIKE 'x!%' ESCAPE '!'", not(eq(col('a'), lit('x%')))],
    [
      "a LIKE '_x%y_'",
      and(
        fn('>=', fn('length', col('a')), lit(4)),
        eq(fn('substring', col('a'), lit(2), lit(1)), lit('x')),
        eq(fn('substring', col('a'), lit(-2), lit(1)), lit('y')),
      ),
    ],
    [
      "a LIKE 'p%bc%d%s'",
      // From the second segment on, a NULL text would answer false: NULL for it first.
      fn(
        'if',
        isNull(col('a')),
        lit(null),
        and(
          fn('>=', fn('length', col('a')), lit(5)),
          fn('startswith', col('a'), lit('p')),
          fn('endswith', col('a'), lit('s')),
          fn('>', fn('locate', lit('d'), col('a'), fn('+', fn('nullif', fn('locate', lit('bc'), col('a'), lit(2)), lit(0)), lit(2))), lit(0)),
          fn(
            '<=',
            fn('+', fn('locate', lit('d'), col('a'), fn('+', fn('nullif', fn('locate', lit('bc'), col('a'), lit(2)), lit(0)), lit(2))), lit(0)),
            fn('-', fn('length', col('a')), lit(1)),
          ),
        ),
      ),
    ],
    ['CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END', fn('when', col('a'), lit(1), col('b'), lit(2), lit(3))],
    ["CASE a WHEN 'x' THEN 1 END", fn('when', eq(col('a'), lit('x')), lit(1))],
    ['CAST(a AS decimal(10,2))', cast(col('a'), 'decimal(10,2)')],
    ['CAST(a AS integer)', cast(col('a'), 'int')],
    ['Coalesce(a, 0)', fn('coalesce', col('a'), lit(0))],
    ['2147483648', lit(2147483648n)],
    ['99999999999999999999', lit({ decimal: '99999999999999999999', precision: 20, scale: 0 })],
    ['-1.50', lit({ decimal: '-1.50', precision: 3, scale: 2 })],
    ['1e3', lit({ double: 1000 })],
    ["DATE '2026-07-05'", lit({ date: '2026-07-05' })],
    ["TIMESTAMP '2026-07-05 10:30:00.123456'", cast(lit('2026-07-05 10:30:00.123456'), 'timestamp')],
    ['TRUE', lit(true)],
    ['NULL', lit(null)],
  ])('%s', (text, want) => {
    expect(compiled(text)).toEqual(want);
  });

  it('compiles to protobuf without any expression string, keeping literal types', () => {
    const plan = compileRelationPlan(
      Query.range(0n, 1n).filter(compiled("a > 2147483648 AND b = 1e3 AND c = 1.50 AND d = DATE '2026-07-05' AND e = '-- not a comment'")).rel,
      { reveal: false },
    );
    const json = JSON.stringify(toJson(PlanSchema, plan));
    expect(json).not.toContain('expressionString');
    expect(json).toContain('{"literal":{"long":"2147483648"}}');
    expect(json).toContain('{"literal":{"double":1000}}');
    expect(json).toContain('{"literal":{"decimal":{"value":"1.50","precision":3,"scale":2}}}');
    expect(json).toContain('{"literal":{"date":20639}}');
    expect(json).toContain('{"literal":{"string":"-- not a comment"}}');
  });
});
