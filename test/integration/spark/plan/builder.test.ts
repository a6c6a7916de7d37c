import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseInstant } from '../../../../src/core/instant.js';
import { rows } from '../../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../../src/spark/client.js';
import type { Cmd } from '../../../../src/spark/plan/commands.js';
import { compileCommandPlan, compileRelationPlan } from '../../../../src/spark/plan/compile.js';
import { alias, and, asc, col, desc, eq, eqNullSafe, fn, gt, isIn, isNull, lit, not, or, over, star } from '../../../../src/spark/plan/expressions.js';
import { Query } from '../../../../src/spark/plan/query.js';
import { connect, freshTenant, readIcebergWithPyIceberg } from '../../../support/stack.js';
import { testQuery, testCommand } from '../../../support/sql.js';
import { needs } from '../../../support/needs.js';

needs('spark', 'py-tools');

/**
 * Every relation and command of the plan builder, compiled by our compiler and run by the real
 * server; results compared with what Spark SQL itself says they must be.
 */
let client: SparkConnectClient;
const tenant = freshTenant();
const ns = `${tenant.id}_silver`;

const people = testQuery(
  `SELECT * FROM VALUES (1, 'ann', 'x', 10), (2, 'bob', 'y', 20), (3, 'cy', 'x', 30), (3, 'cy', 'x', 30), (4, NULL, NULL, 40) AS t(id, name, grp, score)`,
);

async function collect(q: Query) {
  const r = await client.execute(compileRelationPlan(q.rel, { reveal: true }));
  return r.table ? rows(r.table, { int64: 'number' }) : [];
}
async function run(cmd: Cmd) {
  return client.execute(compileCommandPlan(cmd, { reveal: true }));
}

