// Queries, parameters, AnalyzePlan and Config against the real Spark Connect server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rows } from '../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { connect, sql } from './support.js';
import { needs } from '../../support/needs.js';

needs('spark');

let client: SparkConnectClient;
beforeAll(async () => {
  client = connect({ userAgent: 'lakehouse-jobs-it' });
  // Timestamp literals below are read in the session time zone.
  await client.config.set({ 'spark.sql.session.timeZone': 'UTC' });
});
afterAll(async () => {
  await client.releaseSession();
  client.close();
});

describe('SQL round trip through Arrow', () => {
  it('decodes every common type exactly', async () => {
    const result = await client.execute(
      sql(`SELECT
        CAST(42 AS INT) AS i,
        CAST(9007199254740993 AS BIGINT) AS b,
        CAST(1.5 AS DOUBLE) AS d,
        CAST('1234567890123456789012345678.0123456789' AS DECIMAL(38,10)) AS dec38,
        CAST(-12.5 AS DECIMAL(12,2)) AS dec12,
        'grüße ✓ 日本 🚀' AS s,
        DATE'2024-02-29' AS dt,
        TIMESTAMP'2024-01-02 03:04:05.123456' AS ts,
        TIMESTAMP_NTZ'2024-01-02 03:04:05.123456' AS tn,
        true AS bo,
        X'00FF10' AS bin,
        CAST(NULL AS STRING) AS nul,
        array(1, NULL, 3) AS arr,
        named_struct('a', 1, 'b', 'x', 'c', named_struct('d', DATE'1969-12-31')) AS st,
        map('k', 1.5D, 'l', NULL) AS m`),
    );
    expect(result.rowCount).toBe(1);
    expect(result.schema?.kind.case).toBe('struct');
    expect(rows(result.table!)).toEqual([
      {
        i: 42,
        b: 9007199254740993n,
        d: 1.5,
        dec38: '1234567890123456789012345678.0123456789',
        dec12: '-12.50',
        s: 'grüße ✓ 日本 🚀',
        dt: '2024-02-29',
        ts: '2024-01-02T03:04:05.123456Z',
        tn: '2024-01-02T03:04:05.123456',
        bo: true,
        bin: new Uint8Array([0, 255, 16]),
        nul: null,
        arr: [1, null, 3],
        st: { a: 1, b: 'x', c: { d: '1969-12-31' } },
        m: { k: 1.5, l: null },
      },
    ]);
  });

  it('keeps nulls in every column and many rows in order', async () => {
    const result = await client.execute(sql(`SELECT * FROM VALUES (1, NULL, NULL), (NULL, 'x', CAST(0.10 AS DECIMAL(12,2))) AS t(a, b, c)`));
    expect(rows(result.table!)).toEqual([
      { a: 1, b: null, c: null },
      { a: null, b: 'x', c: '0.10' },
    ]);
    const many = await client.execute(sql('SELECT id FROM range(0, 250000)'));
    expect(many.rowCount).toBe(250000);
    const ids = many.table!.getChild('id')!.toArray() as BigInt64Array;
    expect(ids[0]).toBe(0n);
    expect(ids[249999]).toBe(249999n);
  });

  it('returns an empty table with its schema', async () => {
    const result = await client.execute(sql('SELECT id, CAST(id AS STRING) AS s FROM range(0, 10) WHERE id < 0'));
    expect(result.rowCount).toBe(0);
    expect(result.table?.schema.fields.map((f) => f.name)).toEqual(['id', 's']);
  });

  it('runs DDL and DML as eager commands', async () => {
    await client.execute(sql('CREATE OR REPLACE TEMP VIEW lakehouse_it_view AS SELECT id FROM range(0, 3)'));
    const result = await client.execute(sql('SELECT sum(id) AS total FROM lakehouse_it_view'));
    expect(rows(result.table!)).toEqual([{ total: 3n }]);
    const shown = await client.execute(sql("SHOW VIEWS LIKE 'lakehouse_it_view'"));
    expect(shown.sqlCommandResult ?? shown.table).toBeDefined();
  });

  it('streams batches of a large result without collecting them', async () => {
    const stream = client.executeStream(sql('SELECT id, repeat("x", 50) AS pad FROM range(0, 300000)'));
    let n = 0;
    let batches = 0;
    for await (const batch of stream) {
      n += batch.numRows;
      batches++;
    }
    expect(n).toBe(300000);
    expect(batches).toBeGreaterThan(1);
    expect(stream.summary).toMatchObject({ rowCount: 300000, complete: true });
  });
});

describe('AnalyzePlan', () => {
  it('reports the server version', async () => {
    expect(await client.analyze.sparkVersion()).toBe('4.1.4');
  });

  it('gives the schema of a plan without running it', async () => {
    const schema = await client.analyze.schema(sql('SELECT CAST(1 AS DECIMAL(12,2)) AS amount, "x" AS s, current_timestamp() AS at'));
    expect(schema.kind.case).toBe('struct');
    const fields = schema.kind.case === 'struct' ? schema.kind.value.fields : [];
    expect(fields.map((f) => [f.name, f.dataType?.kind.case])).toEqual([
      ['amount', 'decimal'],
      ['s', 'string'],
      ['at', 'timestamp'],
    ]);
    const dec = fields[0]?.dataType?.kind;
    expect(dec?.case === 'decimal' ? [dec.value.precision, dec.value.scale] : []).toEqual([12, 2]);
  });

  it('explains a plan', async () => {
    const text = await client.analyze.explain(sql('SELECT id FROM range(0, 10) WHERE id > 5'), 'extended');
    expect(text).toMatch(/Physical Plan/);
    expect(text).toMatch(/Range/);
  });

  it('parses DDL', async () => {
    const t = await client.analyze.ddlParse('id BIGINT, amount DECIMAL(38,10)');
    expect(t.kind.case).toBe('struct');
  });
});

describe('Config', () => {
  it('sets, reads and unsets session values', async () => {
    const warnings = await client.config.set({ 'spark.lakehouse.it.key': 'v1', 'spark.sql.shuffle.partitions': '3' });
    expect(warnings).toEqual([]);
    expect(await client.config.get(['spark.lakehouse.it.key', 'spark.sql.shuffle.partitions'])).toEqual({
      'spark.lakehouse.it.key': 'v1',
      'spark.sql.shuffle.partitions': '3',
    });
    expect(await client.config.getAll('spark.lakehouse.it.')).toEqual({ 'spark.lakehouse.it.key': 'v1' });
    await client.config.unset(['spark.lakehouse.it.key']);
    expect(await client.config.getOption(['spark.lakehouse.it.key'])).toEqual({ 'spark.lakehouse.it.key': undefined });
  });

  it('keeps one server-side session for the client', async () => {
    await client.analyze.sparkVersion();
    expect(client.serverSideSessionId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
