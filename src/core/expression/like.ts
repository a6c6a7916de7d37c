/**
 * LIKE patterns, read as Spark reads them, so that they can be matched without a regular
 * expression. Spark runs `LIKE` as a `java.util.regex` pattern (`%` → `.*`, `_` → `.`), and a
 * pattern with several `%` backtracks: `'%a%a%a%a%a%a%a%a%a%a%b'` against a long run of `a` takes
 * hours, in the optimizer already when both sides are literals, and no cancel stops it (a regex
 * match never checks for interrupts), so one tenant's `source.where` could keep a core of the shared
 * server busy after its run ended. The expression language therefore never sends `LIKE`: a pattern
 * becomes string functions that take linear time (src/spark/plan/config-expression.ts).
 *
 * Spark's reading (StringUtils.escapeLikeRegex): `_` is any one character, `%` any run of
 * characters (also none, also line breaks), the escape character (`\` unless ESCAPE names another)
 * makes the next `_`, `%` or escape character literal and may precede nothing else, nor end the
 * pattern. Characters are code points, as Spark's `length`, `substring` and `locate` count them.
 */

/** `_`: any one character. */
export const ANY_ONE = null;

/** A part of a pattern between two `%` (or an end): literal code points and `_`s. */
export type LikeSegment = readonly (string | typeof ANY_ONE)[];

export interface LikePattern {
  /**
   * The pattern split at its `%`s: one segment without `%`; else the prefix, the segments between
   * (never empty: `%%` is one `%`), the suffix. A `_` stands only in the prefix or the suffix.
   */
  readonly segments: readonly LikeSegment[];
}

export class LikePatternError extends Error {
  /** The offset in the pattern (code units) where the problem is. */
  readonly offset: number;
  constructor(offset: number, message: string) {
    super(message);
    this.offset = offset;
  }
}

/** The pattern's segments, or a LikePatternError for a pattern Spark refuses or that would need a regular expression. */
export function readLikePattern(pattern: string, escape = '\\'): LikePattern {
  if (escape === '%' || escape === '_') throw new LikePatternError(0, `the escape character cannot be "${escape}"`);
  const segments: (string | typeof ANY_ONE)[][] = [[]];
  const starts: number[] = [0];
  const chars = [...pattern];
  let offset = 0;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    const at = offset;
    offset += c.length;
    const current = segments[segments.length - 1]!;
    if (c === escape) {
      const next = chars[++i];
      if (next === undefined) throw new LikePatternError(at, `a LIKE pattern cannot end with the escape character "${escape}"`);
      if (next !== '_' && next !== '%' && next !== escape)
        throw new LikePatternError(at, `the escape character "${escape}" may only precede "_", "%" or itself, not "${next}"`);
      offset += next.length;
      current.push(next);
    } else if (c === '%') {
      segments.push([]);
      starts.push(offset);
    } else current.push(c === '_' ? ANY_ONE : c);
  }
  // Between the prefix and the suffix, only non-empty segments constrain anything.
  const inner = segments.slice(1, -1).flatMap((s, k) => (s.length ? [{ s, at: starts[k + 1]! }] : []));
  for (const { s, at } of inner)
    if (s.includes(ANY_ONE))
      throw new LikePatternError(
        at,
        'a "_" may stand only before the first "%" or after the last one of a LIKE pattern (between two "%" it would need a regular expression, which can run for hours on the shared server)',
      );
  return { segments: segments.length === 1 ? segments : [segments[0]!, ...inner.map((x) => x.s), segments[segments.length - 1]!] };
}
