import { describe, expect, it } from 'vitest';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { parseExpression } from '../../../../src/core/expression/index.js';
import { configExpr } from '../../../../src/spark/plan/config-expression.js';
import { compileRelationPlan } from '../../../../src/spark/plan/compile.js';
import { col, eq, fn, gt, lit, over, desc } from '../../../../src/spark/plan/expressions.js';
import { Query } from '../../../../src/spark/plan/query.js';
import { configSubtrees, jdbcSources, wrapTenantLogic } from '../../../../src/spark/policy/index.js';
import { TenantLogicSchema } from '../../../../src/spark/proto/gen/lakehouse/jobs/plugins_pb.js';
import { testQuery } from '../../../support/sql.js';

const where = (text: string) => {
  const parsed = parseExpression(text);
  if (!parsed.ok) throw new Error(`bad test expression ${text}`);
  return configExpr({ text, ast: parsed.ast });
};
const bronze = Query.read('parquet', { paths: ['file:///lake/acme/bronze/orders_cdc'] });

describe('configSubtrees: what of a relation carries config logic', () => {
  it('is the topmost node holding a config expression, with everything below it', () => {
    const filtered = bronze.filter(where('amount > 10'));
    const resolved = filtered.withColumns([['rn', over(fn('row_number'), [col('id')], [desc(col('ts'))])]]).filter(eq(col('rn'), lit(1)));
    const plan = resolved.join(Query.table(['lake', 'acme_silver', 'orders']).as('t'), ['id']).aggregate([], [fn('count', lit(1))]);
    expect(configSubtrees(plan.rel)).toEqual([filtered.rel]);
    // A config expression wrapped in the template's own expressions is still found.
    const flagged = filtered.withColumns([['__delete', fn('coalesce', where("op = 'd'"), lit(false))]]);
    expect(configSubtrees(flagged.select('id').rel)).toEqual([flagged.rel]);
  });

  it('finds every such part of a join, and SQL text as config logic', () => {
    const a = bronze.filter(where('id > 0'));
    const b = testQuery('SELECT id FROM lake.acme_silver.orders');
    expect(configSubtrees(a.join(b, ['id']).rel)).toEqual([a.rel, b.rel]);
  });

  it('is the whole relation when no node is marked (logic put where it is not seen is analysed whole)', () => {
    // The same expression built by hand, not from config: nothing marks it.
    const rel = bronze.filter(gt(col('amount'), lit(10))).select('id').rel;
    expect(configSubtrees(rel)).toEqual([rel]);
  });
});

describe('wrapTenantLogic: the parts carrying config logic, as the server receives them', () => {
  it("wraps each part once, keeps the template's nodes around it, and leaves a wrapped part as it is", () => {
    const a = bronze.filter(where('id > 0'));
    const b = testQuery('SELECT id FROM lake.acme_silver.orders');
    const plan = a.join(b, ['id']).select('id').rel;
    const wrapped = wrapTenantLogic(plan, ['source.where']);
    expect(wrapped).toMatchObject({
      kind: 'project',
      input: { kind: 'join', left: { kind: 'tenantLogic', input: a.rel, configPaths: ['source.where'] }, right: { kind: 'tenantLogic', input: b.rel } },
    });
    expect(wrapTenantLogic(wrapped, ['source.where'])).toBe(wrapped);
  });

  it('compiles to the TenantLogic plugin relation: the relation, its config paths, the JDBC reads it declares', () => {
    const jdbc = Query.read('jdbc', { options: { url: 'jdbc:sqlite:shop.db', dbtable: 'orders' } }).filter(where('amount > 1'));
    expect(jdbcSources(jdbc.rel)).toBe(1);
    const plan = compileRelationPlan(wrapTenantLogic(jdbc.rel, ['source.where']), { reveal: true });
    const root = plan.opType.case === 'root' ? plan.opType.value : undefined;
    expect(root?.relType.case).toBe('extension');
    const any = root?.relType.case === 'extension' ? root.relType.value : undefined;
    expect(any?.typeUrl).toBe('type.googleapis.com/lakehouse.jobs.TenantLogic');
    const logic = anyUnpack(any!, TenantLogicSchema)!;
    expect(logic.configPaths).toEqual(['source.where']);
    expect(logic.jdbcSources).toBe(1);
    expect(logic.relation?.relType.case).toBe('filter');
  });
});
