import type { StepOf } from '../../jobs/steps.js';
import { listing, pathExists } from '../table-guards.js';
import type { StepKindModule } from './kind.js';

/** Check which paths exist by listing them (no file is read); the step's function decides what the missing ones mean. */
export const probePaths: StepKindModule<StepOf<'probePaths'>> = {
  async run(step, run) {
    const missing: string[] = [];
    for (const path of step.paths) if (!(await pathExists(run, path))) missing.push(path);
    const effect = step.interpret(missing);
    if (effect.fail) throw effect.fail;
    return effect.skip;
  },
  async diff(step, run) {
    const stale = step.paths.flatMap((p) => run.stale(listing([p]).rel));
    if (stale.length) {
      run.notPredicted(step, `it lists ${stale.join(', ')}, which this run writes before it`);
      return undefined;
    }
    return probePaths.run(step, run);
  },
  plan: (step) => ({ relation: listing(step.paths).rel }),
  view: (step) => `ProbePaths (lists, reads no file)\n${step.paths.map((p) => `   ${p}`).join('\n')}`,
  touches: (step) => ({ reads: [{ kind: 'listing', paths: step.paths }], writes: [] }),
  explainable: () => undefined,
};
