import type { LakehouseCommand } from '../command.js';
import { jobBuilder, jobRequest } from './job.js';

export const planCommand: LakehouseCommand = {
  command: 'plan',
  describe: 'print the plans a run would submit, step by step; sends and writes nothing (but --explain asks the server)',
  usage: '$0 plan --job <template> --config <file> [--format text|json] [--explain] [options]',
  builder: (y) =>
    jobBuilder(y).options({
      format: {
        type: 'string',
        requiresArg: true,
        choices: ['text', 'json'],
        default: 'text',
        describe: 'text: an operator tree per step; json: the Spark Connect protobuf plans',
      },
      explain: { type: 'boolean', describe: "also Spark's own explain of each step, from the remote (connects; runs nothing)" },
    }),
  async handler(argv, io) {
    const { runJob } = await import('../../runner/run.js');
    return runJob(await jobRequest('plan', argv, io, argv.explain === true ? { explain: true } : {}));
  },
};
