import type { StepOf } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { relTouches } from '../../spark/plan/touches.js';
import type { StepKindModule } from './kind.js';

/** Run a query; its rows become the step's fact for later steps, and its function says what they mean. */
export const query: StepKindModule<StepOf<'query'>> = {
  async run(step, run) {
    let answer: { columns: readonly string[] | undefined; rows: Record<string, unknown>[] };
    try {
      answer = await run.rows(step.query.rel);
    } catch (e) {
      // A table the run creates later (an incremental read's target on its first run): no rows.
      if (!step.tableMayBeMissing || !run.errorClass(e)?.startsWith('TABLE_OR_VIEW_NOT_FOUND')) throw e;
      answer = { columns: step.columns, rows: [] };
    }
    run.record(step, answer.columns, answer.rows);
    return run.effect(step.interpret(answer.rows as never, run.facts));
  },
  async diff(step, run) {
    // A read of what this run's earlier (unsent) writes change would see the table before them.
    const stale = run.stale(step.query.rel);
    const predicted = stale.length && step.predict && run.stale(step.predict.rel).length === 0 ? step.predict : undefined;
    if (stale.length && !predicted) {
      run.notPredicted(step, `it reads ${stale.join(', ')}, which this run writes before it`);
      return undefined;
    }
    const read = await run.rows((predicted ?? step.query).rel);
    run.record(step, read.columns, read.rows);
    if (step.samples) await run.sample(step.samples(read.rows as never));
    return run.effect(step.interpret(read.rows as never, run.facts));
  },

  plan: (step) => ({ relation: step.query.rel }),
  view: (step) => formatRel(step.query.rel),
  touches: (step) => ({ reads: relTouches(step.query.rel), writes: [] }),
  explainable: (step) => step.query.rel,
};
