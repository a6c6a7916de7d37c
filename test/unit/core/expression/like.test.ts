import { describe, expect, it } from 'vitest';
import { ANY_ONE, type LikePattern, type LikeSegment, LikePatternError, readLikePattern } from '../../../../src/core/expression/like.js';
import { mulberry32 } from '../../../support/random.js';

/** Spark's own reading of a LIKE pattern (StringUtils.escapeLikeRegex), as a JavaScript regex: the oracle. */
function sparkRegex(pattern: string, escape = '\\'): RegExp {
  const quote = (c: string) => c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  let out = '';
  const chars = [...pattern];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === escape) out += quote(chars[++i]!);
    else if (c === '_') out += '.';
    else if (c === '%') out += '.*';
    else out += quote(c);
  }
  return new RegExp(`^${out}$`, 'su');
}

/**
 * Does `text` match the pattern? The semantics the compiled plan implements (prefix and suffix in
 * place, the segments between found in order at their first place), checked here against Spark's regex.
 */
function likeMatches(text: string, p: LikePattern): boolean {
  const s = [...text];
  const fits = (seg: LikeSegment, at: number) => seg.every((c, k) => c === ANY_ONE || s[at + k] === c);
  const { segments } = p;
  if (segments.length === 1) return s.length === segments[0]!.length && fits(segments[0]!, 0);
  const prefix = segments[0]!;
  const suffix = segments[segments.length - 1]!;
  const end = s.length - suffix.length;
  if (end < prefix.length || !fits(prefix, 0) || !fits(suffix, end)) return false;
  let from = prefix.length;
  for (const seg of segments.slice(1, -1)) {
    let found = -1;
    for (let at = from; at + seg.length <= end; at++)
      if (fits(seg, at)) {
        found = at;
        break;
      }
    if (found < 0) return false;
    from = found + seg.length;
  }
  return true;
}

describe('LIKE patterns', () => {
  it('splits at % into prefix, the segments between and suffix, with _ and escapes read as Spark reads them', () => {
    expect(readLikePattern('abc').segments).toEqual([['a', 'b', 'c']]);
    expect(readLikePattern('a_c').segments).toEqual([['a', ANY_ONE, 'c']]);
    expect(readLikePattern('%').segments).toEqual([[], []]);
    expect(readLikePattern('a%%b%c_').segments).toEqual([['a'], ['b'], ['c', ANY_ONE]]);
    expect(readLikePattern('\\%a\\_\\\\%').segments).toEqual([['%', 'a', '_', '\\'], []]);
    expect(readLikePattern('x!%y%', '!').segments).toEqual([['x', '%', 'y'], []]);
    expect(readLikePattern('😀_%').segments).toEqual([['😀', ANY_ONE], []]);
  });

  it('refuses what Spark refuses, and a _ between two % (it would need a regular expression)', () => {
    const why = (pattern: string, escape?: string) => {
      try {
        readLikePattern(pattern, escape);
      } catch (e) {
        expect(e).toBeInstanceOf(LikePatternError);
        return [(e as LikePatternError).offset, (e as Error).message];
      }
      return undefined;
    };
    expect(why('ab\\')).toEqual([2, 'a LIKE pattern cannot end with the escape character "\\"']);
    expect(why('a\\b')).toEqual([1, 'the escape character "\\" may only precede "_", "%" or itself, not "b"']);
    expect(why('a%', '%')).toEqual([0, 'the escape character cannot be "%"']);
    expect(why('%a_b%')?.[0]).toBe(1);
    expect(why('%a_b%')?.[1]).toMatch(/^a "_" may stand only before the first "%" or after the last one/);
    expect(why('x%%a_%y')?.[0]).toBe(3);
    // In the prefix or the suffix a _ is fine, and an escaped _ is a literal character anywhere.
    expect(why('_a%b_')).toBeUndefined();
    expect(why('%a\\_b%')).toBeUndefined();
  });

  it("matches exactly as Spark's regular expression would, on random patterns and texts", () => {
    const rand = mulberry32(1301);
    const pick = (alphabet: string[], max: number) =>
      Array.from({ length: Math.floor(rand() * (max + 1)) }, () => alphabet[Math.floor(rand() * alphabet.length)]!).join('');
    let compared = 0;
    for (let n = 0; n < 3000; n++) {
      const pattern = pick(['a', 'b', '%', '_', '\\%', '\\_', '😀'], 7);
      let p;
      try {
        p = readLikePattern(pattern);
      } catch {
        continue;
      }
      const regex = sparkRegex(pattern);
      for (let k = 0; k < 8; k++) {
        const text = pick(['a', 'b', '%', '_', '\n', '😀'], 9);
        expect([pattern, text, likeMatches(text, p)]).toEqual([pattern, text, regex.test(text)]);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(10_000);
  });
});
