import { describe, expect, it } from 'vitest';
import { jsonSchemaOf } from '../../../src/jobs/json-schema.js';
import { templates } from '../../../src/jobs/registry.js';

/** The paths of every object property (at any depth, in any union branch) that has no description. */
function undescribed(node: unknown, path = ''): string[] {
  if (Array.isArray(node)) return node.flatMap((n) => undescribed(n, path));
  if (typeof node !== 'object' || node === null) return [];
  const out: string[] = [];
  for (const [key, value] of Object.entries(node)) {
    if (key === 'properties' && typeof value === 'object' && value !== null) {
      for (const [name, prop] of Object.entries(value)) {
        const p = path ? `${path}.${name}` : name;
        if (!described(prop)) out.push(p);
        out.push(...undescribed(prop, p));
      }
    } else out.push(...undescribed(value, path));
  }
  return out;
}

/** A description on the property, or on a branch of its union (e.g. `password`: a reference, or a literal that is refused). */
function described(prop: unknown): boolean {
  if (typeof prop !== 'object' || prop === null) return false;
  const p = prop as { description?: unknown; anyOf?: unknown[] };
  if (typeof p.description === 'string' && p.description.length > 0) return true;
  return Array.isArray(p.anyOf) && p.anyOf.length > 0 && p.anyOf.some(described);
}

describe('the JSON Schemas editors and reviewers read', () => {
  for (const t of templates)
    for (const v of t.versions)
      it(`${t.name} v${v.version}: every key says what it is for`, () => {
        expect(undescribed(jsonSchemaOf(t, v))).toEqual([]);
      });
});
