import { InternalError } from '../../core/errors.js';
import type { StepOf } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { relTouches } from '../../spark/plan/touches.js';
import { type StepKindModule, indent } from './kind.js';

/**
 * Compute the query once and keep its rows on the server for the run (a local checkpoint), then
 * run the check over them as a query step does. The executor drops the kept rows when the run ends.
 */
export const materialize: StepKindModule<StepOf<'materialize'>> = {
  async run(step, run) {
    const kept = await run.send({ checkpoint: step.query.rel });
    if (!kept.checkpointRelationId) throw new InternalError(`step ${step.id}: the server answered the checkpoint without naming its rows`);
    run.keep(step.name, kept.checkpointRelationId);
    const { columns, rows } = await run.rows(step.check.rel);
    run.record(step, columns, rows);
    return run.effect(step.interpret(rows as never));
  },
  async diff(step, run) {
    const stale = [...run.stale(step.query.rel), ...run.stale(step.check.rel)];
    if (stale.length) {
      run.notPredicted(step, `it reads ${[...new Set(stale)].join(', ')}, which this run writes before it`);
      return undefined;
    }
    return materialize.run(step, run);
  },
  plan: (step) => ({ checkpoint: step.query.rel }),
  view: (step) => `Materialize ${step.name} (kept for the run):\n${indent(formatRel(step.query.rel), 3)}\nthen:\n${indent(formatRel(step.check.rel), 3)}`,
  touches: (step) => ({ reads: relTouches(step.query.rel), writes: [] }),
  explainable: (step) => step.query.rel,
};
