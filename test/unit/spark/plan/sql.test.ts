import { describe, expect, it } from 'vitest';
import { parseInstant } from '../../../../src/core/instant.js';
import { cmdTouches, relTouches } from '../../../../src/spark/plan/touches.js';
import { Query, sqlCommand } from '../../../../src/spark/plan/query.js';
import { type SqlHole, sql } from '../../../../src/spark/plan/sql.js';

describe('the sql tag', () => {
  it('quotes identifiers and names, and writes typed literals', () => {
    const t = sql`SELECT ${sql.id('we`ird')}, ${sql.value("it's \\ here")}, ${sql.value(42)}, ${sql.value(true)}, ${sql.value({ date: '2026-07-05' })}, ${sql.value({ timestamp: parseInstant('2026-07-05T06:00:00.1001Z')! })} FROM ${sql.table(['lake', 'acme_silver', 'orders'])}`;
    expect(t.text).toBe(
      "SELECT `we``ird`, 'it\\'s \\\\ here', 42, true, DATE '2026-07-05', TIMESTAMP '2026-07-05T06:00:00.100100Z' FROM `lake`.`acme_silver`.`orders`",
    );
  });

  it('a string cannot become syntax: a bare string is no hole, and a value stays a literal', () => {
    const hostile = "x'; DROP TABLE t; --";
    expect(() => sql`SELECT ${hostile as unknown as SqlHole}`).toThrow(TypeError);
    // @ts-expect-error a string is not a hole
    expect(() => sql`SELECT ${'1'}`).toThrow(TypeError);
    expect(sql`SELECT ${sql.value(hostile)}`.text).toBe("SELECT 'x\\'; DROP TABLE t; --'");
    expect(() => sql.value(1.5)).not.toThrow();
    expect(() => sql`LIMIT ${sql.value(1.5)}`).toThrow(/not a whole number/);
    expect(() => sql`${sql.value({ date: "2026-07-05' OR '1" })}`).toThrow(/not a date/);
    expect(() => sql.sparkType('int) ; DROP TABLE t --')).toThrow(/not a Spark type/);
    expect(sql.sparkType('struct<`a b`:decimal(12,2),c:array<string>>').text).toBe('struct<`a b`:decimal(12,2),c:array<string>>');
  });

  it('carries the tables it names, through joins, nesting and quoted arguments', () => {
    const refs = sql.join(
      ['silver', 'tombstones'].map((t) => sql`SELECT 1 FROM ${sql.table(['lake', 'acme_silver', t, 'refs'])}`),
      sql` UNION ALL `,
    );
    expect(refs.reads).toEqual([
      ['lake', 'acme_silver', 'silver', 'refs'],
      ['lake', 'acme_silver', 'tombstones', 'refs'],
    ]);
    const del = sql`DELETE FROM ${sql.target(['lake', 'acme_silver', 'orders__cdc_tombstones'])} WHERE ${sql.id('_cdc_deleted_at')} < now()`;
    expect(del).toMatchObject({ reads: [], writes: [['lake', 'acme_silver', 'orders__cdc_tombstones']] });
    const call = sql`CALL ${sql.qualified(['lake', 'system', 'expire_snapshots'])}(table => ${sql.touching(sql.quoted(sql`${sql.qualified(['acme_silver', 'orders'])}`), { writes: [['lake', 'acme_silver', 'orders']] })})`;
    expect(call.text).toBe("CALL `lake`.`system`.`expire_snapshots`(table => '`acme_silver`.`orders`')");
    expect(call.writes).toEqual([['lake', 'acme_silver', 'orders']]);
    expect(Object.isFrozen(call) && Object.isFrozen(call.writes)).toBe(true);
  });

  it('what a SQL relation or command names is what plan, validate and lineage see it touch', () => {
    expect(relTouches(Query.sql(sql`DESCRIBE HISTORY ${sql.table(['spark_catalog', 'acme_silver', 'orders'])}`).rel)).toEqual([
      { kind: 'table', parts: ['spark_catalog', 'acme_silver', 'orders'] },
    ]);
    expect(cmdTouches(sqlCommand(sql`VACUUM ${sql.target(['spark_catalog', 'acme_silver', 'orders'])} RETAIN ${sql.value(168)} HOURS`))).toEqual({
      reads: [],
      writes: [{ kind: 'table', parts: ['spark_catalog', 'acme_silver', 'orders'] }],
    });
    expect(cmdTouches(sqlCommand(sql`CREATE NAMESPACE IF NOT EXISTS ${sql.qualified(['lake', 'acme_silver'])}`))).toEqual({ reads: [], writes: [] });
  });
});
