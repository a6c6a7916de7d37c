import { scrub } from '../core/secrets.js';
import type { Args, Io } from './command.js';
import { str } from './command.js';

/**
 * Who reads this invocation's output. Off a terminal, or with --log-format json, an orchestrator:
 * JSON lines on stderr and the status document on stdout, exactly as always. On a terminal
 * (--log-format pretty, the default there), a person: the log prettified (pino-pretty), and for a
 * run its step lines and, when stdout is the terminal too, a summary in the status document's place
 * (the status files are written all the same).
 */
export interface Output {
  format: 'json' | 'pretty';
  /** stderr is a person's terminal: step lines, live progress. */
  terminal: boolean;
  /** stdout is a person's terminal too: a summary instead of the status document. */
  summary: boolean;
  /** The log level: the option's, else info (warn on a terminal, where step lines say the same). */
  logLevel: string;
}

export function chooseOutput(argv: Args, io: Io): Output {
  const given = str(argv, 'log-format');
  const format = given === 'json' || given === 'pretty' ? given : io.stderrIsTTY ? 'pretty' : 'json';
  const terminal = format === 'pretty' && io.stderrIsTTY;
  return { format, terminal, summary: terminal && io.stdoutIsTTY, logLevel: str(argv, 'log-level') ?? (terminal ? 'warn' : 'info') };
}

/**
 * Where the log's JSON lines go (already scrubbed by the logger): nowhere of ours for JSON (the
 * logger writes stderr), else through pino-pretty to `print`, loaded only then.
 */
export async function logSink(output: Output, io: Io, print: (text: string) => void = io.stderr): Promise<((line: string) => void) | undefined> {
  if (output.format === 'json') return undefined;
  const { prettyLog } = await import('./views/log.js');
  const pretty = prettyLog({ colorize: io.stderrIsTTY });
  return (line) => print(scrub(pretty(line)));
}
