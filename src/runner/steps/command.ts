import type { StepOf } from '../../jobs/steps.js';
import { formatCmd } from '../../spark/plan/format.js';
import { cmdTouches } from '../../spark/plan/touches.js';
import { writeDetail } from '../diff.js';
import type { StepKindModule } from './kind.js';

/** Run a command (DDL, write, MERGE). */
export const command: StepKindModule<StepOf<'command'>> = {
  async run(step, run) {
    try {
      await run.send({ command: step.command });
    } catch (e) {
      // Two runs' IF NOT EXISTS at once: the catalog checked, then both inserted, and this one lost.
      // Its second check sees the winner's (by code, not instanceof: plan and validate load no gRPC).
      if (!step.ifNotExists || (e as { code?: unknown } | null)?.code !== 'CREATE_RACE') throw e;
      run.logger.info({ step: step.id }, 'another run created it at the same moment: sending it once more');
      await run.send({ command: step.command });
    }
    return undefined;
  },
  async diff(step, run) {
    run.wouldWrite(step, step.command, await writeDetail(step.command, run));
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
