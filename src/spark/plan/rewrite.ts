import type { Rel } from './relations.js';

/**
 * A relation with some of its nodes replaced: `replace` is asked about every node from the root
 * down, and a node it answers for is replaced whole (its inputs are not visited); the others are
 * rebuilt around their rewritten inputs. Pure, like every plan node: `diff` reads a table the run
 * would create as the empty relation it would be created from (src/runner/diff.ts).
 */
export function rewriteRel(rel: Rel, replace: (node: Rel) => Rel | undefined): Rel {
  const replaced = replace(rel);
  if (replaced) return replaced;
  const before = inputs(rel);
  const after = before.map((x) => rewriteRel(x, replace));
  if (after.every((x, i) => x === before[i])) return rel;
  return Object.freeze(rel.kind === 'join' || rel.kind === 'union' ? { ...rel, left: after[0]!, right: after[1]! } : { ...rel, input: after[0]! }) as Rel;
}

/** A relation's inputs: none for a leaf (a table, SQL text, a source…), both sides of a join or union, else its one input. */
export function inputs(rel: Rel): Rel[] {
  switch (rel.kind) {
    case 'sql':
    case 'table':
    case 'source':
    case 'range':
    case 'extension':
    case 'materialized':
      return [];
    case 'join':
    case 'union':
      return [rel.left, rel.right];
    default:
      return [rel.input];
  }
}
