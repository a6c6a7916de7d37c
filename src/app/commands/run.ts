import type { Command } from '../command.js';
import { JOB_OPTIONS, jobRequest } from './job.js';

export const runCommand: Command = {
  spec: {
    name: 'run',
    isDefault: true,
    summary: 'run a job on Spark Connect',
    usage: 'lakehouse-jobs [run] --job <template> --config <tenant.conf> [options]',
    options: JOB_OPTIONS,
  },
  async run(inv, env) {
    // Each command loads only what it needs: a cold start is what an orchestrator pays per task.
    const { runJob } = await import('../../runner/run.js');
    return runJob(jobRequest('run', inv, env));
  },
};
