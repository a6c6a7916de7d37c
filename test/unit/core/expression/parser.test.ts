import { describe, expect, it } from 'vitest';
import { FUNCTIONS, MAX_EXPRESSION_DEPTH, type Node, parseExpression } from '../../../../src/core/expression/index.js';

/** A compact rendering of the tree, so precedence reads at a glance: (and (= a 1) b). */
function show(n: Node): string {
  switch (n.kind) {
    case 'column':
      return n.name;
    case 'literal': {
      const v = n.value;
      if (v.type === 'null') return 'NULL';
      if (v.type === 'decimal') return `${v.value}:decimal(${v.precision},${v.scale})`;
      if (v.type === 'string') return JSON.stringify(v.value);
      return `${String(v.value)}:${v.type}`;
    }
    case 'unary':
      return `(${n.op} ${show(n.operand)})`;
    case 'binary':
      return `(${n.op} ${show(n.left)} ${show(n.right)})`;
    case 'isNull':
      return `(${n.negated ? 'isnotnull' : 'isnull'} ${show(n.operand)})`;
    case 'isBoolean':
      return `(is${n.negated ? 'not' : ''}${n.value} ${show(n.operand)})`;
    case 'in':
      return `(${n.negated ? 'notin' : 'in'} ${show(n.operand)} ${n.values.map(show).join(' ')})`;
    case 'between':
      return `(${n.negated ? 'notbetween' : 'between'} ${show(n.operand)} ${show(n.low)} ${show(n.high)})`;
    case 'like':
      return `(${n.negated ? 'notlike' : 'like'} ${show(n.operand)} ${JSON.stringify(n.pattern)}${n.escape === undefined ? '' : ` ${JSON.stringify(n.escape)}`})`;
    case 'case':
      return `(case${n.subject ? ` ${show(n.subject)}` : ''} ${n.branches.map((b) => `[${show(b.when)} ${show(b.then)}]`).join(' ')}${n.otherwise ? ` else ${show(n.otherwise)}` : ''})`;
    case 'cast':
      return `(cast ${show(n.operand)} ${n.type})`;
    case 'call':
      return `${n.name}(${n.args.map(show).join(' ')})`;
  }
}

function parsed(text: string): string {
  const r = parseExpression(text);
  if (!r.ok) throw new Error(`expected ${JSON.stringify(text)} to parse, got: at position ${r.pos}: ${r.message}`);
  return show(r.ast);
}

function refused(text: string): string {
  const r = parseExpression(text);
  if (r.ok) throw new Error(`expected ${JSON.stringify(text)} to be refused, parsed as ${show(r.ast)}`);
  return `${r.pos}: ${r.message}`;
}

