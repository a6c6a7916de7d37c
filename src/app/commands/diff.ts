import type { LakehouseCommand } from '../command.js';
import { jobBuilder, jobRequest } from './job.js';

/** `diff` (also `run --dry-run`): what a run would change now, on today's data, writing nothing (docs/diff.md). */
export const diffCommand: LakehouseCommand = {
  command: 'diff',
  describe: 'what a run would do now (rows per table, replaced ranges, new tables and columns, failing expectations); writes nothing',
  usage: '$0 diff --job <template> --config <tenant.conf> [options]',
  builder: (y) => jobBuilder(y),
  async handler(argv, io) {
    const { runJob } = await import('../../runner/run.js');
    return runJob(await jobRequest('diff', argv, io));
  },
};
