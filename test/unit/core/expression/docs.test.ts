import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FUNCTIONS, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_LENGTH } from '../../../../src/core/expression/index.js';

/** docs/expressions.md is the tenants' reference: its function tables and limits must be the code's. */
const doc = readFileSync(new URL('../../../../docs/expressions.md', import.meta.url), 'utf8');

describe('docs/expressions.md', () => {
  it('lists exactly the allow-listed functions, each with its arity', () => {
    const documented = new Map([...doc.matchAll(/^\| `([a-z_0-9]+)` \| ([^|]+) \|/gm)].map((m) => [m[1]!, m[2]!.trim()]));
    const arity = ({ min, max }: { min: number; max: number }) => (min === max ? `${min}` : max === Infinity ? `${min} or more` : `${min}–${max}`);
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries([...FUNCTIONS].map(([name, spec]) => [name, arity(spec)])));
  });

  it('states the length and nesting limits', () => {
    expect(doc).toContain(
      `longer than ${MAX_EXPRESSION_LENGTH.toLocaleString('en').replace(',', ' ')} characters, nested deeper than ${MAX_EXPRESSION_DEPTH} levels`,
    );
  });
});
