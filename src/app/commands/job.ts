import type { Argv } from 'yargs';
import { UsageError } from '../../core/errors.js';
import { XCOM_DIR, statusText, terminationTargets } from '../../core/status.js';
import type { RunRequest } from '../../runner/run.js';
import type { RunView } from '../../runner/view.js';
import { type Args, type Io, seconds, str } from '../command.js';
import { ENV_EPILOGUE, jobOptions } from '../options.js';
import { chooseOutput, logSink } from '../output.js';
import { jobView } from '../views/job.js';

/** The options of `run`, `validate` and `plan`, and the epilogue that names their variables. */
export const jobBuilder = (y: Argv) => y.options(jobOptions).epilogue(ENV_EPILOGUE);

/**
 * The runner's request for a job command, with the view of whoever reads the output (src/app/output.ts):
 * on a terminal a run shows its steps and a summary; anywhere else exactly the status document.
 */
export async function jobRequest(command: RunRequest['command'], argv: Args, io: Io, extra: Partial<RunRequest> = {}): Promise<RunRequest> {
  const config = str(argv, 'config');
  if (!config) throw new UsageError('--config <file> is required');
  const retryBudgetMs = seconds(argv['retry-budget'], 'retry-budget');
  const output = chooseOutput(argv, io);
  const envFile = str(argv, 'env');
  const base = jobView({
    config,
    ...(envFile ? { envFile } : {}),
    ...(str(argv, 'format') === 'json' ? { planFormat: 'json' } : {}),
    stdout: io.stdout,
    stderr: io.stderr,
  });
  let view: RunView = base;
  let print = io.stderr;
  if (output.terminal) {
    const { TerminalView } = await import('../views/terminal.js');
    const t = new TerminalView({
      stdout: io.stdout,
      stderr: io.stderr,
      summary: output.summary,
      colorize: true,
      ...(io.columns ? { columns: io.columns } : {}),
    });
    print = (text) => t.log(text);
    view = {
      ...base,
      ...(command === 'run' || command === 'diff' ? { loaded: (l) => t.loaded(l), step: (e) => t.step(e), progress: (s, p) => t.progress(s, p) } : {}),
      ...(output.summary && command !== 'plan' ? { status: (d) => t.status(d) } : {}),
    };
  }
  // Beside the document on stdout, what a person reads of a diff (on a terminal, its summary says it all).
  if (command === 'diff' && !output.summary) {
    const { diffSummary } = await import('../views/diff.js');
    view = { ...view, status: (d) => (io.stdout(`${statusText(d)}\n`), print(diffSummary(d, output.terminal))) };
  }
  const sink = await logSink(output, io, print);
  const set = argv.set;
  return {
    command,
    config,
    set: Array.isArray(set) ? set.map(String) : [],
    logLevel: output.logLevel,
    ...(sink ? { logSink: sink } : {}),
    env: process.env,
    ...(str(argv, 'job') ? { job: str(argv, 'job')! } : {}),
    ...(envFile ? { envFile } : {}),
    ...(str(argv, 'tenant') !== undefined ? { tenant: str(argv, 'tenant')! } : {}),
    ...(str(argv, 'remote') ? { remote: str(argv, 'remote')! } : {}),
    ...(str(argv, 'run-id') ? { runId: str(argv, 'run-id')! } : {}),
    ...(str(argv, 'logical-date') ? { logicalDate: str(argv, 'logical-date')! } : {}),
    ...(str(argv, 'status-file') ? { statusFile: str(argv, 'status-file')! } : {}),
    ...(retryBudgetMs !== undefined ? { retryBudgetMs } : {}),
    targets: { xcomDir: process.env.LAKEHOUSE_XCOM_DIR ?? XCOM_DIR, ...terminationTargets(str(argv, 'termination-log')), stdout: io.stdout },
    view,
    signals: process,
    exitNow: (code) => process.exit(code),
    ...extra,
  };
}
