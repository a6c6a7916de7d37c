import { describe, expect, it } from 'vitest';
import { addDays, addHours, dateOf, instantText, parseInstant, parseIsoDate, parseLogicalDate } from '../../../src/core/instant.js';

describe('instants at microseconds', () => {
  it('keeps every microsecond a config gives (a JavaScript Date keeps milliseconds)', () => {
    const at = parseInstant('2026-07-05T06:00:00.100100Z')!;
    expect(at.micros).toBe(1783231200100100n);
    expect(instantText(at)).toBe('2026-07-05T06:00:00.100100Z');
    expect(parseInstant('2026-07-05T06:00:00.1001Z')).toEqual(at);
    expect(parseInstant('2026-07-05T08:00:00.100100+02:00')).toEqual(at);
    expect(parseInstant('2026-07-05T06:00:00.100100000Z')).toEqual(at);
    // Milliseconds print as JavaScript prints them, so plans of ms instants read as before.
    expect(instantText(parseInstant('2026-07-05T06:00:00Z')!)).toBe('2026-07-05T06:00:00.000Z');
    expect(instantText(parseInstant('1900-01-01T00:00:00Z')!)).toBe('1900-01-01T00:00:00.000Z');
  });

  it('refuses what is not an instant with a zone, or finer than Spark keeps', () => {
    for (const bad of ['2026-07-05T06:00:00', '2026-07-05 06:00:00Z', '2026-02-30T00:00:00Z', '2026-07-05T24:00:00Z', '2026-07-05T06:00:00.1000001Z', 'now'])
      expect(parseInstant(bad), bad).toBeUndefined();
  });

  it('dates: calendar-checked, shifted by days, and the UTC date of an instant', () => {
    expect(parseIsoDate('2026-02-29')).toBeUndefined();
    expect(parseIsoDate('2028-02-29')).toBe('2028-02-29');
    expect(addDays(parseIsoDate('2026-12-31')!, 1)).toBe('2027-01-01');
    expect(addDays(parseIsoDate('2026-03-01')!, -1)).toBe('2026-02-28');
    expect(dateOf(parseInstant('2026-07-05T23:30:00-02:00')!)).toBe('2026-07-06');
    expect(instantText(addHours(parseInstant('2026-07-05T00:00:00.000001Z')!, -168))).toBe('2026-06-28T00:00:00.000001Z');
  });

  it('--logical-date: a date (its midnight UTC) or a timestamp with an offset, nothing else', () => {
    expect(parseLogicalDate('2026-07-05')).toMatchObject({ date: '2026-07-05', instant: parseInstant('2026-07-05T00:00:00Z') });
    expect(parseLogicalDate('2026-07-05T10:00:00+02:00')).toMatchObject({ date: '2026-07-05', instant: parseInstant('2026-07-05T08:00:00Z') });
    for (const bad of ['2026-02-30', '2026-07-05T10:00:00', 'yesterday', '2026-7-5', "2026-07-05' OR '1'='1"])
      expect(parseLogicalDate(bad), bad).toBeUndefined();
  });
});
