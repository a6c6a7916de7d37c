import type { StepOf } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { relTouches } from '../../spark/plan/touches.js';
import { type StepKindModule, indent } from './kind.js';

/** Analyse the columns a query produces (nothing is read); the step's function decides on them. */
export const checkColumns: StepKindModule<StepOf<'checkColumns'>> = {
  async run(step, run) {
    const columns = await run.schema(step.source.rel);
    const effect = step.interpret(columns.map((f) => ({ name: f.name, type: f.type })));
    if (effect.fail) throw effect.fail;
    return effect.skip;
  },
  async diff(step, run) {
    const stale = run.stale(step.source.rel);
    if (stale.length) {
      run.notPredicted(step, `it analyses ${stale.join(', ')}, which this run writes before it`);
      return undefined;
    }
    return checkColumns.run(step, run);
  },
  plan: (step) => ({ relation: step.source.rel }),
  view: (step) => `CheckColumns (analyses, reads no row) of:\n${indent(formatRel(step.source.rel), 3)}`,
  touches: (step) => ({ reads: relTouches(step.source.rel), writes: [] }),
  explainable: (step) => step.source.rel,
};
