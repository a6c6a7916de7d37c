import leven, { closestMatch } from 'leven';

/**
 * "Did you mean" for keys, templates, commands and options: leven's closest match, compared without
 * case, within a typo's distance. A module of its own, free of zod: the command line uses it before
 * anything else is loaded.
 */
export function closest(key: string, candidates: readonly string[]): string | undefined {
  const lower = candidates.map((c) => c.toLowerCase());
  const target = key.toLowerCase();
  const found = closestMatch(target, lower, { maxDistance: Math.max(2, Math.floor(key.length / 3)) });
  // Not a replacement of every character (`id` is no typo of `v`; `vv` may be one of `v`).
  if (found === undefined || leven(target, found) >= Math.max(key.length, found.length)) return undefined;
  return candidates[lower.indexOf(found)];
}