describe('config expression grammar: what it accepts', () => {
  it.each([
    ['a', 'a'],
    ['`end`', 'end'],
    ['`Order_Id`', 'Order_Id'],
    ['a = 1', '(= a 1:int)'],
    ['a == 1', '(= a 1:int)'],
    ["a != 'x'", '(!= a "x")'],
    ["a <> 'x'", '(!= a "x")'],
    ['a < 1 ', '(< a 1:int)'],
    ['a <= 1', '(<= a 1:int)'],
    ['a > 1', '(> a 1:int)'],
    ['a >= 1', '(>= a 1:int)'],
    ['a <=> NULL', '(<=> a NULL)'],
    ['a + b - c', '(- (+ a b) c)'],
    ['a * b / c % d', '(% (/ (* a b) c) d)'],
    ['-a', '(- a)'],
    ['+a', '(+ a)'],
    ['- -a', '(- (- a))'],
    ['NOT a', '(not a)'],
    ['NOT NOT a', '(not (not a))'],
    ['a IS NULL', '(isnull a)'],
    ['a is not null', '(isnotnull a)'],
    ['a IS TRUE', '(istrue a)'],
    ['a IS NOT FALSE', '(isnotfalse a)'],
    ["a IN (1, -2, 'x', NULL, TRUE, DATE '2026-07-05', 1.5)", '(in a 1:int -2:int "x" NULL true:boolean 2026-07-05:date 1.5:decimal(2,1))'],
    ['a NOT IN (1)', '(notin a 1:int)'],
    ['a BETWEEN 1 AND 2', '(between a 1:int 2:int)'],
    ['a NOT BETWEEN b - 1 AND b + 1', '(notbetween a (- b 1:int) (+ b 1:int))'],
    ["a LIKE 'x%'", '(like a "x%")'],
    ["a NOT LIKE 'x!%%' ESCAPE '!'", '(notlike a "x!%%" "!")'],
    ["CASE WHEN a > 1 THEN 'x' WHEN a > 0 THEN 'y' ELSE 'z' END", '(case [(> a 1:int) "x"] [(> a 0:int) "y"] else "z")'],
    ["case a when 1 then 'one' end", '(case a [1:int "one"])'],
    ['CAST(a AS int)', '(cast a int)'],
    ['cast(a as DECIMAL(10, 2))', '(cast a decimal(10,2))'],
    ['CAST(a AS numeric(5))', '(cast a decimal(5,0))'],
    ['CAST(a AS decimal)', '(cast a decimal(10,0))'],
    ['CAST(a AS long)', '(cast a bigint)'],
    ['CAST(a AS timestamp_ntz)', '(cast a timestamp_ntz)'],
    ['UPPER(a)', 'upper(a)'],
    ['coalesce(a, b, c, 0)', 'coalesce(a b c 0:int)'],
    ["if(a > 1, 'x', 'y')", 'if((> a 1:int) "x" "y")'],
  ])('%s', (text, want) => {
    expect(parsed(text)).toBe(want);
  });

  it('binds operators loosest to tightest: OR, AND, NOT, predicates, comparisons, + -, * / %, sign', () => {
    expect(parsed('a OR b AND c')).toBe('(or a (and b c))');
    expect(parsed('a AND b OR c')).toBe('(or (and a b) c)');
    expect(parsed('NOT a AND b')).toBe('(and (not a) b)');
    expect(parsed('NOT a = 1')).toBe('(not (= a 1:int))');
    expect(parsed('a = 1 OR b IS NULL AND c IN (1)')).toBe('(or (= a 1:int) (and (isnull b) (in c 1:int)))');
    expect(parsed('a + 1 > b * 2')).toBe('(> (+ a 1:int) (* b 2:int))');
    expect(parsed('1 + 2 * 3')).toBe('(+ 1:int (* 2:int 3:int))');
    expect(parsed('(1 + 2) * 3')).toBe('(* (+ 1:int 2:int) 3:int)');
    expect(parsed('-a * b')).toBe('(* (- a) b)');
    expect(parsed('a BETWEEN 1 AND 2 AND b')).toBe('(and (between a 1:int 2:int) b)');
    expect(parsed('a + 1 IS NULL')).toBe('(isnull (+ a 1:int))');
    expect(parsed("NOT a LIKE 'x'")).toBe('(not (like a "x"))');
  });

  it('takes line breaks, tabs and any case as whitespace and keywords', () => {
    expect(parsed('a = 1\n\tAND\r\n b = 2')).toBe('(and (= a 1:int) (= b 2:int))');
    expect(parsed('a iS nOt NuLl')).toBe('(isnotnull a)');
  });

  it('types numbers as Spark SQL does: INT, BIGINT, DECIMAL, DOUBLE', () => {
    expect(parsed('2147483647')).toBe('2147483647:int');
    expect(parsed('-2147483648')).toBe('-2147483648:int');
    expect(parsed('2147483648')).toBe('2147483648:bigint');
    expect(parsed('-9223372036854775808')).toBe('-9223372036854775808:bigint');
    expect(parsed('9223372036854775808')).toBe('9223372036854775808:decimal(19,0)');
    expect(parsed('1.50')).toBe('1.50:decimal(3,2)');
    expect(parsed('0.5')).toBe('0.5:decimal(1,1)');
    expect(parsed('.5')).toBe('0.5:decimal(1,1)');
    expect(parsed('-007.25')).toBe('-7.25:decimal(3,2)');
    expect(parsed('1e3')).toBe('1000:double');
    expect(parsed('2.5E-1')).toBe('0.25:double');
    expect(parsed('9'.repeat(38))).toBe(`${'9'.repeat(38)}:decimal(38,0)`);
    expect(refused('9'.repeat(39))).toBe(`1: ${'9'.repeat(39)} has more than 38 digits`);
    expect(refused('1e999')).toBe('1: 1e999 is out of range for a DOUBLE');
  });

  it("reads strings the standard SQL way: '' is a quote, a backslash is itself", () => {
    expect(parsed("'it''s'")).toBe('"it\'s"');
    expect(parsed("'a\\nb'")).toBe('"a\\\\nb"');
    expect(parsed("'SELECT * FROM t; -- /* */ ${x}'")).toBe('"SELECT * FROM t; -- /* */ ${x}"');
    expect(parsed("''")).toBe('""');
  });

  it('reads DATE and TIMESTAMP literals, and date and timestamp as column names', () => {
    const lit = (text: string) => {
      const r = parseExpression(text);
      return r.ok && r.ast.kind === 'literal' ? r.ast.value : undefined;
    };
    expect(lit("DATE '2026-07-05'")).toEqual({ type: 'date', value: '2026-07-05' });
    expect(lit("date'2024-02-29'")).toEqual({ type: 'date', value: '2024-02-29' });
    for (const ts of [
      '2026-07-05',
      '2026-07-05 10:30',
      '2026-07-05T10:30:45',
      '2026-07-05 10:30:45.123456',
      '2026-07-05 10:30:45Z',
      '2026-07-05 10:30:45+02:00',
    ])
      expect(lit(`TIMESTAMP '${ts}'`)).toEqual({ type: 'timestamp', value: ts });
    expect(parsed('date = 1')).toBe('(= date 1:int)');
    expect(parsed('timestamp IS NULL')).toBe('(isnull timestamp)');
    expect(refused("DATE '2026-02-30'")).toBe("6: DATE '2026-02-30' is not a calendar date like '2026-07-05'");
    expect(refused("DATE '5 July'")).toMatch(/^6: DATE '5 July' is not a calendar date/);
    expect(refused("TIMESTAMP '2026-07-05 25:00:00'")).toMatch(/^11: TIMESTAMP '2026-07-05 25:00:00' is not a timestamp/);
    expect(refused("TIMESTAMP 'now'")).toMatch(/^11: TIMESTAMP 'now' is not a timestamp/);
  });

  it('accepts every allow-listed function with its arity bounds, case-insensitively, and refuses other counts', () => {
    // What multiplies a value's size takes its multiplier as a literal (size.ts): 3 and 'x' there.
    const literal: Record<string, Record<number, [string, string]>> = {
      repeat: { 1: ['3', '3:int'] },
      lpad: { 1: ['3', '3:int'] },
      rpad: { 1: ['3', '3:int'] },
      replace: { 1: ["'x'", '"x"'], 2: ["'y'", '"y"'] },
    };
    for (const [name, { min, max }] of FUNCTIONS) {
      const arg = (i: number) => literal[name]?.[i] ?? [`a${i}`, `a${i}`];
      const args = (n: number) => Array.from({ length: n }, (_, i) => arg(i)[0]).join(', ');
      expect(parsed(`${name.toUpperCase()}(${args(min)})`)).toBe(`${name}(${Array.from({ length: min }, (_, i) => arg(i)[1]).join(' ')})`);
      if (min > 0)
        expect(refused(`${name}(${args(min - 1)})`)).toMatch(new RegExp(`^1: ${name} takes (at least )?${min}( to ${max})? arguments?, not ${min - 1}$`));
      if (max !== Infinity) expect(refused(`${name}(${args(max + 1)})`)).toMatch(new RegExp(`^1: ${name} takes .*, not ${max + 1}$`));
    }
  });
});

