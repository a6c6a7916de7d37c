import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * The medallion chain in every format the templates offer: jdbc-snapshot-ingest v2 writes bronze
 * from SQLite (whose JDBC metadata says varchar(0) for TEXT) as parquet, an Iceberg table and a
 * Delta table; cdc-silver-merge v2 reads each of them (source.format) into an Iceberg and a Delta
 * silver table, for two days and a no-op rerun. Silver is read back by PyIceberg and delta-rs.
 */

const tenant = freshTenant();
let dir: string;

const BRONZE = [
  ['parquet', undefined],
  ['iceberg', 'lake'],
  ['delta', 'spark_catalog'],
] as const;
const SILVER = [
  ['iceberg', 'lake'],
  ['delta', 'spark_catalog'],
] as const;
const DAY1 = '2026-07-05';
const DAY2 = '2026-07-06';

function fill(rows: string): void {
  execFileSync('python3', [
    '-c',
    `import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE IF NOT EXISTS orders_cdc (id INTEGER, ts INTEGER, op TEXT, name TEXT)")\ndb.execute("DELETE FROM orders_cdc")\ndb.executemany("INSERT INTO orders_cdc VALUES (?, ?, ?, ?)", ${rows})\ndb.commit()`,
    join(dir, 'shop.db'),
  ]);
}

async function run(file: string, set: string[]): Promise<{ code: number | null; stderr: string; status: any }> {
  return runJob(
    join(dir, file),
    join(dir, 'platform.conf'),
    set.flatMap((s) => ['--set', s]),
  );
}

const ingestConf = (format: string, catalog: string | undefined) => `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", url = "jdbc:sqlite:${join(dir, 'shop.db')}", driver = "org.sqlite.JDBC" }
target { table = "orders_${format}", snapshot-date = "${DAY1}", format = ${format}${catalog ? `, catalog = "${catalog}"` : ''} }
`;

const mergeConf = (bronze: string, bronzeCatalog: string | undefined, silver: string, silverCatalog: string) => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_${bronze}", format = ${bronze}${bronzeCatalog ? `, catalog = "${bronzeCatalog}"` : ''} }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"] }
target { table = "orders_${bronze}_${silver}", format = ${silver}, catalog = "${silverCatalog}" }
`;

const combos = BRONZE.flatMap(([b, bc]) => SILVER.map(([s, sc]) => ({ bronze: b, bronzeCatalog: bc, silver: s, silverCatalog: sc })));

function silverRows(c: (typeof combos)[number]): Record<string, unknown>[] {
  const table = `orders_${c.bronze}_${c.silver}`;
  const rows = c.silver === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts), name: r.name })).sort((a, b) => a.id - b.id);
}

async function ingestAll(date: string): Promise<void> {
  for (const [format] of BRONZE) {
    const r = await run(`ingest-${format}.conf`, [`target.snapshot-date=${date}`]);
    expect(r.code, r.stderr).toBe(0);
  }
}

async function mergeAll(date: string, which = combos) {
  const results = [];
  // Two at a time: the machine's cores are shared.
  for (let i = 0; i < which.length; i += 2) {
    results.push(
      ...(await Promise.all(
        which.slice(i, i + 2).map(async (c) => ({ c, r: await run(`merge-${c.bronze}-${c.silver}.conf`, [`source.snapshot-date=${date}`]) })),
      )),
    );
  }
  return results;
}

/**
 * Whether a rerun commits is silver's matter (its measure and guards), not bronze's: the day-two
 * run of every combination already read each bronze format. So the rerun goes once per silver
 * format, from two different bronze formats.
 */
const rerunCombos = combos.filter((c) => (c.bronze === 'parquet' && c.silver === 'iceberg') || (c.bronze === 'delta' && c.silver === 'delta'));

beforeAll(() => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  const files: Record<string, string> = {};
  for (const [format, catalog] of BRONZE) files[`ingest-${format}.conf`] = ingestConf(format, catalog);
  for (const c of combos) files[`merge-${c.bronze}-${c.silver}.conf`] = mergeConf(c.bronze, c.bronzeCatalog, c.silver, c.silverCatalog);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
});

describe('the chain: every bronze format into every silver format', () => {
  it('names what bronze is: a table, or for parquet its path', async () => {
    fill(`[(1, 1, "c", "one"), (2, 1, "c", "two"), (3, 1, "c", "three")]`);
    const statuses: Record<string, any> = {};
    for (const [format] of BRONZE) {
      const r = await run(`ingest-${format}.conf`, [`target.snapshot-date=${DAY1}`]);
      expect(r.code, r.stderr).toBe(0);
      statuses[format] = r.status.outputs[0];
    }
    expect(statuses.parquet).toEqual(expect.objectContaining({ path: `${tenant.root}/bronze/orders_parquet`, format: 'parquet' }));
    expect(statuses.parquet.table).toBeUndefined();
    expect(statuses.iceberg).toMatchObject({ table: `lake.${tenant.id}_bronze.orders_iceberg`, format: 'iceberg' });
    expect(statuses.delta).toMatchObject({ table: `spark_catalog.${tenant.id}_bronze.orders_delta`, format: 'delta' });
  }, 300_000);

  it('merges day one into silver, in all six combinations', async () => {
    for (const { c, r } of await mergeAll(DAY1)) {
      expect(r.code, `${c.bronze} → ${c.silver}: ${r.stderr}`).toBe(0);
      expect(r.status.outputs[0].metrics, `${c.bronze} → ${c.silver}`).toEqual({ inserted: 3, updated: 0, deleted: 0, late: 0 });
      expect(silverRows(c), `${c.bronze} → ${c.silver}`).toEqual([
        { id: 1, ts: 1, name: 'one' },
        { id: 2, ts: 1, name: 'two' },
        { id: 3, ts: 1, name: 'three' },
      ]);
    }
  }, 600_000);

  it('applies day two (update, delete, late event) from exactly its snapshot date, then a rerun commits nothing', async () => {
    fill(`[(1, 2, "u", "one*"), (2, 2, "d", None), (3, 0, "c", "late")]`);
    await ingestAll(DAY2);
    for (const { c, r } of await mergeAll(DAY2)) {
      expect(r.code, `${c.bronze} → ${c.silver}: ${r.stderr}`).toBe(0);
      expect(r.status.outputs[0].metrics, `${c.bronze} → ${c.silver}`).toEqual({ inserted: 0, updated: 1, deleted: 1, late: 1 });
      expect(silverRows(c), `${c.bronze} → ${c.silver}`).toEqual([
        { id: 1, ts: 2, name: 'one*' },
        { id: 3, ts: 1, name: 'three' },
      ]);
    }
    expect(rerunCombos.map((c) => c.silver).sort()).toEqual(['delta', 'iceberg']);
    for (const { c, r } of await mergeAll(DAY2, rerunCombos)) {
      expect(r.code, `${c.bronze} → ${c.silver}: ${r.stderr}`).toBe(0);
      expect(r.status.outputs[0], `${c.bronze} → ${c.silver}`).toMatchObject({ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0, late: 3 } });
    }
  }, 600_000);

  it('skips (99) a snapshot date bronze does not hold, in every bronze format', async () => {
    for (const [b] of BRONZE) {
      const r = await run(`merge-${b}-iceberg.conf`, ['source.snapshot-date=2026-07-07']);
      expect(r.code, `${b}: ${r.stderr}`).toBe(99);
      expect(r.status.status).toBe('skipped');
    }
  }, 300_000);
});
