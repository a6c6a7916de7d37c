import { cliFailure, ExitCode } from '../core/errors.js';
import { closest } from '../core/config/closest.js';
import { VERSION } from '../version.js';
import { type Command, commandHelp, parseInvocation, programHelp } from './command.js';
import { pingCommand } from './commands/ping.js';
import { planCommand } from './commands/plan.js';
import { runCommand } from './commands/run.js';
import { schemaCommand } from './commands/schema.js';
import { templatesCommand } from './commands/templates.js';
import { validateCommand } from './commands/validate.js';

/** The command line (docs/contracts.md): pick the command, parse its arguments, run it, return its exit code. */
export const COMMANDS: readonly Command[] = [runCommand, validateCommand, planCommand, pingCommand, templatesCommand, schemaCommand];

export interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processIo: Io = { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) };

export async function main(argv: readonly string[], env: Record<string, string | undefined>, io: Io = processIo): Promise<number> {
  const first = argv[0];
  if (first === '--version') {
    io.stdout(`${VERSION}\n`);
    return ExitCode.succeeded;
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    io.stdout(programHelp(COMMANDS));
    return ExitCode.succeeded;
  }
  const named = COMMANDS.find((c) => c.spec.name === first);
  if (!named && first !== undefined && !first.startsWith('-')) {
    const near = closest(
      first,
      COMMANDS.map((c) => c.spec.name),
    );
    io.stderr(`lakehouse-jobs: unknown command "${first}"${near ? `; did you mean "${near}"?` : ''}\nTry lakehouse-jobs --help.\n`);
    return ExitCode.usage;
  }
  const command = named ?? COMMANDS.find((c) => c.spec.isDefault)!;
  const args = named ? argv.slice(1) : argv;
  if (args.includes('--help') || args.includes('-h')) {
    io.stdout(commandHelp(command.spec));
    return ExitCode.succeeded;
  }
  try {
    return await command.run(parseInvocation(command.spec, args, env), env);
  } catch (e) {
    const failure = cliFailure(e);
    io.stderr(
      `lakehouse-jobs: ${failure.message}\n${failure.stack ? `${failure.stack}\n` : ''}${failure.usage ? `Try lakehouse-jobs ${named ? `${command.spec.name} ` : ''}--help.\n` : ''}`,
    );
    return failure.exitCode;
  }
}
