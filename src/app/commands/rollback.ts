import { UsageError } from '../../core/errors.js';
import type { LakehouseCommand } from '../command.js';
import { str } from '../command.js';
import { ENV_EPILOGUE } from '../options.js';
import { planAccess } from '../plan-view.js';
import { ledgerOptions, ledgerRequest } from './ledger.js';

/**
 * `rollback --run-id <id>`: each table that run wrote back to its commit before the run's first
 * (docs/history.md). The tables searched are those the job config writes, as `validate` lists them,
 * or the `--table`s given.
 */
export const rollbackCommand: LakehouseCommand = {
  command: 'rollback',
  describe:
    'restore each table a run wrote to its state before the run (Iceberg rollback_to_snapshot, Delta RESTORE); refused when later runs built on it, unless --cascade',
  usage: '$0 rollback --run-id <id> --config <tenant.conf> [--cascade] [--dry-run] [options]',
  builder: (y) =>
    y
      .options({
        'run-id': { type: 'string', requiresArg: true, describe: 'the run to roll back (its run id, as the status document and history show it)' },
        table: {
          type: 'string',
          requiresArg: true,
          array: true,
          nargs: 1,
          describe: 'a table to search, repeatable, instead of those the job config writes (<layer>.<table> or <catalog>.<namespace>.<table>)',
        },
        cascade: { type: 'boolean', describe: 'also roll back the later runs that committed on top of it' },
        'dry-run': { type: 'boolean', describe: 'say what would be rolled back, and change nothing' },
        ...ledgerOptions,
      })
      .epilogue(ENV_EPILOGUE),
  async handler(argv, io) {
    const undo = str(argv, 'run-id');
    if (!undo) throw new UsageError('rollback: --run-id <id> names the run to roll back');
    const tables = Array.isArray(argv.table) ? argv.table.map(String) : [];
    const { ledgerCommand } = await import('../../runner/ledger.js');
    return ledgerCommand(
      await ledgerRequest('rollback', argv, io, {
        undo,
        ...(tables.length ? { tables } : {}),
        cascade: argv.cascade === true,
        dryRun: argv['dry-run'] === true,
        // The tables a run of the job writes, as validate lists them: the plan's own steps.
        jobTables: (loaded) => planAccess(loaded.plan).writes.flatMap((a) => (a.kind === 'table' ? [a.table] : [])),
      }),
    );
  },
};
