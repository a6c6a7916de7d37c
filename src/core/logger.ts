import { scrub } from './secrets.js';

/**
 * Logs are data: JSON lines on stderr (stdout carries the status document). Every line passes
 * through `scrub`, so a secret that slipped into a message or a server error is still redacted.
 *
 * The lines are exactly pino's, as this project configured it (level label, ISO time, bindings,
 * the logged object's fields, `msg`; credentials' keys redacted; errors under `err` serialized as
 * pino's standard serializer does; test/unit/core/logger.test.ts compares both line by line), written
 * by a few dozen lines instead of pino and its seven packages: every command, `validate` and
 * `ping` included, paid for loading and building pino before its first line (cold start, issue 13).
 * Anything with this shape can be passed where a Logger is expected, a pino logger included.
 */

export type LogFn = {
  (obj: object, msg?: string): void;
  (msg: string): void;
};

export interface Logger {
  readonly level: string;
  isLevelEnabled(level: string): boolean;
  child(bindings: Record<string, unknown>): Logger;
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
}

const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;
type Level = keyof typeof LEVELS;

/** Keys whose value never reaches a log line, at the top level and one object below it. */
const REDACTED = new Set(['password', 'token', 'authorization']);
const CENSOR = '[redacted]';

export function createLogger(level: string, bindings: Record<string, unknown> = {}, write?: (line: string) => void): Logger {
  const threshold = level === 'silent' ? Infinity : LEVELS[level as Level];
  if (threshold === undefined) throw new Error(`unknown log level "${level}" (one of ${Object.keys(LEVELS).join(', ')}, silent)`);
  const sink = write ?? ((line: string) => process.stderr.write(line));
  return new JsonLogger(level, threshold, fields({ app: 'lakehouse-jobs', ...bindings }, true), (line) => sink(scrub(line)));
}

class JsonLogger implements Logger {
  readonly trace: LogFn;
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;
  readonly fatal: LogFn;

  constructor(
    readonly level: string,
    private readonly threshold: number,
    /** The bindings, already written as `,"key":value` (pino's "chindings"). */
    private readonly bound: string,
    private readonly write: (line: string) => void,
  ) {
    const at = (name: Level): LogFn => {
      if (LEVELS[name] < threshold) return () => {};
      const head = `{"level":"${name}"`;
      return ((objOrMsg: object | string, msg?: string) => {
        let [obj, text] = typeof objOrMsg === 'string' ? [undefined, objOrMsg] : [objOrMsg, msg];
        // pino's shape for logger.error(err, msg?): the error under `err`, its message by default.
        if (obj instanceof Error) [obj, text] = [{ err: obj }, text ?? obj.message];
        const own = obj ? fields(obj as Record<string, unknown>) : '';
        this.write(`${head},"time":"${new Date().toISOString()}"${this.bound}${own}${text === undefined ? '' : `,"msg":${JSON.stringify(String(text))}`}}\n`);
      }) as LogFn;
    };
    this.trace = at('trace');
    this.debug = at('debug');
    this.info = at('info');
    this.warn = at('warn');
    this.error = at('error');
    this.fatal = at('fatal');
  }

  isLevelEnabled(level: string): boolean {
    const n = LEVELS[level as Level];
    return n !== undefined && n >= this.threshold;
  }

  child(bindings: Record<string, unknown>): Logger {
    return new JsonLogger(this.level, this.threshold, this.bound + fields(bindings, true), this.write);
  }
}

/** Keys pino takes as options, never as fields, in bindings. */
const NOT_BINDINGS = new Set(['level', 'serializers', 'formatters', 'customLevels']);

/** An object's own fields as `,"key":value` in their order; undefined, functions and symbols left out. */
function fields(obj: Record<string, unknown>, bindings = false): string {
  let out = '';
  for (const key of Object.keys(obj)) {
    let value = obj[key];
    if (value === undefined || (bindings && NOT_BINDINGS.has(key))) continue;
    if (key === 'err' && isErrorLike(value)) value = serializeError(value, new Set());
    const text = REDACTED.has(key) ? JSON.stringify(CENSOR) : stringify(redactBelow(value));
    if (text !== undefined) out += `,${JSON.stringify(key)}:${text}`;
  }
  return out;
}

/** `*.password`, `*.token`, `*.authorization`: censored in a top-level object's copy, when present. */
function redactBelow(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const obj = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key of REDACTED) if (Object.hasOwn(obj, key)) (copy ??= { ...obj })[key] = CENSOR;
  return copy ?? value;
}

/** JSON; what JSON.stringify cannot write (bigint, cycles) as pino's fallback writes it. */
function stringify(value: unknown): string | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) return 'null';
  try {
    return JSON.stringify(value);
  } catch {
    return safeStringify(value, []);
  }
}

function safeStringify(value: unknown, ancestors: object[]): string | undefined {
  if (typeof value === 'bigint') return String(value);
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === 'function') return safeStringify(withJson.toJSON(), ancestors);
  if (ancestors.includes(value)) return '"[Circular]"';
  const inner = [...ancestors, value];
  if (Array.isArray(value)) return `[${value.map((v) => safeStringify(v, inner) ?? 'null').join(',')}]`;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    const text = safeStringify(v, inner);
    if (text !== undefined) parts.push(`${JSON.stringify(k)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

type ErrorLike = { message: string; stack?: unknown; cause?: unknown; errors?: unknown; constructor?: unknown; name?: unknown };

function isErrorLike(value: unknown): value is ErrorLike {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
}

function causeOf(err: ErrorLike): ErrorLike | undefined {
  const cause = typeof err.cause === 'function' ? (err.cause as () => unknown)() : err.cause;
  return isErrorLike(cause) ? cause : undefined;
}

/** pino's standard error serializer: type, message and stack with their causes, then the error's own fields. */
function serializeError(err: ErrorLike, seen: Set<object>): Record<string, unknown> {
  seen.add(err);
  const out: Record<string, unknown> = {
    type: typeof err.constructor === 'function' ? (err.constructor as { name: string }).name : err.name,
    message: messageWithCauses(err, new Set(), false),
    stack: stackWithCauses(err, new Set()),
  };
  if (Array.isArray(err.errors)) out.aggregateErrors = err.errors.map((e: unknown) => (isErrorLike(e) ? serializeError(e, seen) : e));
  for (const key in err) {
    if (out[key] !== undefined) continue;
    const value = (err as Record<string, unknown>)[key];
    if (isErrorLike(value)) {
      if (key !== 'cause' && !seen.has(value)) out[key] = serializeError(value, seen);
    } else out[key] = value;
  }
  seen.delete(err);
  return out;
}

function messageWithCauses(err: ErrorLike, seen: Set<object>, skip: boolean): string {
  const message = skip ? '' : err.message || '';
  if (seen.has(err)) return `${message}: ...`;
  const cause = causeOf(err);
  if (!cause) return message;
  seen.add(err);
  const vErrorStyle = typeof err.cause === 'function';
  return message + (vErrorStyle ? '' : ': ') + messageWithCauses(cause, seen, vErrorStyle);
}

function stackWithCauses(err: ErrorLike, seen: Set<object>): string {
  const stack = typeof err.stack === 'string' ? err.stack : '';
  if (seen.has(err)) return `${stack}\ncauses have become circular...`;
  const cause = causeOf(err);
  if (!cause) return stack;
  seen.add(err);
  return `${stack}\ncaused by: ${stackWithCauses(cause, seen)}`;
}
