import { createHash } from 'node:crypto';
import type { StepOf } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { relTouches } from '../../spark/plan/touches.js';
import { type StepKindModule, indent } from './kind.js';
import type { StepRun } from './kind.js';

/**
 * List the files a source would read (analysed: no file is read) and read `previous` at the same
 * time (two round trips in flight at once), hash the sorted files with the step's identity, and let
 * the step's function compare. The row recorded: the fingerprint, whether it found the batch
 * unchanged, and the tables' commits it read (for later steps).
 */
export const fingerprint: StepKindModule<StepOf<'fingerprint'>> = {
  async run(step, run) {
    const [files, previous] = await Promise.all([run.inputFiles(step.source.rel), previousRows(step, run)]);
    const hash = createHash('sha256').update(step.identity).update('\n');
    for (const f of [...files].sort()) hash.update(f).update('\n');
    const value = hash.digest('hex');
    const effect = step.interpret(value, previous);
    run.record(step, step.columns, [{ fingerprint: value, unchanged: effect.unchanged ? 1 : 0, commits: effect.commits ?? null }]);
    const { unchanged: _unchanged, commits: _commits, ...rest } = effect;
    return run.effect(rest);
  },
  async diff(step, run) {
    const stale = [...run.stale(step.source.rel), ...run.stale(step.previous.rel)];
    if (stale.length) {
      run.notPredicted(step, `it reads ${[...new Set(stale)].join(', ')}, which this run writes before it`);
      return undefined;
    }
    return fingerprint.run(step, run);
  },
  plan: (step) => ({ relation: step.previous.rel }),
  view: (step) =>
    `Fingerprint (lists the input files, reads none) of:\n${indent(formatRel(step.source.rel), 3)}\nagainst:\n${indent(formatRel(step.previous.rel), 3)}`,
  touches: (step) => ({ reads: [...relTouches(step.source.rel), ...relTouches(step.previous.rel)], writes: [] }),
  explainable: (step) => step.previous.rel,
};

/** `previous`'s rows; none when a table it reads does not exist yet (a first run). */
async function previousRows(step: StepOf<'fingerprint'>, run: StepRun): Promise<Record<string, unknown>[]> {
  try {
    return (await run.rows(step.previous.rel)).rows;
  } catch (e) {
    if (!run.errorClass(e)?.startsWith('TABLE_OR_VIEW_NOT_FOUND')) throw e;
    return [];
  }
}
