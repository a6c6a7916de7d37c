import type { StepOf } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { relTouches } from '../../spark/plan/touches.js';
import type { StepKindModule } from './kind.js';

/** Run a query; its rows become the step's fact for later steps, and its function says what they mean. */
export const query: StepKindModule<StepOf<'query'>> = {
  async run(step, run) {
    const { columns, rows } = await run.rows(step.query.rel);
    run.record(step, columns, rows);
    return run.effect(step.interpret(rows as never));
  },
  plan: (step) => ({ relation: step.query.rel }),
  view: (step) => formatRel(step.query.rel),
  touches: (step) => ({ reads: relTouches(step.query.rel), writes: [] }),
  explainable: (step) => step.query.rel,
};
