import type { LakehouseCommand } from '../command.js';
import { ENV_EPILOGUE } from '../options.js';
import { ledgerOptions, ledgerRequest } from './ledger.js';

/** `history <table>`: the runs that wrote a table, newest first, from its own commits (docs/history.md). */
export const historyCommand: LakehouseCommand = {
  command: 'history <table>',
  describe: "the runs that wrote a table, newest first (run id, attempt, template, job, config hash, operation, counts), from the table's commits",
  usage: '$0 history <table> --tenant <id> --env <platform.conf> [options]   (table: <layer>.<table> or <catalog>.<namespace>.<table>)',
  builder: (y) =>
    y
      .positional('table', { type: 'string', describe: '<layer>.<table> (the default catalog) or <catalog>.<namespace>.<table>' })
      .options(ledgerOptions)
      .epilogue(ENV_EPILOGUE),
  async handler(argv, io) {
    const { ledgerCommand } = await import('../../runner/ledger.js');
    return ledgerCommand(await ledgerRequest('history', argv, io, { table: String(argv.table) }));
  },
};
