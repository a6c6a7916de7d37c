-- The platform's DDL for configs/examples/iceberg-zero-copy-append.v1.conf (a tenant cannot run DDL):
-- the table to retire, lake.acme_silver.orders_2025, with two rows, and the empty history table it
-- is appended to, both at the tenant's layout locations, the second made from the first (so their
-- schemas agree by field id and their partition specs match). Safe to rerun: a table that exists is
-- left as it is, and no statement writes to it (a retired source takes no more writes).
--   scripts/spark-sql --file configs/examples/iceberg-zero-copy-append.setup.sql
CREATE NAMESPACE IF NOT EXISTS lake.acme_silver;
CREATE TABLE IF NOT EXISTS lake.acme_silver.orders_2025 USING iceberg
  LOCATION 'file://${LAKEHOUSE_LAKE_HOME}/acme/silver/orders_2025' TBLPROPERTIES ('format-version' = '2')
  AS SELECT * FROM VALUES (CAST(1 AS BIGINT), 'PAID'), (CAST(2 AS BIGINT), 'SHIPPED') AS v(id, status);
CREATE TABLE IF NOT EXISTS lake.acme_silver.orders_history USING iceberg
  LOCATION 'file://${LAKEHOUSE_LAKE_HOME}/acme/silver/orders_history' TBLPROPERTIES ('format-version' = '2')
  AS SELECT * FROM lake.acme_silver.orders_2025 WHERE false;
