import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { freshTenant, readIcebergWithPyIceberg, useClient } from '../../support/stack.js';
import { load, readDimension, silverTable } from './scd2-support.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * Source data whose column names are a template's own: the data is not trusted for shape, and a
 * source column named like a column the template adds or uses internally must be refused (65, at
 * the config path of the source) before anything is written, never change what the load means; a
 * config column of such a name is refused at validate (78, at its path). Each case was observed on
 * the server before the fix (the comments say what happened).
 */
const TIMEOUT = 600_000;

/** Whether anything was written to the tenant's gold layer (a table's directory). */
const goldWritten = (tenant: { root: string }) => existsSync(fileURLToPath(`${tenant.root}/gold`));

let client: SparkConnectClient;
useClient((c) => (client = c));

describe('scd2-dim-load: a source column named like the template’s own', () => {
  const config = (tenant: { id: string; root: string }, at: string) => `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customers" }
dimension { natural-key = ["id"], effective-at = "${at}" }
target    { table = "dim_customers" }`;

  // Before: __scd_ctrl (replaced in place by the plan's control field) failed the load with 70 and
  // Spark's analysed plan as the message, after creating the dimension without the column; a
  // history column's name failed with 70 (COLUMN_ALREADY_EXISTS) after creating the namespace.
  it.each(['__scd_ctrl', '_scd_current', '_SCD_Deleted', '_dim_key', '__SCD_p'])(
    '%s in the source is refused (65 at source.table) before anything is written',
    async (column) => {
      const tenant = freshTenant();
      await silverTable(client, tenant, 'iceberg', 'customers', `SELECT * FROM VALUES (1, 'x', 'gold'), (2, 'y', 'silver') AS t(id, ${column}, tier)`);
      const r = await load(client, tenant, config(tenant, '2026-07-01T00:00:00Z'));
      expect(r.code).toBe(65);
      expect(r.message).toContain(`source.table: lake.${tenant.id}_silver.customers has column(s) "${column}" named like scd2-dim-load's own columns`);
      expect(r.message).not.toMatch(/Project|LogicalRDD/);
      expect(goldWritten(tenant)).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'a source without such a column loads (the check reads no row)',
    async () => {
      const tenant = freshTenant();
      await silverTable(client, tenant, 'iceberg', 'customers', `SELECT * FROM VALUES (1, 'x', 'gold') AS t(id, _scd_note, tier)`);
      expect(await load(client, tenant, config(tenant, '2026-07-01T00:00:00Z'))).toMatchObject({ code: 0, outputs: [{ committed: true }] });
      expect(readDimension(tenant, 'iceberg', 'dim_customers').map((r) => [r.id, r._scd_note, r.tier])).toEqual([[1, 'x', 'gold']]);
    },
    TIMEOUT,
  );
});

describe('cdc-silver-merge: a bronze column named like the template’s own', () => {
  const config = (tenant: { id: string; root: string }) => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = ["seq"], op-column = "op" }
target { table = "orders" }`;

  async function bronze(tenant: { root: string }, select: string) {
    const q = testQuery(
      `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'2026-08-01' AS _snapshot_date FROM (${select})`,
    );
    await client.execute(
      compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
    );
  }

  // Before: __lake_delete and __LAKE_Key_Events were replaced by the plan's own columns and vanished
  // from silver (exit 0, the tenant's column gone); __lake_after_tombstone failed with 70
  // (AMBIGUOUS_REFERENCE) after the tombstones were recorded.
  it.each(['__lake_delete', '__lake_after_tombstone', '__LAKE_Key_Events'])(
    '%s in bronze is refused (65 at source.table) before anything is written',
    async (column) => {
      const tenant = freshTenant();
      await bronze(tenant, `SELECT * FROM VALUES (1, 1, 'c', 10, false), (2, 1, 'c', 20, true), (2, 2, 'd', 20, true) AS t(id, seq, op, v, ${column})`);
      const r = await load(client, tenant, config(tenant));
      expect(r.code).toBe(65);
      expect(r.message).toContain(`source.table: ${tenant.root}/bronze/orders_cdc has column(s) "${column}" named like cdc-silver-merge's own columns`);
      expect(existsSync(fileURLToPath(`${tenant.root}/silver`))).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'a bronze column that only looks alike (__deleted, _lake_note) reaches silver',
    async () => {
      const tenant = freshTenant();
      await bronze(tenant, `SELECT * FROM VALUES (1, 1, 'c', 10, 'false', 'n') AS t(id, seq, op, v, __deleted, _lake_note)`);
      expect(await load(client, tenant, config(tenant))).toMatchObject({ code: 0, outputs: [{ committed: true, metrics: { inserted: 1 } }] });
      expect(readIcebergWithPyIceberg(`${tenant.id}_silver`, 'orders')).toEqual([{ id: 1, seq: 1, v: 10, __deleted: 'false', _lake_note: 'n' }]);
    },
    TIMEOUT,
  );

  // Before: a key or sequence column named _cdc_deleted_at or _LAKE_RUN_ID (the tombstone table's own
  // columns) failed with 70 (COLUMN_ALREADY_EXISTS) after silver had been created.
  it.each([
    ['cdc.primary-key[0]', 'primary-key = ["_cdc_deleted_at"], sequence-by = ["seq"]', 'id'],
    ['cdc.sequence-by', 'primary-key = ["id"], sequence-by = ["_LAKE_RUN_ID"]', 'seq'],
    ['cdc.sequence-by', 'primary-key = ["id"], sequence-by = ["__lake_rn"]', 'seq'],
  ])(
    'a CDC column named like a tombstone or internal column is refused at %s (78) before anything is written',
    async (path, cdc, renamed) => {
      const tenant = freshTenant();
      const column = /"(_cdc_deleted_at|_LAKE_RUN_ID|__lake_rn)"/.exec(cdc)![1]!;
      const cols = ['id', 'seq', 'op', 'v'].map((c) => (c === renamed ? column : c));
      await bronze(tenant, `SELECT * FROM VALUES (1, 1, 'c', 10), (2, 1, 'c', 20), (2, 2, 'd', 20) AS t(${cols.join(', ')})`);
      const r = await load(client, tenant, config(tenant).replace('primary-key = ["id"], sequence-by = ["seq"]', cdc));
      expect(r.code).toBe(78);
      expect(r.message).toContain(`${path}: "${column}"`);
      expect(existsSync(fileURLToPath(`${tenant.root}/silver`))).toBe(false);
    },
    TIMEOUT,
  );
});

