import type { Command } from '../command.js';
import { JOB_OPTIONS, jobRequest } from './job.js';

export const validateCommand: Command = {
  spec: {
    name: 'validate',
    summary: 'parse and validate a config without Spark (schema, tenant rules, plan building); lists what a run would read and write',
    usage: 'lakehouse-jobs validate --job <template> --config <file> [options]',
    options: JOB_OPTIONS,
  },
  async run(inv, env) {
    const { runJob } = await import('../../runner/run.js');
    return runJob(jobRequest('validate', inv, env));
  },
};
