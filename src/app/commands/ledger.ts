import type { Options } from 'yargs';
import { XCOM_DIR, statusText, terminationTargets } from '../../core/status.js';
import type { LedgerRequest } from '../../runner/ledger.js';
import { type Args, type Io, str } from '../command.js';
import { logOptions, platformOption, remoteOption } from '../options.js';
import { chooseOutput, logSink } from '../output.js';

const string = (describe: string, extra: Options = {}): Options => ({ type: 'string', requiresArg: true, describe, ...extra });

/** The options `history` and `rollback` share: whose tables, on which server, where the status goes. */
export const ledgerOptions = {
  config: string('a job config of the tenant (its tenant.id and storage root; for rollback, the tables it writes)'),
  job: string('job template of --config (may be omitted when the config names job.template)'),
  ...platformOption,
  tenant: string("the tenant whose tables these are (the config's tenant.id must be this one)"),
  ...remoteOption,
  'status-file': string('also write the status document here (atomically)'),
  'termination-log': string('Kubernetes termination message file (only where it exists, unless named)'),
  ...logOptions,
} satisfies Record<string, Options>;

/** The runner's request for a ledger command: on a terminal a short table, anywhere else the status document. */
export async function ledgerRequest(command: LedgerRequest['command'], argv: Args, io: Io, extra: Partial<LedgerRequest>): Promise<LedgerRequest> {
  const output = chooseOutput(argv, io);
  const sink = await logSink(output, io);
  let view: LedgerRequest['view'];
  if (output.terminal) {
    const { ledgerSummary } = await import('../views/ledger.js');
    view = (doc) => (output.summary ? io.stdout(ledgerSummary(doc)) : (io.stdout(`${statusText(doc)}\n`), io.stderr(ledgerSummary(doc))));
  }
  return {
    command,
    ...(str(argv, 'config') ? { config: str(argv, 'config')! } : {}),
    ...(str(argv, 'job') ? { job: str(argv, 'job')! } : {}),
    ...(str(argv, 'env') ? { envFile: str(argv, 'env')! } : {}),
    ...(str(argv, 'tenant') !== undefined ? { tenant: str(argv, 'tenant')! } : {}),
    ...(str(argv, 'remote') ? { remote: str(argv, 'remote')! } : {}),
    ...(str(argv, 'status-file') ? { statusFile: str(argv, 'status-file')! } : {}),
    env: process.env,
    logLevel: output.logLevel,
    ...(sink ? { logSink: sink } : {}),
    targets: { xcomDir: process.env.LAKEHOUSE_XCOM_DIR ?? XCOM_DIR, ...terminationTargets(str(argv, 'termination-log')), stdout: io.stdout },
    ...(view ? { view } : {}),
    ...extra,
  };
}
