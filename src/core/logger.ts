import { pino } from 'pino';
import { LOG_LEVELS } from './log-levels.js';
import { scrub } from './secrets.js';

/**
 * Logs are data: pino's JSON lines on stderr (stdout carries the status document). Credentials are
 * redacted by path, errors under `err` serialized by pino's standard serializer, and every line
 * passes through `scrub` on its way out, so a secret that slipped into a message, a field or a
 * server's error text is still redacted. A person's terminal reads the same lines prettified
 * (src/app/views/log.ts); the logger itself only writes JSON.
 */
export type Logger = Pick<pino.Logger, 'level' | 'isLevelEnabled' | 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'> & {
  child(bindings: Record<string, unknown>): Logger;
};

export { LOG_LEVELS, type LogLevel } from './log-levels.js';

/** Keys whose value never reaches a log line, at the top level and one object below it (bindings included). */
export const REDACTED_PATHS = ['password', 'token', 'authorization', '*.password', '*.token', '*.authorization'];
const CENSOR = '[redacted]';

/**
 * A JSON-lines logger at `level`, with `bindings` on every line. `write` receives each line scrubbed
 * (stderr by default); it is called synchronously, so nothing is lost when the process exits right
 * after its last line.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, write?: (line: string) => void): Logger {
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`unknown log level "${level}" (one of ${LOG_LEVELS.join(', ')})`);
  const sink = write ?? ((line: string) => void process.stderr.write(line));
  return pino(
    {
      level,
      base: { app: 'lakehouse-jobs', ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err },
      redact: { paths: REDACTED_PATHS, censor: CENSOR },
    },
    { write: (line: string) => sink(scrub(line)) },
  );
}
