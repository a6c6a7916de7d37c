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
  const r = (x: Rel) => rewriteRel(x, replace);
  switch (rel.kind) {
    case 'sql':
    case 'table':
    case 'source':
    case 'range':
    case 'extension':
    case 'materialized':
      return rel;
    case 'join': {
      const [left, right] = [r(rel.left), r(rel.right)];
      return left === rel.left && right === rel.right ? rel : Object.freeze({ ...rel, left, right });
    }
    default: {
      const input = r(rel.input);
      return input === rel.input ? rel : Object.freeze({ ...rel, input });
    }
  }
}
