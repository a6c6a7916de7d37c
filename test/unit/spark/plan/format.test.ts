import { describe, expect, it } from 'vitest';
import { Secret } from '../../../../src/core/secrets.js';
import { and, cast, col, desc, eq, eqNullSafe, fn, isIn, isNull, lit, not, over } from '../../../../src/spark/plan/expressions.js';
import { formatCmd, formatExpr, formatRel } from '../../../../src/spark/plan/format.js';
import { Query } from '../../../../src/spark/plan/query.js';

describe('readable plans', () => {
  it('prints expressions in SQL notation, literals typed and strings quoted', () => {
    expect(formatExpr(eq(col('_snapshot_date'), lit({ date: '2026-07-05' })))).toBe("(_snapshot_date = DATE '2026-07-05')");
    expect(formatExpr(and(isNull(col('s', 'id')), not(isIn(col('op'), [lit('d'), lit("it's")]))))).toBe("(s.id IS NULL AND NOT (op IN ('d', 'it\\'s')))");
    expect(formatExpr(cast(col('odd name'), 'bigint'))).toBe('CAST(`odd name` AS BIGINT)');
    expect(formatExpr(over(fn('row_number'), [col('id')], [desc(col('ts'))]))).toBe('row_number() OVER (PARTITION BY id ORDER BY ts DESC NULLS LAST)');
    expect(formatExpr(lit(12n))).toBe('12L');
    expect(formatExpr(lit(null))).toBe('NULL');
  });

  it('draws relations as an indented tree, inputs of a join with :- and +-', () => {
    const left = Query.read('parquet', { paths: ['file:///lake/acme/bronze/orders'] })
      .filter(eq(col('day'), lit('x')))
      .as('s');
    const right = Query.table(['lake', 'acme_silver', 'orders']).as('t');
    expect(formatRel(left.join(right, eqNullSafe(col('s', 'id'), col('t', 'id')), 'left').limit(5).rel)).toBe(
      [
        'Limit 5',
        '+- Join LEFT ON (s.id <=> t.id)',
        '   :- SubqueryAlias s',
        "   :  +- Filter (day = 'x')",
        '   :     +- Read parquet file:///lake/acme/bronze/orders',
        '   +- SubqueryAlias t',
        '      +- Table lake.acme_silver.orders',
      ].join('\n'),
    );
  });

  it('prints a MERGE with its clauses above its source', () => {
    const merge = Query.table(['lake', 'b', 'src'])
      .as('s')
      .mergeInto(['lake', 'acme_silver', 'orders'], eqNullSafe(col('orders', 'id'), col('s', 'id')), {
        whenMatched: [{ action: 'delete', condition: col('s', 'del') }, { action: 'updateAll' }],
        whenNotMatched: [{ action: 'insert', values: [['id', col('s', 'id')]] }],
      });
    expect(formatCmd(merge)).toBe(
      [
        'MergeInto lake.acme_silver.orders ON (orders.id <=> s.id)',
        ':  WHEN MATCHED AND s.del THEN DELETE',
        ':  WHEN MATCHED THEN UPDATE SET *',
        ':  WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)',
        '+- SubqueryAlias s',
        '   +- Table lake.b.src',
      ].join('\n'),
    );
  });

  it('never prints a secret, as an option or a literal', () => {
    const password = new Secret('hunter2-format-test');
    const read = Query.read('jdbc', { options: { url: 'jdbc:postgresql://db/x', password: { secret: password } } }).filter(
      eq(col('k'), lit({ secret: password })),
    );
    const text = formatCmd(read.writeFiles('file:///lake/acme/bronze/t', 'parquet', { mode: 'append' }));
    expect(text).not.toContain('hunter2-format-test');
    expect(text).toContain('password=[redacted]');
    expect(text).toContain('(k = [redacted])');
  });
});
