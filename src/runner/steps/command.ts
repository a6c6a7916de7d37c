import type { StepOf } from '../../jobs/steps.js';
import { formatCmd } from '../../spark/plan/format.js';
import { cmdTouches } from '../../spark/plan/touches.js';
import type { StepKindModule } from './kind.js';

/** Run a command (DDL, write, MERGE). */
export const command: StepKindModule<StepOf<'command'>> = {
  async run(step, run) {
    await run.send({ command: step.command });
    return undefined;
  },
  plan: (step) => ({ command: step.command }),
  view: (step) => formatCmd(step.command),
  touches: (step) => cmdTouches(step.command),
  explainable: (step) => {
    const c = step.command;
    return c.kind === 'merge' ? c.source : c.kind === 'sqlCommand' || c.kind === 'extension' ? undefined : c.input;
  },
};
