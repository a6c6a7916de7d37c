/**
 * Instants and dates at Spark's precision. A Spark TIMESTAMP holds microseconds since the epoch
 * (UTC); a JavaScript `Date` holds milliseconds, so an instant that passes through one loses its
 * last three digits (docs/contracts.md, "Instants"). Every instant of a run (its logical date, its
 * clock, an instant a config gives) is parsed once, here, into microseconds.
 */

/** A point in time: microseconds since 1970-01-01T00:00:00Z. */
export interface Instant {
  readonly micros: bigint;
}

/** A calendar date (UTC), `YYYY-MM-DD`, checked to exist. */
export type IsoDate = string & { readonly __isoDate: never };

const MICROS_PER_MS = 1000n;
const MICROS_PER_SECOND = 1_000_000n;
const MICROS_PER_HOUR = 3_600_000_000n;
const MICROS_PER_DAY = 86_400_000_000n;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const STAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

export const instant = (micros: bigint): Instant => Object.freeze({ micros });

/** The instant of a JavaScript clock reading (milliseconds), e.g. `Date.now()`. */
export const instantOfMillis = (ms: number): Instant => instant(BigInt(Math.trunc(ms)) * MICROS_PER_MS);

/** A date that the calendar has (2026-02-30 is not one), or undefined. */
export function parseIsoDate(text: string): IsoDate | undefined {
  const m = DATE.exec(text);
  if (!m) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const t = new Date(Date.UTC(y, mo - 1, d));
  // Date.UTC maps years 0-99 to 1900-1999: set the year explicitly.
  t.setUTCFullYear(y);
  return t.getUTCFullYear() === y && t.getUTCMonth() === mo - 1 && t.getUTCDate() === d ? (text as IsoDate) : undefined;
}

/**
 * An ISO-8601 instant with a zone (`2026-07-05T06:00:00.100100Z`, `…+02:00`), to the microsecond.
 * More than six fractional digits are refused unless they are zeros: Spark would drop them.
 */
export function parseInstant(text: string): Instant | undefined {
  const m = STAMP.exec(text);
  if (!m) return undefined;
  const date = parseIsoDate(`${m[1]}-${m[2]}-${m[3]}`);
  const [h, mi, s] = [Number(m[4]), Number(m[5]), Number(m[6])];
  if (!date || h > 23 || mi > 59 || s > 59) return undefined;
  const fraction = (m[7] ?? '').padEnd(9, '0');
  if (fraction.slice(6) !== '000') return undefined;
  const zone = m[8]!;
  const offsetMinutes = zone === 'Z' ? 0 : (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)));
  if (Math.abs(offsetMinutes) > 18 * 60) return undefined;
  const day = BigInt(daysSinceEpoch(date));
  const seconds = BigInt(h * 3600 + mi * 60 + s - offsetMinutes * 60);
  return instant(day * MICROS_PER_DAY + seconds * MICROS_PER_SECOND + BigInt(fraction.slice(0, 6)));
}

/** Midnight UTC of a date. */
export const startOfDay = (date: IsoDate): Instant => instant(BigInt(daysSinceEpoch(date)) * MICROS_PER_DAY);

export const addHours = (i: Instant, hours: number): Instant => instant(i.micros + BigInt(Math.trunc(hours)) * MICROS_PER_HOUR);

/** The date `days` after (or before) `date`. */
export function addDays(date: IsoDate, days: number): IsoDate {
  return dateOf(instant((BigInt(daysSinceEpoch(date)) + BigInt(Math.trunc(days))) * MICROS_PER_DAY));
}

/** The UTC date an instant falls on. */
export function dateOf(i: Instant): IsoDate {
  return new Date(Number(floorDiv(i.micros, MICROS_PER_DAY) * 86_400_000n)).toISOString().slice(0, 10) as IsoDate;
}

/** Days since 1970-01-01 of a date (negative before). */
export function daysSinceEpoch(date: IsoDate): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const t = new Date(0);
  t.setUTCFullYear(y, m - 1, d);
  return Math.round(t.getTime() / 86_400_000);
}

/**
 * ISO-8601 in UTC: milliseconds as JavaScript writes them (`….100Z`) when the instant has no finer
 * digits, else all six (`….100100Z`).
 */
export function instantText(i: Instant): string {
  const ms = floorDiv(i.micros, MICROS_PER_MS);
  const sub = i.micros - ms * MICROS_PER_MS;
  const iso = new Date(Number(ms)).toISOString();
  return sub === 0n ? iso : `${iso.slice(0, -1)}${String(sub).padStart(3, '0')}Z`;
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** The orchestrator's logical date (`--logical-date`): Airflow's `{{ ds }}` or `{{ ts }}`, parsed once. */
export interface LogicalDate {
  /** As given on the command line. */
  readonly text: string;
  /** The date (UTC) it falls on. */
  readonly date: IsoDate;
  /** A date's midnight UTC, or the timestamp itself. */
  readonly instant: Instant;
}

/** A date (2026-07-05) or an ISO timestamp with an offset (2026-07-05T00:00:00+00:00); otherwise undefined. */
export function parseLogicalDate(text: string): LogicalDate | undefined {
  const date = parseIsoDate(text);
  if (date) return Object.freeze({ text, date, instant: startOfDay(date) });
  const at = parseInstant(text);
  return at ? Object.freeze({ text, date: dateOf(at), instant: at }) : undefined;
}
