/**
 * Value formatting shared by Arrow results and Spark literals. Kept apart from arrow.ts so that code
 * formatting a literal does not load apache-arrow (a cold start pays for every module it loads).
 */

export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** Microseconds since the epoch as ISO-8601 with six fraction digits; `Z` only for instants. */
export function isoMicros(micros: bigint, instant: boolean): string {
  const ms = floorDiv(micros, 1000n);
  const sub = Number(micros - ms * 1000n);
  const iso = new Date(Number(ms)).toISOString(); // …T12:00:00.123Z
  return `${iso.slice(0, -1)}${String(sub).padStart(3, '0')}${instant ? 'Z' : ''}`;
}

/** An unscaled integer with `scale` fraction digits as a decimal string. */
export function formatUnscaled(unscaled: bigint, scale: number): string {
  const negative = unscaled < 0n;
  let digits = (negative ? -unscaled : unscaled).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    digits = `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  } else if (scale < 0) {
    digits = digits + '0'.repeat(-scale);
  }
  return negative ? `-${digits}` : digits;
}