beforeAll(() => {
  client = connect();
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe('plan builder on the real server', () => {
  it('filters, projects, adds columns, drops, sorts and limits', async () => {
    const q = people
      .filter(and(gt(col('score'), lit(10)), or(isNull(col('grp')), not(eq(col('grp'), lit('y'))))))
      .withColumns({ doubled: fn('*', col('score'), lit(2)), tag: lit('t') })
      .drop('grp')
      .select('id', 'name', 'doubled', alias(fn('upper', col('tag')), 'tag'))
      .sort(desc(col('id')), asc(col('name')))
      .limit(3);
    expect(await collect(q)).toEqual([
      { id: 4, name: null, doubled: 80, tag: 'T' },
      { id: 3, name: 'cy', doubled: 60, tag: 'T' },
      { id: 3, name: 'cy', doubled: 60, tag: 'T' },
    ]);
  });

  it('deduplicates whole rows and by columns', async () => {
    expect(await collect(people.deduplicate().aggregate([], [alias(fn('count', lit(1)), 'n')]))).toEqual([{ n: 4 }]);
    expect(await collect(people.deduplicate(['grp']).aggregate([], [alias(fn('count', lit(1)), 'n')]))).toEqual([{ n: 3 }]);
  });

  it('aggregates by group and ranks with a window', async () => {
    const agg = people.aggregate([col('grp')], [alias(fn('sum', col('score')), 'total'), alias(fn('count', lit(1)), 'n')]).sort(asc(col('grp')));
    expect(await collect(agg)).toEqual([
      { grp: null, total: 40, n: 1 },
      { grp: 'x', total: 70, n: 3 },
      { grp: 'y', total: 20, n: 1 },
    ]);
    const ranked = people
      .withColumns({ rn: over(fn('row_number'), [col('grp')], [desc(col('score')), asc(col('id'))]) })
      .filter(fn('==', col('rn'), lit(1)))
      .select('id')
      .sort(asc(col('id')));
    expect(await collect(ranked)).toEqual([{ id: 2 }, { id: 3 }, { id: 4 }]);
  });

  it('joins with null-safe conditions, using-columns and anti joins', async () => {
    const other = testQuery(`SELECT * FROM VALUES ('x', 'ex'), (NULL, 'nothing') AS o(grp, label)`);
    const nullSafe = people
      .as('p')
      .join(other.as('o'), eqNullSafe(col('p', 'grp'), col('o', 'grp')), 'inner')
      .select(col('p', 'id'), col('o', 'label'))
      .sort(asc(col('id')));
    expect(await collect(nullSafe)).toEqual([
      { id: 1, label: 'ex' },
      { id: 3, label: 'ex' },
      { id: 3, label: 'ex' },
      { id: 4, label: 'nothing' },
    ]);
    expect(await collect(people.join(other, ['grp'], 'left_anti').select('id'))).toEqual([{ id: 2 }, { id: 4 }]);
  });

  it('sends literals of every kind as values (an instant to the microsecond)', async () => {
    const q = testQuery('SELECT 1 AS one').select(
      alias(lit("it's; DROP"), 's'),
      alias(lit(2 ** 40), 'big'),
      alias(lit(1.5), 'dbl'),
      alias(lit({ decimal: '12345.67', precision: 12, scale: 2 }), 'dec'),
      alias(lit({ date: '2026-07-05' }), 'd'),
      alias(lit({ timestamp: parseInstant('2026-07-05T01:02:03.456789Z')! }), 'ts'),
      alias(lit(null), 'nothing'),
      alias(isIn(lit('d'), [lit('c'), lit('d')]), 'found'),
    );
    expect(await collect(q)).toEqual([
      { s: "it's; DROP", big: 2 ** 40, dbl: 1.5, dec: '12345.67', d: '2026-07-05', ts: '2026-07-05T01:02:03.456789Z', nothing: null, found: true },
    ]);
  });

  it('reads and writes files, creates Iceberg tables with a location, merges and creates views', async () => {
    const path = `${tenant.root}/bronze/people`;
    await run(people.writeFiles(path, 'parquet', { mode: 'overwrite', partitionBy: ['grp'] }));
    expect(await collect(Query.read('parquet', { paths: [path] }).aggregate([], [alias(fn('count', lit(1)), 'n')]))).toEqual([{ n: 5 }]);

    await run(testCommand(`CREATE NAMESPACE IF NOT EXISTS lake.${ns}`));
    const table = ['lake', ns, 'people'];
    await run(
      people
        .deduplicate()
        .filter(fn('isnotnull', col('name')))
        .writeTo(table, 'create', { provider: 'iceberg', properties: { location: `${tenant.root}/silver/people` } }),
    );
    await run(
      testQuery(`SELECT * FROM VALUES (2, 'bob', 'z', 21), (5, 'dee', 'x', 50) AS t(id, name, grp, score)`)
        .as('s')
        .mergeInto(table, eqNullSafe(col('people', 'id'), col('s', 'id')), {
          whenMatched: [
            {
              action: 'update',
              set: [
                ['score', col('s', 'score')],
                ['grp', col('s', 'grp')],
              ],
            },
          ],
          whenNotMatched: [{ action: 'insertAll' }],
        }),
    );
    await run(
      Query.table(table)
        .filter(gt(col('score'), lit(20)))
        .createView('high_scores'),
    );
    expect(
      await collect(
        Query.table(['high_scores'])
          .select('id')
          .sort(asc(col('id'))),
      ),
    ).toEqual([{ id: 2 }, { id: 3 }, { id: 5 }]);

    // A second engine agrees, and the table sits under the tenant's storage root.
    const read = readIcebergWithPyIceberg(ns, 'people').sort((a, b) => Number(a.id) - Number(b.id));
    expect(read).toEqual([
      { id: 1, name: 'ann', grp: 'x', score: 10 },
      { id: 2, name: 'bob', grp: 'z', score: 21 },
      { id: 3, name: 'cy', grp: 'x', score: 30 },
      { id: 5, name: 'dee', grp: 'x', score: 50 },
    ]);
    const location = await collect(testQuery(`SELECT file_path FROM lake.${ns}.people.files LIMIT 1`));
    expect(String(location[0]?.file_path)).toContain(`${tenant.root.replace('file://', '')}/silver/people/`);
  });

  it('appends with WriteOperationV2 and counts with star', async () => {
    const table = ['lake', ns, 'people'];
    await run(testQuery(`SELECT 6 AS id, 'eve' AS name, 'y' AS grp, 60 AS score`).writeTo(table, 'append'));
    expect(await collect(Query.table(table).aggregate([], [alias(fn('count', star()), 'n')]))).toEqual([{ n: 5 }]);
  });
});
