/**
 * The one retry policy of the Spark Connect client and the one wrapper that applies it. Every RPC
 * goes through `withRetry`; what counts as retryable is decided by the caller's `retryable`
 * function (see `isRetryableGrpcError` in errors.ts), so this module knows nothing about gRPC.
 */

export interface RetryPolicy {
  /** Delay before the first retry. */
  initialBackoffMs: number;
  /** Upper bound of a single delay. */
  maxBackoffMs: number;
  /** Growth of the delay per retry. */
  multiplier: number;
  /** Retries after the first attempt. */
  maxRetries: number;
  /** Random extra delay, as a fraction of the computed delay (0.2 = up to +20 %). */
  jitter: number;
  /** Give up once this much time has passed since the first attempt (sleep included). */
  totalTimeoutMs: number;
}

/** Like Spark's own clients: 50 ms, ×4, capped at 60 s, 15 retries (about 10 minutes in all). */
export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  initialBackoffMs: 50,
  maxBackoffMs: 60_000,
  multiplier: 4,
  maxRetries: 15,
  jitter: 0.2,
  totalTimeoutMs: 10 * 60_000,
});

export function retryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  const p = { ...defaultRetryPolicy, ...overrides };
  for (const [k, v] of Object.entries(p)) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`retry policy: ${k} must be a non-negative number`);
  }
  return p;
}

/** Time and randomness, injectable for tests. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  random(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  random: () => Math.random(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** The delay before retry number `retry` (0-based), jitter included, never above maxBackoffMs. */
export function backoffDelay(policy: RetryPolicy, retry: number, random: number): number {
  const base = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** retry);
  return Math.min(policy.maxBackoffMs, Math.round(base * (1 + policy.jitter * random)));
}

/**
 * The caller's verdict on an error: not retryable (`false`), retryable with the policy's delay
 * (`true`), or retryable after at least `minDelayMs` (a server's RetryInfo hint).
 */
export type RetryVerdict = boolean | { minDelayMs: number };

export interface RetryEvent {
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  error: unknown;
}

export interface RetryOptions {
  policy: RetryPolicy;
  retryable: (error: unknown) => RetryVerdict;
  clock?: Clock;
  signal?: AbortSignal;
  onRetry?: (event: RetryEvent) => void;
}

export interface RetryExhausted {
  /** Attempts made, the first one included. */
  attempts: number;
  elapsedMs: number;
}

/**
 * Run `attempt` until it succeeds, the error is not retryable, or the policy is exhausted; then
 * rethrow the last error. `exhausted` (when given) learns how many attempts were made.
 */
export async function withRetry<T>(
  attempt: (n: number) => Promise<T>,
  options: RetryOptions,
  exhausted?: (info: RetryExhausted) => void,
): Promise<T> {
  const clock = options.clock ?? systemClock;
  const start = clock.now();
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      if (options.signal?.aborted) throw error;
      const verdict = options.retryable(error);
      const elapsed = clock.now() - start;
      if (verdict === false || n >= options.policy.maxRetries) {
        if (verdict !== false) exhausted?.({ attempts: n + 1, elapsedMs: elapsed });
        throw error;
      }
      let delay = backoffDelay(options.policy, n, clock.random());
      if (typeof verdict === 'object') delay = Math.max(delay, Math.min(verdict.minDelayMs, options.policy.maxBackoffMs));
      if (elapsed + delay > options.policy.totalTimeoutMs) {
        exhausted?.({ attempts: n + 1, elapsedMs: elapsed });
        throw error;
      }
      options.onRetry?.({ retry: n + 1, delayMs: delay, error });
      await clock.sleep(delay, options.signal);
    }
  }
}
