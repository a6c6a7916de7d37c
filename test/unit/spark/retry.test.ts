import { describe, expect, it } from 'vitest';
import { backoffDelay, defaultRetryPolicy, RetryBudget, retryPolicy, systemClock, withRetry, type Clock } from '../../../src/spark/retry.js';

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

  it('the default policy gives up within two minutes', async () => {
    const clock = fakeClock();
    await expect(withRetry(async () => Promise.reject(transient), { policy: retryPolicy({ jitter: 0 }), retryable, clock })).rejects.toBe(transient);
    expect(clock.t).toBeLessThanOrEqual(120_000);
    // 50 + 200 + 800 + 3200 + 12800 + 51200 ms; the next 60 s would pass the 2 minutes.
    expect(clock.sleeps).toEqual([50, 200, 800, 3200, 12800, 51200]);
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

describe('the run-wide retry budget', () => {
  const failAlways = async (): Promise<never> => Promise.reject(transient);

  it('is shared by the calls of a run: a second failing call gets only what the first left', async () => {
    const clock = fakeClock();
    const budget = new RetryBudget(5_000);
    const policy = retryPolicy({ jitter: 0 });
    await expect(withRetry(failAlways, { policy, retryable, clock, budget })).rejects.toBe(transient);
    // 50 + 200 + 800 + 3200 = 4250; 12800 more would pass 5 s.
    expect(clock.sleeps).toEqual([50, 200, 800, 3200]);
    expect(budget.spentMs).toBe(4250);
    clock.sleeps.length = 0;
    await expect(withRetry(failAlways, { policy, retryable, clock, budget })).rejects.toBe(transient);
    // 750 ms left: 50 + 200 fit, 800 does not.
    expect(clock.sleeps).toEqual([50, 200]);
    expect(budget.remainingMs()).toBe(500);
  });

  it('charges the time of slow failing attempts, not only the sleeps', async () => {
    const clock = fakeClock();
    const budget = new RetryBudget(10_000);
    await expect(
      withRetry(
        async () => {
          clock.t += 4_000; // each attempt waits 4 s for its answer, then fails
          throw transient;
        },
        { policy: retryPolicy({ jitter: 0 }), retryable, clock, budget },
      ),
    ).rejects.toBe(transient);
    // The first failure starts the clock: 50 + 4000 + 200 + 4000 = 8250 ms, then 800 fits (9050 ms),
    // the next attempt ends at 13050 ms: over the budget, no more retries.
    expect(clock.sleeps).toEqual([50, 200, 800]);
    expect(budget.remainingMs()).toBe(0);
  });

  it('tells each attempt how long it may wait for an answer', async () => {
    const clock = fakeClock();
    const seen: number[] = [];
    await withRetry(
      async (n, ctx) => {
        seen.push(ctx.remainingMs);
        if (n < 2) throw transient;
        return 'ok';
      },
      { policy: retryPolicy({ jitter: 0, totalTimeoutMs: 60_000 }), retryable, clock, budget: new RetryBudget(1_000) },
    );
    expect(seen).toEqual([1_000, 950, 750]);
  });

  it('leaves successful calls and non-retryable errors uncharged', async () => {
    const budget = new RetryBudget(1_000);
    const clock = fakeClock();
    await withRetry(async () => 'ok', { policy: retryPolicy(), retryable, clock, budget });
    await expect(withRetry(async () => Promise.reject(fatal), { policy: retryPolicy(), retryable, clock, budget })).rejects.toBe(fatal);
    expect(budget.spentMs).toBe(0);
  });

  it('refuses a negative budget', () => {
    expect(() => new RetryBudget(-1)).toThrow(/retry budget/);
  });

  it('an abort ends a real sleep at once and starts no further attempt', async () => {
    const controller = new AbortController();
    const reason = new Error('SIGTERM');
    let calls = 0;
    const started = Date.now();
    const p = withRetry(
      async () => {
        calls++;
        throw transient;
      },
      { policy: retryPolicy({ initialBackoffMs: 60_000, maxBackoffMs: 60_000 }), retryable, clock: systemClock, signal: controller.signal },
    );
    setTimeout(() => controller.abort(reason), 20);
    await expect(p).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(calls).toBe(1);
  });

  it('does not start when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    let calls = 0;
    await expect(withRetry(async () => ++calls, { policy: retryPolicy(), retryable, signal: controller.signal })).rejects.toThrow('gone');
    expect(calls).toBe(0);
  });
});
