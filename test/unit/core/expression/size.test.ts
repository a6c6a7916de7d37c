import { describe, expect, it } from 'vitest';
import { parseExpression } from '../../../../src/core/expression/index.js';
import { MAX_SIZE_CONSTANT, MAX_SIZE_FACTOR, sizeBound } from '../../../../src/core/expression/size.js';

const bound = (text: string) => {
  const r = parseExpression(text);
  if (!r.ok) throw new Error(`${text}: ${r.message}`);
  return sizeBound(r.ast);
};
const refusal = (text: string) => {
  const r = parseExpression(text);
  return r.ok ? undefined : r;
};

describe('config expressions: the size of the values they build is bounded by construction', () => {
  it('refuses what ended the shared server on the local stack, and every way to multiply a value by a non-literal', () => {
    // Observed: this filter over a one-row table ended the Spark Connect server (OutOfMemoryError in UTF8String.repeat).
    const observed = 'length(repeat(x, 2000000000)) + length(repeat(x, 2000000000)) + length(repeat(x, 2000000000)) > 0';
    expect(refusal(observed)).toMatchObject({ pos: 8, message: expect.stringMatching(/2000000000 times the row's largest value.*ends the shared server/) });
    for (const [text, why] of [
      ['repeat(x, 65) <> x', /65 times/],
      ["repeat('ab', 600000) <> x", /1200000 characters/],
      ['repeat(repeat(x, 8), 9) <> x', /72 times/],
      ['length(repeat(x, n)) > 0', /repeat's count must be a literal/],
      ["lpad(x, n, '0') = x", /lpad's length must be a literal/],
      ['rpad(x, 1000001) = x', /1000001 characters/],
      ["replace(x, 'a', y) = x", /replace's search and replacement must be a literal/],
      ["replace(x, c, 'b') = x", /search and replacement must be a literal/],
      [`replace(x, 'a', '${'b'.repeat(65)}') = x`, /65 times/],
      [`concat(${Array.from({ length: 65 }, () => 'x').join(', ')}) = x`, /65 times/],
      // The separator between each two of 33 values: 32 + 33.
      [`concat_ws(x, ${Array.from({ length: 33 }, () => 'x').join(', ')}) = x`, /65 times/],
      ['upper(upper(upper(upper(x)))) = x', /81 times/],
      ['CASE WHEN a THEN repeat(x, 100) ELSE x END = x', /100 times/],
      ['coalesce(x, repeat(x, 70)) = x', /70 times/],
    ] as const)
      expect(refusal(text)?.message, text).toMatch(why);
  });

  it('bounds every value by its row and its literals', () => {
    expect(bound('x')).toEqual({ factor: 1, constant: 0 });
    expect(bound("concat(a, '-', b)")).toEqual({ factor: 2, constant: 1 });
    expect(bound("lpad(CAST(id AS STRING), 10, '0')")).toEqual({ factor: 0, constant: 10 });
    expect(bound("replace(x, 'ab', 'abcd')")).toEqual({ factor: 2, constant: 0 });
    expect(bound("replace(x, '', 'abcd')")).toEqual({ factor: 1, constant: 0 });
    expect(bound("replace(x, 'a')")).toEqual({ factor: 1, constant: 0 });
    expect(bound('repeat(x, 3)')).toEqual({ factor: 3, constant: 0 });
    expect(bound("date_format(ts, 'yyyy-MM')")).toEqual({ factor: 0, constant: 7 * 16 + 64 });
    expect(bound('sha2(repeat(x, 64), 256)')).toEqual({ factor: 0, constant: 128 });
    // A number printed as text is short, whatever the row holds: the cancellation tests' slow filter stays valid.
    expect(bound('sha2(repeat(CAST(id * 1 AS STRING), 20000), 512)')).toEqual({ factor: 0, constant: 128 });
    expect(bound(`concat(${Array.from({ length: MAX_SIZE_FACTOR }, () => 'x').join(', ')})`)).toEqual({ factor: MAX_SIZE_FACTOR, constant: 0 });
    expect(bound(`lpad(x, ${MAX_SIZE_CONSTANT})`)).toEqual({ factor: 0, constant: MAX_SIZE_CONSTANT });
  });

  it('accepts the filters the templates and examples use', () => {
    for (const text of [
      "_snapshot_date = '2026-07-05'",
      "op = 'd'",
      "op <> 'd'",
      'active',
      "lower(trim(email)) LIKE '%@example.com'",
      "concat_ws('-', 'a', 'b', n) <> ''",
      "substring(name, 1, 3) IN ('abc', 'def')",
      "coalesce(nullif(trim(status), ''), 'unknown') <> 'deleted'",
      "upper(initcap(x)) = 'ABC'",
      "lpad('7', 3, '0') = '007'",
    ])
      expect(refusal(text), text).toBeUndefined();
  });
});
