import { describe, expect, it } from 'vitest';
import type { Cmd } from '../../../../src/spark/plan/commands.js';
import { Secret } from '../../../../src/core/secrets.js';
import { col } from '../../../../src/spark/plan/expressions.js';
import { Query } from '../../../../src/spark/plan/query.js';
import { cmdTouches, relTouches } from '../../../../src/spark/plan/touches.js';
import { testQuery, testCommand } from '../../../support/sql.js';

describe('what plan nodes touch (one walk for plan listings and lineage)', () => {
  const src = Query.read('parquet', { paths: ['file:///a', 'file:///b'], options: { basePath: 'file:///' } }).join(Query.table(['lake', 'n', 't']), ['id']);

  it('names the leaves a relation reads, left to right, through every operator', () => {
    expect(relTouches(src.filter(col('ok')).limit(5).rel)).toEqual([
      { kind: 'source', format: 'parquet', paths: ['file:///a', 'file:///b'], options: { basePath: 'file:///' } },
      { kind: 'table', parts: ['lake', 'n', 't'] },
    ]);
    expect(relTouches(testQuery('SELECT * FROM lake.n.hidden').rel)).toEqual([]);
  });

  it('names what commands write: tables with their format and location, files, and sinks named by options', () => {
    expect(cmdTouches(src.writeTo(['lake', 'n', 'u'], 'create', { provider: 'delta', properties: { location: 'file:///lake/n/u' } })).writes).toEqual([
      { kind: 'table', parts: ['lake', 'n', 'u'], format: 'delta', location: 'file:///lake/n/u' },
    ]);
    expect(cmdTouches(src.writeFiles('file:///out', 'parquet', { mode: 'overwrite' })).writes).toEqual([
      { kind: 'source', format: 'parquet', paths: ['file:///out'], options: {} },
    ]);
    const password = new Secret('hunter2-touches');
    const sink: Cmd = {
      kind: 'write',
      input: src.rel,
      format: 'jdbc',
      mode: 'append',
      partitionBy: [],
      options: { url: 'jdbc:postgresql://db/x', password: { secret: password } },
    };
    const jdbc = cmdTouches(sink);
    expect(jdbc.writes).toMatchObject([{ kind: 'source', format: 'jdbc', paths: [] }]);
    expect(cmdTouches(testCommand('CREATE NAMESPACE x'))).toEqual({ reads: [], writes: [] });
  });
});