describe('gold-publish: a result column named like the template’s own', () => {
  const config = (tenant: { id: string; root: string }, mode: string) => `
job       { template = "gold-publish", schema-version = 1 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "SELECT * FROM silver.items" }
target    { table = "items", catalog = "lake", grain = ["id"], mode = ${mode} }
expectations = [{ name = "positive", type = expression, expr = "v > 0", action = drop }]`;

  // Before: __lake_drop and __Lake_Hash were replaced by the plan's own columns: the gold table got
  // the column, every row NULL in it (exit 0, the values lost); __lake_old_hash failed a merge with 70.
  it.each([
    ['__lake_drop', 'full-refresh'],
    ['__Lake_Hash', 'full-refresh'],
    ['__lake_old_hash', 'merge'],
  ])(
    '%s in the result (%s) is refused (65 at transform.sql) before anything is written',
    async (column, mode) => {
      const tenant = freshTenant();
      await silverTable(client, tenant, 'iceberg', 'items', `SELECT * FROM VALUES (1, 5, true), (2, -1, false) AS t(id, v, ${column})`);
      const r = await load(client, tenant, config(tenant, mode));
      expect(r.code).toBe(65);
      expect(r.message).toContain(`transform.sql: the transform's result has column(s) "${column}" named like gold-publish's own columns`);
      expect(goldWritten(tenant)).toBe(false);
    },
    TIMEOUT,
  );
});

describe('dv-satellite: a payload column named like the plan’s internal ones', () => {
  const config = (tenant: { id: string; root: string }, payload: string) => `
job       { template = "dv-satellite", schema-version = 1 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "orders", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["status", "${payload}"] }
target    { table = "sat_order", catalog = "lake", format = iceberg }`;

  // Before: __lake_prev was replaced by the plan's previous hashdiff and stored NULL for every row
  // (exit 0, the payload's values lost); __LAKE_latest_hashdiff failed with 70 (AMBIGUOUS_REFERENCE).
  it.each(['__lake_prev', '__LAKE_latest_hashdiff'])(
    '%s as satellite.payload is refused (78 at its path) before Spark is called',
    async (column) => {
      const tenant = freshTenant();
      const q = testQuery(
        `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'2026-09-01' AS _snapshot_date FROM VALUES (1, 'new', 'p1'), (2, 'paid', 'p2') AS t(id, status, ${column})`,
      );
      await client.execute(
        compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
      );
      const r = await load(client, tenant, config(tenant, column), { logicalDate: '2026-09-01' });
      expect(r.code).toBe(78);
      expect(r.message).toContain(`satellite.payload[1]: "${column}" is a column the template writes or uses itself`);
      expect(existsSync(fileURLToPath(`${tenant.root}/silver`))).toBe(false);
    },
    TIMEOUT,
  );
});

describe('a column the config names that the source lacks: 78 at its path, "did you mean" from the source, nothing written', () => {
  // Before: a CDC key column missing from bronze was a 65 whose message was a 3 KB analyser dump
  // naming the plan's internal columns, blamed on no config path.
  it(
    'cdc-silver-merge: a misspelt key and sequence column',
    async () => {
      const tenant = freshTenant();
      await client.execute(
        compileCommandPlan(
          testQuery(
            `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'2026-08-01' AS _snapshot_date FROM VALUES (1, 1, 'c') AS t(order_id, seq, op)`,
          ).writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }),
          { reveal: true },
        ),
      );
      const r = await load(
        client,
        tenant,
        `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["orderid"], sequence-by = ["sequence"], op-column = "op" }
target { table = "orders" }`,
      );
      expect(r.code).toBe(78);
      expect(r.message).toBe(
        `cdc.primary-key[0]: column "orderid" is not a column of ${tenant.root}/bronze/orders_cdc; did you mean "order_id"?; cdc.sequence-by: column "sequence" is not a column of ${tenant.root}/bronze/orders_cdc`,
      );
      expect(existsSync(fileURLToPath(`${tenant.root}/silver`))).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'gold-publish: a grain column the result lacks',
    async () => {
      const tenant = freshTenant();
      await silverTable(client, tenant, 'iceberg', 'items', `SELECT * FROM VALUES (1, 5) AS t(item_id, v)`);
      const r = await load(
        client,
        tenant,
        `
job       { template = "gold-publish", schema-version = 1 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = "SELECT item_id, v FROM silver.items" }
target    { table = "items", catalog = "lake", grain = ["itemid"], mode = merge }`,
      );
      expect(r.code).toBe(78);
      expect(r.message).toBe(`target.grain[0]: column "itemid" is not a column of the transform's result; did you mean "item_id"?`);
      expect(goldWritten(tenant)).toBe(false);
    },
    TIMEOUT,
  );
});
