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

/**
 * Like Spark's own clients (50 ms, ×4, capped at 60 s, 15 retries), but giving up after 2 minutes
 * instead of Spark's 10: an orchestrator retries a task that exits 69/75, and a pod that waits
 * 10 minutes for a dead server only delays that.
 */
export const DEFAULT_RETRY_BUDGET_MS = 120_000;

export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  initialBackoffMs: 50,
  maxBackoffMs: 60_000,
  multiplier: 4,
  maxRetries: 15,
  jitter: 0.2,
  totalTimeoutMs: DEFAULT_RETRY_BUDGET_MS,
});

/**
 * The wall-clock time a whole run may spend retrying, shared by all its calls: a run whose every
 * call fails slowly (a server restarting again and again) still ends within the budget, not within
 * the budget times the number of calls. Time is charged from a call's first failure until the call
 * ends; concurrent calls are each charged in full (conservative).
 */
export class RetryBudget {
  #spentMs = 0;
  constructor(readonly totalMs: number = DEFAULT_RETRY_BUDGET_MS) {
    if (!Number.isFinite(totalMs) || totalMs < 0) throw new RangeError('retry budget must be a non-negative number of milliseconds');
  }

  get spentMs(): number {
    return this.#spentMs;
  }

  /** What is left, given `pendingMs` not yet charged (the current call's time since its first failure). */
  remainingMs(pendingMs = 0): number {
    return Math.max(0, this.totalMs - this.#spentMs - pendingMs);
  }

  charge(ms: number): void {
    this.#spentMs += Math.max(0, ms);
  }
}

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
  /** The run-wide budget this call draws on, besides the policy's own totalTimeoutMs. */
  budget?: RetryBudget;
  onRetry?: (event: RetryEvent) => void;
}

/** What an attempt may know about its place in the retry loop. */
export interface AttemptContext {
  /** Time left for retrying; a retried attempt should not wait longer than this for an answer. */
  remainingMs: number;
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
  attempt: (n: number, context: AttemptContext) => Promise<T>,
  options: RetryOptions,
  exhausted?: (info: RetryExhausted) => void,
): Promise<T> {
  const clock = options.clock ?? systemClock;
  const { policy, budget, signal } = options;
  const start = clock.now();
  let firstFailureAt: number | undefined;
  /** Time left for retrying: the policy's per-call limit and the run's budget, whichever ends first. */
  const remaining = (): number => {
    const now = clock.now();
    const own = policy.totalTimeoutMs - (now - start);
    const shared = budget ? budget.remainingMs(firstFailureAt === undefined ? 0 : now - firstFailureAt) : Infinity;
    return Math.max(0, Math.min(own, shared));
  };
  try {
    for (let n = 0; ; n++) {
      if (signal?.aborted) throw signal.reason;
      try {
        return await attempt(n, { remainingMs: remaining() });
      } catch (error) {
        if (signal?.aborted) throw error;
        firstFailureAt ??= clock.now();
        const verdict = options.retryable(error);
        const elapsed = clock.now() - start;
        if (verdict === false || n >= policy.maxRetries) {
          if (verdict !== false) exhausted?.({ attempts: n + 1, elapsedMs: elapsed });
          throw error;
        }
        let delay = backoffDelay(policy, n, clock.random());
        if (typeof verdict === 'object') delay = Math.max(delay, Math.min(verdict.minDelayMs, policy.maxBackoffMs));
        if (delay > remaining()) {
          exhausted?.({ attempts: n + 1, elapsedMs: elapsed });
          throw error;
        }
        options.onRetry?.({ retry: n + 1, delayMs: delay, error });
        await clock.sleep(delay, signal);
      }
    }
  } finally {
    if (firstFailureAt !== undefined) budget?.charge(clock.now() - firstFailureAt);
  }
}
