import { describe, expect, it } from 'vitest';
import { backoffDelay, defaultRetryPolicy, retryPolicy, withRetry, type Clock } from '../../../src/spark/retry.js';

/** A clock whose sleep only advances time, recording each delay. */
function fakeClock(random = 0): Clock & { sleeps: number[]; t: number } {
  const c = {
    t: 0,
    sleeps: [] as number[],
    now: () => c.t,
    random: () => random,
    sleep: async (ms: number) => {
      c.sleeps.push(ms);
      c.t += ms;
    },
  };
  return c;
}

const transient = Object.assign(new Error('unavailable'), { transient: true });
const fatal = new Error('fatal');
const retryable = (e: unknown) => e === transient;

describe('retry policy', () => {
  it('grows 50 ms ×4 up to 60 s', () => {
    const p = retryPolicy({ jitter: 0 });
    expect([0, 1, 2, 3, 4, 5, 6, 10].map((n) => backoffDelay(p, n, 0))).toEqual([50, 200, 800, 3200, 12800, 51200, 60000, 60000]);
  });

  it('adds at most `jitter` of the delay and never exceeds the maximum', () => {
    const p = retryPolicy();
    expect(backoffDelay(p, 1, 1)).toBe(240);
    expect(backoffDelay(p, 1, 0.5)).toBe(220);
    expect(backoffDelay(p, 9, 1)).toBe(60000);
  });

  it('rejects nonsense', () => {
    expect(() => retryPolicy({ multiplier: -1 })).toThrow(/multiplier/);
    expect(() => retryPolicy({ maxRetries: Number.NaN })).toThrow(/maxRetries/);
  });

  it('has the documented defaults', () => {
    expect(defaultRetryPolicy).toMatchObject({ initialBackoffMs: 50, maxBackoffMs: 60000, multiplier: 4, maxRetries: 15 });
  });
});

describe('withRetry', () => {
  it('retries retryable errors with backoff until success', async () => {
    const clock = fakeClock();
    let calls = 0;
    const seen: number[] = [];
    const result = await withRetry(
      async () => {
        if (++calls < 4) throw transient;
        return 'ok';
      },
      { policy: retryPolicy({ jitter: 0 }), retryable, clock, onRetry: (e) => seen.push(e.retry) },
    );
    expect(result).toBe('ok');
    expect(calls).toBe(4);
    expect(clock.sleeps).toEqual([50, 200, 800]);
    expect(seen).toEqual([1, 2, 3]);
  });

  it('does not retry other errors', async () => {
    const clock = fakeClock();
    let calls = 0;
    await expect(
      withRetry(
        async () => {
          calls++;
          throw fatal;
        },
        { policy: retryPolicy(), retryable, clock },
      ),
    ).rejects.toBe(fatal);
    expect(calls).toBe(1);
    expect(clock.sleeps).toEqual([]);
  });

  it('gives up after maxRetries and reports the attempts', async () => {
    const clock = fakeClock();
    let calls = 0;
    let info: { attempts: number; elapsedMs: number } | undefined;
    await expect(
      withRetry(
        async () => {
          calls++;
          throw transient;
        },
        { policy: retryPolicy({ maxRetries: 3, jitter: 0 }), retryable, clock },
        (i) => (info = i),
      ),
    ).rejects.toBe(transient);
    expect(calls).toBe(4);
    expect(info).toEqual({ attempts: 4, elapsedMs: 50 + 200 + 800 });
  });

  it('stops at the total time cap', async () => {
    const clock = fakeClock();
    let calls = 0;
    await expect(
      withRetry(
        async () => {
          calls++;
          throw transient;
        },
        { policy: retryPolicy({ totalTimeoutMs: 1000, jitter: 0 }), retryable, clock },
      ),
    ).rejects.toBe(transient);
    // 50 + 200 + 800 = 1050 > 1000: the third sleep is not taken.
    expect(clock.sleeps).toEqual([50, 200]);
    expect(calls).toBe(3);
  });

  it('the default policy gives up after about ten minutes', async () => {
    const clock = fakeClock();
    await expect(withRetry(async () => Promise.reject(transient), { policy: retryPolicy({ jitter: 0 }), retryable, clock })).rejects.toBe(
      transient,
    );
    expect(clock.t).toBeLessThanOrEqual(10 * 60_000);
    expect(clock.sleeps.length).toBeGreaterThanOrEqual(10);
  });

  it('honours a server hint as the minimum delay', async () => {
    const clock = fakeClock();
    let calls = 0;
    await withRetry(
      async () => {
        if (++calls < 2) throw transient;
        return 1;
      },
      { policy: retryPolicy({ jitter: 0 }), retryable: (e) => (e === transient ? { minDelayMs: 1500 } : false), clock },
    );
    expect(clock.sleeps).toEqual([1500]);
  });

  it('stops waiting when aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const p = withRetry(async () => Promise.reject(transient), {
      policy: retryPolicy({ initialBackoffMs: 10_000 }),
      retryable,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(reason), 10);
    await expect(p).rejects.toBe(reason);
  });
});
