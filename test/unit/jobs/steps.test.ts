import { describe, expect, it } from 'vitest';
import { InternalError } from '../../../src/core/errors.js';
import { StepFacts, materializeStep, queryStep, withId } from '../../../src/jobs/steps.js';
import { alias, fn, lit } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';

/**
 * Steps talk through typed handles: a query step's rows are typed by its declared columns, a later
 * step reads them through the step itself, and rows without a declared column are a bug (70),
 * never a silent 0.
 */

const counts = () =>
  queryStep({
    id: 'measure',
    title: 'measure',
    query: Query.table(['lake', 'acme_silver', 'orders']).aggregate([], [alias(fn('count', lit(1)), 'inserted'), alias(fn('count', lit(1)), 'updated')]),
    columns: ['inserted', 'updated'],
    interpret: ([r]) => ({ metrics: { rowsWritten: Number(r?.inserted ?? 0) + Number(r?.updated ?? 0) } }),
  });

describe('typed step handles', () => {
  it('a misspelt column or an unknown step does not compile', () => {
    const measure = counts();
    const facts = new StepFacts();
    facts.record(measure, ['inserted', 'updated'], [{ inserted: 2, updated: 1 }]);
    expect(facts.count(measure.col('inserted'))).toBe(2);
    // @ts-expect-error 'insrted' is not a column of measure
    expect(() => measure.col('insrted')).toThrow(/has no column insrted/);
    queryStep({
      id: 'typed',
      title: 'typed',
      query: Query.table(['lake', 'n', 't']),
      columns: ['rows'],
      // @ts-expect-error the rows are typed by the declared columns
      interpret: ([r]) => ({ metrics: { rowsRead: Number(r?.row ?? 0) } }),
    });
    // @ts-expect-error facts are read through a step's handle, never by a step id and column name
    expect(facts.count({ step: 'measure', column: 'inserted' })).toBe(2);
  });

  it('a step declaring columns its query does not produce fails when the plan is built', () => {
    expect(() =>
      queryStep({
        id: 'measure',
        title: 'measure',
        query: Query.table(['lake', 'n', 't']).aggregate([], [alias(fn('count', lit(1)), 'rows')]),
        columns: ['row'],
        interpret: () => ({}),
      }),
    ).toThrow('step measure declares the columns row, but its query produces rows');
    expect(() =>
      materializeStep({
        id: 'check',
        title: 'check',
        name: 'kept',
        query: Query.table(['lake', 'n', 't']),
        check: Query.materialized('kept').aggregate([], [alias(fn('count', lit(1)), 'n')]),
        columns: ['n', 'n'],
        interpret: () => ({}),
      }),
    ).toThrow(/declares a column twice/);
  });

  it('rows that lack a declared column are an internal error (70), not a 0', () => {
    const facts = new StepFacts();
    const e = (() => {
      try {
        facts.record(counts(), ['inserted'], [{ inserted: 1 }]);
      } catch (x) {
        return x;
      }
    })();
    expect(e).toBeInstanceOf(InternalError);
    expect((e as InternalError).exitCode).toBe(70);
    expect((e as Error).message).toContain('missing updated');
    expect(() => facts.record(counts(), ['inserted', 'updated', 'extra'], [])).toThrow(InternalError);
    // No schema at all (no rows): nothing to check, the counts read 0.
    facts.record(counts(), undefined, []);
    expect(facts.count(counts().col('updated'))).toBe(0);
    expect(() => facts.record(counts(), undefined, [{ inserted: 1 }])).toThrow(InternalError);
  });

  it('a step that did not run has no rows; its counts read 0', () => {
    const facts = new StepFacts();
    expect(facts.rows(counts())).toBeUndefined();
    expect(facts.count(counts().col('inserted'))).toBe(0);
  });

  it('a renamed step keeps a handle of its own name', () => {
    const renamed = withId(counts(), 'measure-1');
    expect(renamed.col('inserted')).toEqual({ step: 'measure-1', column: 'inserted' });
  });
});
