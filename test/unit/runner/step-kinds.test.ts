import { describe, expect, it } from 'vitest';
import type { StepKind } from '../../../src/jobs/steps.js';
import { STEP_KINDS } from '../../../src/runner/steps/index.js';
import type { StepKindModule, StepKinds } from '../../../src/runner/steps/kind.js';

/** One module per step kind, each with every operation: the record's type is what the compiler checks. */
describe('the step kinds', () => {
  it('every kind has a module, and every module every operation', () => {
    const kinds: Record<StepKind, true> = {
      command: true,
      ensureTable: true,
      compareSchemas: true,
      checkColumns: true,
      probePaths: true,
      stream: true,
      query: true,
      materialize: true,
      fingerprint: true,
    };
    expect(Object.keys(STEP_KINDS).sort()).toEqual(Object.keys(kinds).sort());
    const operations: (keyof StepKindModule<never>)[] = ['run', 'diff', 'plan', 'view', 'touches', 'explainable'];
    for (const module of Object.values(STEP_KINDS)) for (const op of operations) expect(typeof module[op]).toBe('function');
  });

  it('a kind without its module, or a module without an operation, does not compile', () => {
    const { stream: _stream, ...withoutStream } = STEP_KINDS;
    // @ts-expect-error the stream kind has no module
    const missingKind: StepKinds = withoutStream;
    const { explainable: _explainable, ...withoutExplain } = STEP_KINDS.query;
    // @ts-expect-error the query module lacks explainable
    const missingOperation: StepKinds = { ...STEP_KINDS, query: withoutExplain };
    expect([missingKind, missingOperation]).toHaveLength(2);
  });
});
