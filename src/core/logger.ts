import { pino, type Logger } from 'pino';
import { scrub } from './secrets.js';

/**
 * Logs are data: JSON lines on stderr (stdout carries the status document). Every line passes
 * through `scrub`, so a secret that slipped into a message or a server error is still redacted.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, write?: (line: string) => void): Logger {
  const sink = write ?? ((line: string) => process.stderr.write(line));
  return pino(
    {
      level,
      base: { app: 'lakehouse-jobs', ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ['password', 'token', '*.password', '*.token', 'authorization', '*.authorization'], censor: '[redacted]' },
    },
    { write: (line: string) => sink(scrub(line)) },
  );
}

export type { Logger };