describe('config expression grammar: what it refuses, and where', () => {
  it.each([
    // the bypasses of the old deny-list
    ["`java_method`('java.lang.System', 'exit', 1)", '1: backticked function names are not allowed'],
    ["reflect /*x*/ ('java.lang.Runtime', 'getRuntime')", '9: comments (/* */) are not allowed'],
    ["reflect\n('java.lang.Runtime', 'getRuntime')", '1: function reflect is not allowed: reflection runs Java code on the shared server'],
    ["JAVA_METHOD('x', 'y')", '1: function java_method is not allowed: reflection runs Java code on the shared server'],
    ["try_reflect('x', 'y')", '1: function try_reflect is not allowed: reflection runs Java code on the shared server'],
    [
      'EXISTS (TABLE lake.beta_silver.t)',
      '1: unexpected "EXISTS" (subqueries and table references are not allowed: an expression sees only the columns of its row)',
    ],
    ['a = 1 OR exists (select 1)', '10: unexpected "exists" (subqueries and table references are not allowed: an expression sees only the columns of its row)'],
    [
      '(FROM t |> AGGREGATE count(*))',
      '2: unexpected "FROM" (subqueries and table references are not allowed: an expression sees only the columns of its row)',
    ],
    ['x |> y', '3: pipe syntax (|>) is not allowed: an expression sees only the columns of its row'],
    ['x IN (TABLE t)', '7: unexpected "TABLE" (subqueries and table references are not allowed: an expression sees only the columns of its row)'],
    ['x IN (SELECT id FROM t)', '7: unexpected "SELECT" (subqueries and table references are not allowed: an expression sees only the columns of its row)'],
    ['x = (SELECT max(id) FROM t)', '6: unexpected "SELECT" (subqueries and table references are not allowed: an expression sees only the columns of its row)'],
    ['input_file_name() IS NULL', '1: function input_file_name is not allowed: it discloses the server and session, not the row'],
    ["current_user() = 'root'", '1: function current_user is not allowed: it discloses the server and session, not the row'],
    ["current_user = 'root'", '1: "current_user" cannot be a column name here: Spark reads it as a function when the row has no such column'],
    ["`USER` = 'root'", '1: "USER" cannot be a column name here: Spark reads it as a function when the row has no such column'],
    ['transform(a, x -> x)', '1: function transform is not allowed: lambdas are not part of the language'],
    ['upper(a, x -> x)', '12: lambdas (->) are not allowed'],
    // other SQL the language does not have
    ['rand() > 0.5', '1: function rand is not allowed: it is not deterministic: a rerun must select the same rows'],
    ['uuid()', '1: function uuid is not allowed: it is not deterministic: a rerun must select the same rows'],
    ['count(*) > 1', '1: function count is not allowed: aggregates see more than one row'],
    ['my_udf(a)', '1: function my_udf is not allowed: it is not in the function allow-list (docs/expressions.md)'],
    ["identifier('lake.t')", '1: function identifier is not allowed: it is not in the function allow-list (docs/expressions.md)'],
    ['a = 1 -- comment', '7: comments (--) are not allowed'],
    ['a = 1 /* comment */', '7: comments (/* */) are not allowed'],
    ['a = 1; DROP TABLE t', '6: semicolons are not allowed: a config holds one expression, not statements'],
    ['a = :p', '5: parameters and casts with : (:name, ::type) are not allowed; use CAST(x AS type)'],
    ['a = ?', '5: parameters (?) are not allowed'],
    ['a = ${x}', '5: substitutions (${…}) are not allowed in an expression'],
    ['a = $x', '5: $ is not allowed in an expression'],
    ['a = "x"', '5: double quotes are not allowed: strings take single quotes, column names backticks'],
    ['t.a = 1', '2: qualified names (a.b) are not allowed: an expression names only columns of its own row'],
    ['lake.beta_silver.t', '5: qualified names (a.b) are not allowed: an expression names only columns of its own row'],
    ['`t.a` = 1', '1: a column name must match ^[A-Za-z_][A-Za-z0-9_]*$'],
    ['`a``b` = 1', '1: a column name must match ^[A-Za-z_][A-Za-z0-9_]*$'],
    ['a[0] = 1', '2: subscripts ([…]) are not supported'],
    ["named_struct('a', 1)", '1: function named_struct is not allowed: it is not in the function allow-list (docs/expressions.md)'],
    ['upper(a => 1)', '9: named arguments (=>) are not allowed'],
    ['a || b', '3: || is not supported: use concat()'],
    ['a & 1', '3: bitwise operators are not supported'],
    ['!a', '1: use NOT instead of !'],
    ['a = 1 \\ 2', '7: a backslash is only allowed inside a string literal'],
    ['a = 10L', '7: a number must end here (type suffixes such as 10L are not supported: use CAST)'],
    ['a = 1.', '6: a number must end here (type suffixes such as 10L are not supported: use CAST)'],
    ['a = \u00e9', '5: unexpected character "\\u00e9"'],
    ['a = \u0000', '5: unexpected character "\\u0000"'],
    ["a = 'open", '5: unterminated string literal'],
    ['`open = 1', '1: unterminated backticked name'],
    ["INTERVAL '1' DAY", '1: unexpected "INTERVAL" (INTERVAL literals are not supported: use date_add, date_sub or add_months)'],
    ['row_number() OVER (ORDER BY a)', '1: function row_number is not allowed: it is not in the function allow-list (docs/expressions.md)'],
    ['a OVER (ORDER BY a)', '3: unexpected "OVER" (window functions are not allowed)'],
    ['upper(DISTINCT a)', '7: unexpected "DISTINCT" (DISTINCT is not allowed: an expression sees only its row)'],
    [
      'CAST(a AS array<int>)',
      '11: unexpected "array" (CAST takes a primitive type: boolean, tinyint, smallint, int, bigint, float, double, string, date, timestamp, timestamp_ntz or decimal(p,s))',
    ],
    [
      'CAST(a AS binary)',
      '11: unexpected "binary" (CAST takes a primitive type: boolean, tinyint, smallint, int, bigint, float, double, string, date, timestamp, timestamp_ntz or decimal(p,s))',
    ],
    ['CAST(a AS decimal(39, 0))', '19: unexpected "39" (the precision of a decimal is 1 to 38)'],
    ['CAST(a AS decimal(5, 6))', '22: unexpected "6" (the scale of a decimal is 0 to its precision (5))'],
    ['CAST(a, int)', '7: unexpected "," (CAST takes (expression AS type))'],
    ['a IN (b)', '7: unexpected "b" (IN takes literals only)'],
    ['a IN (1 + 1)', '9: unexpected "+" (expected "," or ")" in the IN list)'],
    ['a IN ()', '7: unexpected ")" (IN takes literals only)'],
    ['a LIKE b', '8: unexpected "b" (LIKE takes a string literal pattern)'],
    ["a LIKE 'x' ESCAPE '!!'", '19: ESCAPE takes a one-character string literal'],
    [
      "a LIKE '%x_y%'",
      '8: a "_" may stand only before the first "%" or after the last one of a LIKE pattern (between two "%" it would need a regular expression, which can run for hours on the shared server)',
    ],
    ["a LIKE 'x!' ESCAPE '!'", '8: a LIKE pattern cannot end with the escape character "!"'],
    ["a LIKE 'x\\y'", '8: the escape character "\\" may only precede "_", "%" or itself, not "y"'],
    ["a LIKE 'x' ESCAPE '%'", '8: the escape character cannot be "%"'],
    ['a BETWEEN 1', '12: unexpected end of expression (BETWEEN takes "low AND high")'],
    ['a IS 1', '6: unexpected "1" (IS takes NULL, TRUE or FALSE)'],
    ['CASE END', '6: unexpected "END" (CASE needs at least one WHEN)'],
    ['CASE WHEN a THEN 1', '19: unexpected end of expression (expected WHEN, ELSE or END)'],
    ['CASE WHEN a 1 END', '13: unexpected "1" (expected THEN)'],
    ['end = 1', '1: unexpected "end"'],
    ['a = 1 b', '7: unexpected "b" (expected an operator or the end)'],
    ['a =', '4: unexpected end of expression'],
    ['(a = 1', '7: unexpected end of expression (expected ")")'],
    ['a = 1)', '6: unexpected ")" (expected an operator or the end)'],
    ['upper(a', '8: unexpected end of expression (expected "," or ")" in the arguments of upper)'],
    ['upper(*)', '7: unexpected "*"'],
    ['', '1: is empty'],
    [' \n ', '1: is empty'],
  ])('%s', (text, want) => {
    expect(refused(text)).toBe(want);
  });

  it('reports the first problem in the text', () => {
    expect(refused('input_file_name() = 1 -- x')).toBe('1: function input_file_name is not allowed: it discloses the server and session, not the row');
    expect(refused('a = 1 -- x\nOR input_file_name()')).toBe('7: comments (--) are not allowed');
  });

  it('bounds length and nesting: hostile input is a refusal, never a stack overflow', () => {
    expect(refused('('.repeat(100_000))).toBe('10001: is longer than 10000 characters');
    expect(refused('('.repeat(3_000) + 'a' + ')'.repeat(3_000))).toBe(`${MAX_EXPRESSION_DEPTH + 1}: nests deeper than ${MAX_EXPRESSION_DEPTH} levels`);
    expect(refused('NOT '.repeat(2_000) + 'a')).toMatch(/nests deeper than 64 levels$/);
    expect(refused('- '.repeat(2_000) + 'a')).toMatch(/nests deeper than 64 levels$/);
    expect(refused('upper('.repeat(1_000) + 'a' + ')'.repeat(1_000))).toMatch(/nests deeper than 64 levels$/);
    // Operator chains are parsed in loops, but the tree they build is as deep: bounded the same way.
    expect(refused(Array.from({ length: 1_000 }, (_, i) => `a${i}`).join(' + '))).toMatch(/nests deeper than 64 levels$/);
    expect(refused(Array.from({ length: 1_000 }, () => 'a = 1').join(' OR '))).toMatch(/nests deeper than 64 levels$/);
    // Wide is fine: long IN lists and argument lists are flat.
    expect(parseExpression(`a IN (${Array.from({ length: 1_000 }, (_, i) => i).join(', ')})`).ok).toBe(true);
    expect(parseExpression(`concat(${Array.from({ length: 1_000 }, (_, i) => `'${i}'`).join(', ')})`).ok).toBe(true);
    expect(parseExpression(Array.from({ length: MAX_EXPRESSION_DEPTH - 2 }, (_, i) => `a${i} = 1`).join(' OR ')).ok).toBe(true);
  });
});
