import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import {
  deltaLastCommit,
  freshTenant,
  icebergSnapshotSummary,
  readDeltaTablesWithDeltaRs,
  readIcebergTablesWithPyIceberg,
  useClient,
} from '../../support/stack.js';
import { type Outcome, runInProcess } from '../../support/in-process.js';
import { tempFiles } from '../../support/files.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * The raw vault loaders with `source.read = incremental` on an Iceberg and a Delta silver source:
 * a hub, a link and a satellite each read only the source commits since the position their table
 * recorded (`candidates` counts the new commits' rows, not the whole source), insert what they lack
 * (the satellite: what differs from a key's latest hashdiff), and record the position in the same
 * commit as the insert (or alone, when nothing is new for them). Read back by PyIceberg or delta-rs.
 */
const RUNS_TIMEOUT = 900_000;

let client: SparkConnectClient;
useClient((c) => (client = c));

const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));
async function sparkRows(text: string): Promise<Record<string, unknown>[]> {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? arrowRows(r.table) : [];
}

describe.each(['iceberg', 'delta'] as const)('the raw vault, source.read = incremental, %s', (format) => {
  const tenant = freshTenant();
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const SOURCE = `${catalog}.${tenant.id}_silver.orders`;
  const key = `read.${SOURCE}`;
  let dir: string;
  const head = (template: string) =>
    `job { template = "${template}", schema-version = 1, name = "it-vault-inc" }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;
  const source = `table = "orders", layer = silver, catalog = "${catalog}", record-source = "shop.orders", read = incremental`;
  const target = (table: string) => `target { table = "${table}", catalog = "${catalog}" }`;
  const configs = {
    'hub.conf': `${head('dv-hub')}sources = [ { ${source}, business-key = ["customer"] } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
${target('hub_customer')}`,
    'link.conf': `${head('dv-link')}source { ${source} }
link {
  hash-key = "lhk_order_customer"
  hubs = [ { hash-key = "hk_order", business-key = ["id"] }, { hash-key = "hk_customer", business-key = ["customer"] } ]
}
${target('link_order_customer')}`,
    'sat.conf': `${head('dv-satellite')}source { ${source} }
satellite { parent-hash-key = "hk_customer", business-key = ["customer"], payload = ["tier"], order-by = ["ts"] }
${target('sat_customer')}`,
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  };
  const run = (conf: keyof typeof configs, logicalDate: string): Promise<Outcome> =>
    runInProcess({ configFile: join(dir, conf), envFile: join(dir, 'platform.conf'), overrides: [], env: {}, logicalDate });
  const out = (o: Outcome, table: string) => o.report.outputs.find((x) => x.table === `${catalog}.${tenant.id}_silver.${table}`);
  const insert = (...rows: [id: number, customer: string, tier: string, ts: number][]) =>
    sql(`INSERT INTO ${SOURCE} VALUES ${rows.map(([id, c, t, ts]) => `(${id}, '${c}', '${t}', ${ts})`).join(', ')}`);
  const sourceHead = async () => {
    const q = format === 'iceberg' ? `SELECT CAST(snapshot_id AS STRING) AS v FROM ${SOURCE}.refs WHERE name = 'main'` : `DESCRIBE HISTORY ${SOURCE} LIMIT 1`;
    const [row] = await sparkRows(q);
    return String(row!.v ?? row!.version);
  };
  const position = (table: string) =>
    format === 'iceberg'
      ? icebergSnapshotSummary(`${tenant.id}_silver`, table)[`lakehouse-jobs.${key}`]
      : (JSON.parse(String(deltaLastCommit(`${tenant.root}/silver/${table}`).userMetadata)) as { 'lakehouse-jobs': Record<string, string> })['lakehouse-jobs'][
          key
        ];
  const TABLES = ['hub_customer', 'link_order_customer', 'sat_customer'];
  function vault(): Record<string, Record<string, unknown>[]> {
    if (format === 'iceberg') return readIcebergTablesWithPyIceberg(`${tenant.id}_silver`, TABLES);
    const paths = TABLES.map((t) => `${tenant.root}/silver/${t}`);
    const rows = readDeltaTablesWithDeltaRs(paths);
    return Object.fromEntries(TABLES.map((t, i) => [t, rows[paths[i]!]!]));
  }

  beforeAll(async () => {
    dir = tempFiles(configs);
    await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${tenant.id}_silver`);
    await sql(
      `CREATE TABLE ${SOURCE} (id INT, customer STRING, tier STRING, ts INT) USING ${format} LOCATION '${tenant.root}/silver/orders' TBLPROPERTIES (${format === 'iceberg' ? `'format-version' = '2'` : `'delta.enableChangeDataFeed' = 'true'`})`,
    );
  });

  it(
    'a first load reads everything; a later one reads only the new commits and inserts what the vault lacks; nothing new is 99; a batch with nothing to insert records its position alone',
    async () => {
      await insert([1, 'alice', 'gold', 1], [2, 'bob', 'silver', 1]);
      const s1 = await sourceHead();
      for (const [conf, table] of [
        ['hub.conf', 'hub_customer'],
        ['link.conf', 'link_order_customer'],
        ['sat.conf', 'sat_customer'],
      ] as const) {
        const o = await run(conf, '2026-07-01T00:00:00Z');
        expect(o.code, o.error?.message).toBe(0);
        expect(out(o, table)).toMatchObject({ read: { source: SOURCE, mode: 'full', to: s1, reason: 'first run' }, metrics: { candidates: 2, inserted: 2 } });
        expect(position(table)).toBe(s1);
      }
      expect((await run('hub.conf', '2026-07-01T01:00:00Z')).report.skipped).toMatch(/^nothing new in/);

      // The new commit: alice again (same tier), carol (new), bob (new tier).
      await insert([3, 'alice', 'gold', 2], [4, 'carol', 'bronze', 2], [5, 'bob', 'platinum', 2]);
      const s2 = await sourceHead();
      const hub = await run('hub.conf', '2026-07-02T00:00:00Z');
      expect(hub.code, hub.error?.message).toBe(0);
      expect(out(hub, 'hub_customer')).toMatchObject({ read: { mode: 'incremental', from: s1, to: s2 }, metrics: { candidates: 3, inserted: 1 } });
      const link = await run('link.conf', '2026-07-02T00:00:00Z');
      expect(out(link, 'link_order_customer')).toMatchObject({ read: { mode: 'incremental', from: s1, to: s2 }, metrics: { candidates: 3, inserted: 3 } });
      const sat = await run('sat.conf', '2026-07-02T00:00:00Z');
      expect(sat.code, sat.error?.message).toBe(0);
      expect(out(sat, 'sat_customer')).toMatchObject({ read: { mode: 'incremental', from: s1, to: s2 }, metrics: { inserted: 2 } });
      for (const t of TABLES) expect(position(t)).toBe(s2);

      // Only a repeat of alice's state: the hub and the satellite have nothing to insert and record the position alone.
      await insert([6, 'alice', 'gold', 3]);
      const s3 = await sourceHead();
      const repeat = await run('sat.conf', '2026-07-03T00:00:00Z');
      expect(repeat.code, repeat.error?.message).toBe(0);
      expect(repeat.steps).not.toContain('insert');
      expect(repeat.steps).toContain('record-position');
      expect(position('sat_customer')).toBe(s3);
      expect((await run('sat.conf', '2026-07-03T01:00:00Z')).report.skipped).toMatch(/^nothing new in/);

      const v = vault();
      expect(v.hub_customer!.map((r) => String(r.customer)).sort()).toEqual(['alice', 'bob', 'carol']);
      expect(v.link_order_customer).toHaveLength(5);
      expect(
        v
          .sat_customer!.map((r) => `${String(r.load_date).slice(0, 10)} ${String(r.tier)}`)
          .sort()
          .join(', '),
      ).toBe('2026-07-01 gold, 2026-07-01 silver, 2026-07-02 bronze, 2026-07-02 platinum');
    },
    RUNS_TIMEOUT,
  );
});
