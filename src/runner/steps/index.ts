import type { Step } from '../../jobs/steps.js';
import type { Rel } from '../../spark/plan/relations.js';
import type { Touches } from '../../spark/plan/touches.js';
import { checkColumns } from './check-columns.js';
import { command } from './command.js';
import { compareSchemas } from './compare-schemas.js';
import { ensureTable } from './ensure-table.js';
import { fingerprint } from './fingerprint.js';
import type { PlanNode, StepKindModule, StepKinds } from './kind.js';
import { materialize } from './materialize.js';
import { probePaths } from './probe-paths.js';
import { query } from './query.js';
import { stream } from './stream.js';

export type { PlanNode, Sent, StepKindModule, StepRun } from './kind.js';

/** Every step kind's module: a kind without one, or a module without an operation, does not compile. */
export const STEP_KINDS: StepKinds = { command, ensureTable, compareSchemas, checkColumns, probePaths, stream, query, materialize, fingerprint };

/** The module of a step's kind. */
export function kindOf<S extends Step>(step: S): StepKindModule<S> {
  // The record is keyed by kind, so the module of `step.kind` is the one for S.
  return STEP_KINDS[step.kind] as unknown as StepKindModule<S>;
}

/** What a step reads and writes, from its plan nodes (one walk for `plan`'s listing and for lineage). */
export const stepTouches = (step: Step): Touches => kindOf(step).touches(step);

/** The operator tree `plan` prints for a step. */
export const formatStep = (step: Step): string => kindOf(step).view(step);

/** The relation of a step that Spark can explain without running anything, if it has one. */
export const explainableRel = (step: Step): Rel | undefined => kindOf(step).explainable(step);

/** A step's main plan, as nodes (`plan --format json` compiles it). */
export const stepPlanNode = (step: Step): PlanNode => kindOf(step).plan(step);
