import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderSchemas } from '../../../scripts/gen-schemas.js';

const dir = new URL('../../../schemas/', import.meta.url);

describe('schemas/', () => {
  it('matches the JSON Schemas generated from the zod schemas (run: npx tsx scripts/gen-schemas.ts)', () => {
    const expected = renderSchemas();
    const actual = Object.fromEntries(
      readdirSync(dir)
        .filter((f) => f.endsWith('.schema.json'))
        .map((f) => [f, readFileSync(new URL(f, dir), 'utf8')]),
    );
    expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
    for (const [name, text] of Object.entries(expected)) expect(actual[name], name).toBe(text);
  });
});
