import { describe, expect, it } from 'vitest';
import { type FingerprintStep, type Row, type StepKind, fingerprintStep } from '../../../src/jobs/steps.js';
import { Query } from '../../../src/spark/plan/query.js';
import { testSql } from '../../support/sql.js';
import { STEP_KINDS } from '../../../src/runner/steps/index.js';
import type { StepKindModule, StepKinds, StepRun } from '../../../src/runner/steps/kind.js';

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

describe('the fingerprint kind', () => {
  const step = (interpret: FingerprintStep['interpret']) =>
    fingerprintStep({
      id: 'fp',
      title: 'fp',
      source: Query.read('parquet', { paths: ['file:///b'] }),
      identity: 'plan',
      previous: Query.sql(testSql('SELECT 1 AS x')),
      interpret,
    });
  const run = (files: string[], previous: () => Promise<Row[]>) => {
    const recorded: Row[][] = [];
    const r = {
      inputFiles: async () => files,
      rows: async () => ({ columns: ['x'], rows: await previous() }),
      record: (_s: unknown, _c: unknown, rows: Row[]) => void recorded.push(rows),
      effect: (e: { skip?: string }) => e.skip,
      errorClass: (e: unknown) => (e instanceof Error ? e.message : undefined),
    } as unknown as StepRun;
    return { r, recorded };
  };

  it('hashes the identity and the files in any order, and reads previous at the same time', async () => {
    const seen: string[] = [];
    const s = step((fingerprint, rows) => (seen.push(`${fingerprint}:${rows.length}`), rows.length > 0 ? { unchanged: true, commits: { t: '7' } } : {}));
    const a = run(['file:///b/2.parquet', 'file:///b/1.parquet'], async () => [{ x: 1 }]);
    const b = run(['file:///b/1.parquet', 'file:///b/2.parquet'], async () => [{ x: 1 }]);
    await STEP_KINDS.fingerprint.run(s, a.r);
    await STEP_KINDS.fingerprint.run(s, b.r);
    expect(seen[0]).toBe(seen[1]);
    // The commits the step's function read are recorded with the fingerprint, for later steps.
    expect(a.recorded[0]).toEqual([{ fingerprint: seen[0]!.split(':')[0], unchanged: 1, commits: { t: '7' } }]);
    // Another file is another batch; a missing table reads as no rows.
    const c = run(['file:///b/1.parquet', 'file:///b/3.parquet'], async () => {
      throw new Error('TABLE_OR_VIEW_NOT_FOUND');
    });
    await STEP_KINDS.fingerprint.run(s, c.r);
    expect(seen[2]).not.toBe(seen[0]);
    expect(seen[2]!.endsWith(':0')).toBe(true);
    expect(c.recorded[0]).toEqual([{ fingerprint: expect.any(String), unchanged: 0, commits: null }]);
  });
});
