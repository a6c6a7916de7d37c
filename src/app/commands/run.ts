import type { LakehouseCommand } from '../command.js';
import { jobBuilder, jobRequest } from './job.js';

/** `run` (the default command: an invocation that starts with an option runs a job, src/app/main.ts). */
export const runCommand: LakehouseCommand = {
  command: 'run',
  describe: 'run a job on Spark Connect (the default command)',
  usage: '$0 [run] --job <template> --config <tenant.conf> [options]',
  builder: (y) => jobBuilder(y).options({ 'dry-run': { type: 'boolean', describe: 'what the run would do, writing nothing: the same as `diff`' } }),
  async handler(argv, io) {
    // Each command loads only what it needs: a cold start is what an orchestrator pays per task.
    const { runJob } = await import('../../runner/run.js');
    return runJob(await jobRequest(argv['dry-run'] === true ? 'diff' : 'run', argv, io));
  },
};
