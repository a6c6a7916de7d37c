import type { Command } from '../command.js';
import { JOB_OPTIONS, jobRequest } from './job.js';

export const planCommand: Command = {
  spec: {
    name: 'plan',
    summary: 'print the plans a run would submit, step by step; sends and writes nothing (but --explain asks the server)',
    usage: 'lakehouse-jobs plan --job <template> --config <file> [--format text|json] [--explain] [options]',
    options: [
      ...JOB_OPTIONS,
      {
        name: 'format',
        type: 'string',
        arg: '<format>',
        default: 'text',
        choices: ['text', 'json'],
        describe: 'text: an operator tree per step; json: the Spark Connect protobuf plans',
      },
      { name: 'explain', type: 'boolean', describe: "also Spark's own explain of each step, from the remote (connects; runs nothing)" },
    ],
  },
  async run(inv, env) {
    const { runJob } = await import('../../runner/run.js');
    return runJob(
      jobRequest('plan', inv, env, {
        ...(inv.values.explain === true ? { explain: true } : {}),
      }),
    );
  },
};
