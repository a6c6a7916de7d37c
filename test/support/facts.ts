import { type Facts, type Row, type Step, StepFacts } from '../../src/jobs/steps.js';

/**
 * Facts as the executor records them, from rows given by step id: each id must be a query or
 * materialize step of `steps` (a test naming a step the plan lacks fails here, as a typo would).
 */
export function factsOf(steps: readonly Step[], byId: Record<string, Row[]>): Facts {
  const facts = new StepFacts();
  for (const [id, rows] of Object.entries(byId)) {
    const step = steps.find((s) => s.id === id);
    if (!step || (step.kind !== 'query' && step.kind !== 'materialize' && step.kind !== 'fingerprint')) throw new Error(`factsOf: no query step ${id}`);
    facts.record(step, step.columns, rows);
  }
  return facts;
}
