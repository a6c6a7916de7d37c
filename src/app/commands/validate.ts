import type { LakehouseCommand } from '../command.js';
import { jobBuilder, jobRequest } from './job.js';

export const validateCommand: LakehouseCommand = {
  command: 'validate',
  describe: 'parse and validate a config without Spark (schema, tenant rules, plan building); lists what a run would read and write',
  usage: '$0 validate --job <template> --config <file> [options]',
  builder: (y) => jobBuilder(y),
  async handler(argv, io) {
    const { runJob } = await import('../../runner/run.js');
    return runJob(await jobRequest('validate', argv, io));
  },
};
