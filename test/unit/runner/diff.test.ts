import { describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../../src/core/status.js';
import type { Step } from '../../../src/jobs/steps.js';
import { DiffState } from '../../../src/runner/diff.js';
import { col, lit } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import { diffSummary } from '../../../src/app/views/diff.js';

/**
 * What a diff knows without a server: which reads an unsent write makes stale, how a table the run
 * would create is read (the relation it is created from, no rows), when a step's condition cannot
 * be told, and the summary a person reads. The end-to-end proof (nothing written, metrics exactly
 * the run's) is test/integration/runner/diff.test.ts.
 */

const silver = { catalog: 'lake', namespace: 'acme_silver', table: 'orders' };
const parts = ['lake', 'acme_silver', 'orders'];
const source = Query.read('parquet', { paths: ['file:///lake/acme/bronze/orders'] });
const step = (id: string, extra: Partial<Step> = {}) => ({ id, title: id, kind: 'command', ...extra }) as unknown as Step;

describe('DiffState', () => {
  it('reads a table the run would create as its create relation without rows, and a write makes later reads stale', () => {
    const d = new DiffState();
    const create = source.limit(0).writeTo(parts, 'create', { provider: 'iceberg' });
    d.created({ id: 'create-table', title: 'Create', kind: 'ensureTable', table: silver, location: 'file:///lake/acme/silver/orders', create } as never, [
      { name: 'id', type: 'int' } as never,
    ]);
    const read = Query.table(parts).filter(col('id'));
    expect(d.stale(read.rel)).toEqual([]);
    // The read now reads the create relation, with no rows.
    expect(JSON.stringify(d.substitute(read.rel))).toContain('"kind":"limit"');
    expect(JSON.stringify(d.substitute(read.rel))).not.toContain('"kind":"table"');
    expect(d.report.changes[0]).toMatchObject({ table: 'lake.acme_silver.orders', format: 'iceberg', create: { columns: [{ name: 'id', type: 'int' }] } });

    d.wrote(step('merge'), source.as('s').mergeInto(parts, lit(true), { whenNotMatched: [{ action: 'insertAll' }] }));
    expect(d.stale(read.rel)).toEqual(['lake.acme_silver.orders']);
    // Another table, and the source files, are not stale.
    expect(d.stale(Query.table(['lake', 'acme_silver', 'other']).rel)).toEqual([]);
    expect(d.stale(source.rel)).toEqual([]);
    expect(d.report.writes).toEqual(['create-table', 'merge']);
  });

  it('a write to files makes reads under that path stale', () => {
    const d = new DiffState();
    d.wrote(step('write'), source.writeFiles('file:///lake/acme/bronze/x', 'parquet', { mode: 'overwrite', partitionBy: [] }));
    expect(d.stale(Query.read('parquet', { paths: ['file:///lake/acme/bronze/x/d=1'] }).rel)).toEqual(['file:///lake/acme/bronze/x/d=1']);
    expect(d.stale(Query.read('parquet', { paths: ['file:///lake/acme/bronze/xy'] }).rel)).toEqual([]);
  });

  it("cannot tell a step's condition that reads a step it did not predict", () => {
    const d = new DiffState();
    const counted = step('count-expired', { kind: 'query' } as never);
    d.notPredicted(counted, 'it reads a table this run writes before it');
    const when = (facts: { count(ref: { step: string; column: string }): number }) => facts.count({ step: 'count-expired', column: 'rows' }) > 0;
    const facts = { rows: () => undefined, count: () => 0 };
    expect(d.whenUnknown(step('expire', { when } as never), facts)).toBe(true);
    expect(d.whenUnknown(step('other', { when: () => true } as never), facts)).toBe(false);
    expect(d.report.notPredicted.map((n) => n.step)).toEqual(['count-expired', 'expire']);
  });
});

describe('the diff summary', () => {
  it('names what would be created, replaced and counted, failing expectations with their samples, and what was not predicted', () => {
    const doc = {
      schema: 'lakehouse-jobs/status/v1',
      status: 'succeeded',
      exitCode: 0,
      command: 'diff',
      job: { template: 'gold-publish', schemaVersion: 1 },
      runId: 'r1',
      startedAt: '',
      finishedAt: '',
      durationMs: 5,
      outputs: [
        {
          table: 'lake.acme_gold.sales',
          format: 'iceberg',
          metrics: { written: 3 },
          expectations: [{ name: 'big', type: 'expression', action: 'warn', outcome: 'warned', failedRows: 1, samples: [{ name: 'one', revenue: 10 }] }],
        },
      ],
      metrics: { rowsRead: 3, rowsWritten: 3 },
      diff: {
        changes: [
          {
            table: 'lake.acme_gold.sales',
            format: 'iceberg',
            create: { columns: [{ name: 'name', type: 'string' }], partitionBy: [] },
            writes: [{ step: 'publish', title: 'Publish', replaces: "sale_date = DATE '2026-07-05'", rowsReplaced: 0 }],
          },
        ],
        writes: ['create-table', 'publish'],
        streams: [],
        notPredicted: [{ step: 'read-commit', reason: 'it reads lake.acme_gold.sales, which this run writes before it' }],
      },
    } as unknown as StatusDocument;
    const text = diffSummary(doc);
    expect(text).toContain('diff: the run would write');
    expect(text).toContain('lake.acme_gold.sales (iceberg): written 3');
    expect(text).toContain('would be created: name string');
    expect(text).toContain("publish replaces sale_date = DATE '2026-07-05' (0 rows now)");
    expect(text).toContain('expectation big on lake.acme_gold.sales would be warned: 1 rows');
    expect(text).toContain('{"name":"one","revenue":10}');
    expect(text).toContain('not predicted: read-commit');
  });
});
