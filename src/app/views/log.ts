import pinoPretty from 'pino-pretty';

/**
 * The log as a person reads it: pino-pretty's formatter applied to each JSON line, synchronously
 * (prettyFactory, no worker thread or stream), so a process that exits right after its last line
 * loses nothing. The fields every line carries (app, run id, command) are left out. This module,
 * and pino-pretty with it, loads only when a person reads the log (src/app/output.ts).
 */
export function prettyLog(opts: { colorize: boolean }): (jsonLine: string) => string {
  return pinoPretty.prettyFactory({ colorize: opts.colorize, translateTime: 'SYS:HH:MM:ss', ignore: 'app,runId,command', singleLine: true });
}
