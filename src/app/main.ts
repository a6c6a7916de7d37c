import yargs, { type Argv } from 'yargs';
import { closest } from '../core/config/closest.js';
import { cliFailure, ExitCode, UsageError } from '../core/errors.js';
import { VERSION } from '../version.js';
import { type Io, type LakehouseCommand, processIo } from './command.js';
import { diffCommand } from './commands/diff.js';
import { historyCommand } from './commands/history.js';
import { pingCommand } from './commands/ping.js';
import { planCommand } from './commands/plan.js';
import { rollbackCommand } from './commands/rollback.js';
import { runCommand } from './commands/run.js';
import { schemaCommand } from './commands/schema.js';
import { templatesCommand } from './commands/templates.js';
import { validateCommand } from './commands/validate.js';

/** The command line (docs/contracts.md), one yargs command module per command. */
export const COMMANDS: readonly LakehouseCommand[] = [
  runCommand,
  diffCommand,
  validateCommand,
  planCommand,
  historyCommand,
  rollbackCommand,
  pingCommand,
  templatesCommand,
  schemaCommand,
];

/** Options yargs answers itself, before any command. */
const PROGRAM_FLAGS = new Set(['--help', '-h', '--version', '--get-yargs-completions']);

/**
 * Parse the command line, run its command, return its exit code. Options are also read from
 * LAKEHOUSE_<OPTION> variables of the process's environment (yargs' `.env`); yargs' own help,
 * version, suggestions and completion script are written to `io.stdout`.
 */
export async function main(argv: readonly string[], io: Io = processIo()): Promise<number> {
  const args = withDefaultCommand(argv);
  let code: number | undefined;
  const y: Argv = yargs();
  y.scriptName('lakehouse-jobs')
    .env('LAKEHOUSE')
    .middleware((parsed): void => dropForeignVariables(parsed, args, declaredOptions(y)), true)
    .strict()
    .recommendCommands()
    .demandCommand(1, 'name a command (lakehouse-jobs --help lists them)')
    .version(VERSION)
    .alias('h', 'help')
    .showHelpOnFail(false)
    // Every failure of the command line is a usage error (64), said once by main below.
    .fail((message, error) => {
      throw error ?? new UsageError(message);
    });
  y.wrap(Math.min(110, y.terminalWidth()));
  // The command named on the command line alone, as yargs' default command: yargs renders the help
  // text of any other command it runs before the handler (usage.cacheHelpMessage, ≈ 15 ms of every
  // start), never the default command's. Without a known command's name, all of them: the program's
  // help, suggestions for a misspelt name and completion.
  const named = COMMANDS.find((c) => nameOf(c) === args[0]);
  // Alone, the command is described by its usage (yargs would add its own `$0 <positionals>` line).
  if (named) y.usage(`${named.usage}\n\n${named.describe}`);
  else
    y.usage('$0 [command] [options]')
      .completion('completion', 'print a shell completion script (bash, zsh): lakehouse-jobs completion >> ~/.bashrc')
      .epilogue('A command line that starts with an option runs a job (`run`). lakehouse-jobs <command> --help shows its options.');
  for (const c of named ? [named] : COMMANDS)
    y.command({
      command: named ? [c.command, '$0'] : c.command,
      // A described default command would be listed as the program's one command.
      describe: named ? false : c.describe,
      builder: c.builder,
      handler: async (parsed) => {
        code = await c.handler(parsed, io);
      },
    });
  let shown = '';
  try {
    // With a callback yargs writes nothing itself (help, version, completion): it hands the text over.
    await y.parse(named ? args.slice(1) : args, {}, (_error, _parsed, text) => {
      shown = text;
    });
  } catch (e) {
    const failure = cliFailure(e);
    if (failure.usage) failure.message = withSuggestion(failure.message, declaredOptions(y));
    io.stderr(
      `lakehouse-jobs: ${failure.message}\n${failure.stack ? `${failure.stack}\n` : ''}${failure.usage ? `Try lakehouse-jobs ${named ? `${args[0]} ` : ''}--help.\n` : ''}`,
    );
    return failure.exitCode;
  }
  if (shown) io.stdout(shown.endsWith('\n') ? shown : `${shown}\n`);
  return code ?? ExitCode.succeeded;
}

const nameOf = (c: LakehouseCommand) => c.command.split(' ')[0];

/**
 * `run` is the default command: a command line that starts with an option (or is empty) runs a job.
 * yargs' own default command (`$0`) would turn a misspelt command into an argument of `run`, and
 * yargs suggests commands only where there is none.
 */
export function withDefaultCommand(argv: readonly string[]): string[] {
  const first = argv[0];
  if (first === undefined) return ['run'];
  if (first.startsWith('-') && !PROGRAM_FLAGS.has(first.split('=')[0]!)) return ['run', ...argv];
  return [...argv];
}

/**
 * yargs' `.env('LAKEHOUSE')` reads every LAKEHOUSE_* variable, also those that are no option of the
 * command at hand (LAKEHOUSE_LAKE_HOME, which configs read; another command's option): under
 * `.strict()` each would be an unknown argument (yargs issue 873). Such a value, when it came from
 * the environment only, is dropped before validation; the same name typed on the command line is
 * still refused. An empty variable is no value, as before.
 */
function dropForeignVariables(parsed: Record<string, unknown>, args: readonly string[], options: DeclaredOptions): void {
  const typed = (key: string) => {
    const kebab = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    return args.some((a) => [`--${key}`, `--${kebab}`].some((flag) => a === flag || a.startsWith(`${flag}=`)));
  };
  const known = new Set<string>(['_', '$0']);
  for (const key of [...Object.keys(options.key), ...Object.values(options.alias).flat()]) known.add(key).add(camel(key));
  for (const key of Object.keys(parsed)) {
    const variable = `LAKEHOUSE_${key
      .replace(/[A-Z]/g, (c) => `_${c}`)
      .replace(/-/g, '_')
      .toUpperCase()}`;
    const fromEnv = process.env[variable];
    if (fromEnv === undefined || typed(key)) continue;
    if (!known.has(key)) delete parsed[key];
    else if (fromEnv === '') {
      const fallback = options.default[key];
      if (fallback === undefined) delete parsed[key];
      else parsed[key] = fallback;
    }
  }
}

/** yargs' "Unknown argument: confg" with the option meant: "; did you mean --config?". */
function withSuggestion(message: string, options: DeclaredOptions): string {
  const unknown = /^Unknown arguments?: (.+)$/.exec(message)?.[1]?.split(', ');
  if (!unknown) return message;
  const names = Object.keys(options.key).filter((k) => k.length > 1);
  const meant = [...new Set(unknown.map((u) => closest(u, names)).filter((n) => n !== undefined))];
  return meant.length ? `${message}; did you mean ${meant.map((n) => `--${n}`).join(' or ')}?` : message;
}

/** The options of the command being parsed: yargs' own getOptions(), which its typings leave out. */
function declaredOptions(y: Argv): DeclaredOptions {
  return (y as unknown as { getOptions(): DeclaredOptions }).getOptions();
}

interface DeclaredOptions {
  key: Record<string, unknown>;
  alias: Record<string, string[]>;
  default: Record<string, unknown>;
}

const camel = (key: string) => key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
