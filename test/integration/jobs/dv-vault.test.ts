import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg, remote, repoRoot, runCli, runJob } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * The raw vault templates through the CLI on Iceberg and on Delta, read back with PyIceberg and
 * delta-rs, with every hash key recomputed by an independent implementation (test/support/dv_keys.py,
 * Python's hashlib): a hub fed by two sources in one run and by a third in a later run, a link, a
 * satellite that drops repeated payloads within a batch and across batches, ghost records, and
 * reruns that insert nothing and commit nothing.
 */

type Key = [algorithm: 'md5' | 'sha1' | 'sha256', values: (string | null)[]];
/** Keys computed by Python's hashlib from the documented rules. */
function pythonKeys(keys: Key[]): string[] {
  return execFileSync('python3', [join(repoRoot, 'test/support/dv_keys.py'), JSON.stringify(keys)])
    .toString()
    .trim()
    .split('\n');
}
const md5 = (...values: (string | null)[]) => pythonKeys([['md5', values]])[0]!;
const ZERO = '0'.repeat(32);

let client: SparkConnectClient;
/** Each test runs the CLI several times against a shared, busy server: minutes each. */
const SLOW = 1_200_000;

async function bronze(root: string, table: string, select: string, date: string) {
  const q = testQuery(
    `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM (${select})`,
  );
  await client.execute(
    compileCommandPlan(q.writeFiles(`${root}/bronze/${table}`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
  );
}

beforeAll(() => {
  client = connect();
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

describe.each([
  ['iceberg', 'lake'],
  ['delta', 'spark_catalog'],
] as const)('raw vault on %s', (format, catalog) => {
  const tenant = freshTenant();
  let dir: string;
  const target = `target { table = "%s", catalog = "${catalog}", format = ${format} }`;
  const head = (template: string) =>
    `job { template = "${template}", schema-version = 1, name = "it-vault" }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;

  const configs = {
    'hub.conf': `${head('dv-hub')}
sources = [
  { table = "orders", snapshot-date = "2026-09-01", record-source = "shop.orders", business-key = ["customer"] }
  { table = "crm_customers", record-source = "crm.customers", business-key = ["name"] }
]
hub { hash-key = "hk_customer", business-key = ["customer"] }
ghost-record = true
${target.replace('%s', 'hub_customer')}`,
    'hub-later.conf': `${head('dv-hub')}
sources = [ { table = "web_signups", record-source = "web.signups", business-key = ["email_name"], where = "active" } ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
${target.replace('%s', 'hub_customer')}`,
    'link.conf': `${head('dv-link')}
source { table = "orders", snapshot-date = "2026-09-01", record-source = "shop.orders" }
link {
  hash-key = "lhk_order_customer"
  hubs = [ { hash-key = "hk_order", business-key = ["id"] }, { hash-key = "hk_customer", business-key = ["customer"] } ]
}
ghost-record = true
${target.replace('%s', 'link_order_customer')}`,
    'sat.conf': `${head('dv-satellite')}
source { table = "orders", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["status", "amount"], order-by = ["ts"] }
ghost-record = true
${target.replace('%s', 'sat_order')}`,
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  };

  async function run(file: string, logicalDate: string, set: string[] = []) {
    return runJob(join(dir, file), join(dir, 'platform.conf'), ['--logical-date', logicalDate, ...set.flatMap((s) => ['--set', s])]);
  }

  const read = (table: string): Record<string, any>[] =>
    format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  const day = (v: unknown) => String(v).slice(0, 10);

  beforeAll(async () => {
    dir = tempFiles(configs);
    await bronze(
      tenant.root,
      'orders',
      `SELECT * FROM VALUES
         (1, 'alice', 'NEW', 10.00BD, 1), (1, 'alice', 'NEW', 10.00BD, 2), (1, 'alice', 'PAID', 10.00BD, 3), (1, 'alice', 'NEW', 10.00BD, 4),
         (2, ' Bob ', 'NEW', 5.50BD, 1), (3, NULL, 'NEW', 7.25BD, 1)
       AS t(id, customer, status, amount, ts)`,
      '2026-09-01',
    );
    await bronze(
      tenant.root,
      'orders',
      `SELECT * FROM VALUES (1, 'alice', 'NEW', 10.00BD, 5), (2, ' Bob ', 'SHIPPED', 5.50BD, 2), (3, NULL, 'new ', 7.25BD, 2), (3, NULL, 'NEW', 7.25BD, 3)
       AS t(id, customer, status, amount, ts)`,
      '2026-09-02',
    );
    await bronze(tenant.root, 'crm_customers', `SELECT * FROM VALUES ('BOB'), ('carol'), ('  '), (NULL) AS t(name)`, '2026-09-01');
    await bronze(tenant.root, 'web_signups', `SELECT * FROM VALUES ('Alice', true), ('dave', true), ('eve', false) AS t(email_name, active)`, '2026-09-01');
  });

  it(
    'hub: two sources in one run (a key both deliver is the first source’s), keys hashed as documented, the ghost record',
    async () => {
      const r = await run('hub.conf', '2026-09-01');
      expect(r.code, r.stderr).toBe(0);
      expect(r.status.outputs[0]).toMatchObject({
        table: `${catalog}.${tenant.id}_silver.hub_customer`,
        format,
        committed: true,
        metrics: { inserted: 3, ghost: 1 },
      });
      const rows = read('hub_customer').sort((a, b) => String(a.hk_customer).localeCompare(String(b.hk_customer)));
      const expected = [
        { hk_customer: md5('alice'), customer: 'alice', record_source: 'shop.orders', day: '2026-09-01' },
        { hk_customer: md5('BOB'), customer: 'Bob', record_source: 'shop.orders', day: '2026-09-01' },
        { hk_customer: md5('carol'), customer: 'carol', record_source: 'crm.customers', day: '2026-09-01' },
        { hk_customer: ZERO, customer: null, record_source: 'SYSTEM', day: '1900-01-01' },
      ].sort((a, b) => a.hk_customer.localeCompare(b.hk_customer));
      expect(rows.map((x) => ({ hk_customer: x.hk_customer, customer: x.customer, record_source: x.record_source, day: day(x.load_date) }))).toEqual(expected);
    },
    SLOW,
  );

  it(
    'hub: a later run from another source adds only its new keys; a rerun inserts nothing and commits nothing',
    async () => {
      const later = await run('hub-later.conf', '2026-09-02');
      expect(later.code, later.stderr).toBe(0);
      expect(later.status.outputs[0].metrics).toMatchObject({ inserted: 1 });
      const dave = read('hub_customer').filter((x) => x.record_source === 'web.signups');
      expect(dave.map((x) => [x.hk_customer, x.customer, day(x.load_date)])).toEqual([[md5('dave'), 'dave', '2026-09-02']]);

      const before = read('hub_customer');
      const snapshot = later.status.outputs[0].snapshotId;
      const again = await run('hub-later.conf', '2026-09-03');
      expect(again.code, again.stderr).toBe(0);
      expect(again.status.outputs[0]).toMatchObject({ committed: false, snapshotId: snapshot, metrics: { inserted: 0 } });
      const rerun = await run('hub.conf', '2026-09-01');
      expect(rerun.status.outputs[0]).toMatchObject({ committed: false, snapshotId: snapshot, metrics: { inserted: 0 } });
      expect(read('hub_customer')).toHaveLength(before.length);
    },
    SLOW,
  );

  it(
    'link: one row per relationship, the parents’ keys as the hubs hash them, rows missing a parent left out',
    async () => {
      const r = await run('link.conf', '2026-09-01');
      expect(r.code, r.stderr).toBe(0);
      expect(r.status.outputs[0].metrics).toMatchObject({ candidates: 2, inserted: 2, ghost: 1 });
      const rows = read('link_order_customer')
        .map((x) => [x.lhk_order_customer, x.hk_order, x.hk_customer, x.record_source])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
      const expected = [
        [md5('1', 'alice'), md5('1'), md5('alice'), 'shop.orders'],
        [md5('2', 'Bob'), md5('2'), md5('bob'), 'shop.orders'],
        [ZERO, ZERO, ZERO, 'SYSTEM'],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0])));
      expect(rows).toEqual(expected);
      const rerun = await run('link.conf', '2026-09-01');
      expect(rerun.status.outputs[0]).toMatchObject({ committed: false, metrics: { inserted: 0 } });
    },
    SLOW,
  );

  it(
    'satellite: each change of a batch kept in order, consecutive repeats dropped, within and across batches; reruns insert nothing',
    async () => {
      const first = await run('sat.conf', '2026-09-01', ['source.snapshot-date=2026-09-01']);
      expect(first.code, first.stderr).toBe(0);
      expect(first.status.outputs[0].metrics).toMatchObject({ inserted: 5, ghost: 1 });
      const second = await run('sat.conf', '2026-09-02', ['source.snapshot-date=2026-09-02']);
      expect(second.code, second.stderr).toBe(0);
      // 1: NEW again (as its latest row); 2: SHIPPED is a change; 3: 'new ' is NEW after normalisation, then NEW again.
      expect(second.status.outputs[0].metrics).toMatchObject({ inserted: 1 });

      const diff = (amount: string, status: string) => md5(amount, status); // sorted payload: amount, status
      const rows = read('sat_order')
        .map((x) => [x.hk_order, day(x.load_date), Number(x.load_seq), x.status, x.hashdiff, x.record_source])
        .sort((a, b) => `${a[0]}${a[1]}${a[2]}`.localeCompare(`${b[0]}${b[1]}${b[2]}`));
      const expected = [
        [md5('1'), '2026-09-01', 1, 'NEW', diff('10.00', 'NEW'), 'shop.orders'],
        [md5('1'), '2026-09-01', 2, 'PAID', diff('10.00', 'PAID'), 'shop.orders'],
        [md5('1'), '2026-09-01', 3, 'NEW', diff('10.00', 'NEW'), 'shop.orders'],
        [md5('2'), '2026-09-01', 1, 'NEW', diff('5.50', 'NEW'), 'shop.orders'],
        [md5('2'), '2026-09-02', 1, 'SHIPPED', diff('5.50', 'SHIPPED'), 'shop.orders'],
        [md5('3'), '2026-09-01', 1, 'NEW', diff('7.25', 'NEW'), 'shop.orders'],
        [ZERO, '1900-01-01', 1, null, ZERO, 'SYSTEM'],
      ].sort((a, b) => `${a[0]}${a[1]}${a[2]}`.localeCompare(`${b[0]}${b[1]}${b[2]}`));
      expect(rows).toEqual(expected);

      for (const d of ['2026-09-01', '2026-09-02']) {
        const rerun = await run('sat.conf', d, [`source.snapshot-date=${d}`]);
        expect(rerun.code, rerun.stderr).toBe(0);
        expect(rerun.status.outputs[0]).toMatchObject({ committed: false, metrics: { inserted: 0 } });
      }
      expect(read('sat_order')).toHaveLength(expected.length);
    },
    SLOW,
  );

  it(
    'satellite: two different payloads of one key at the same order position stop the run (65) before anything is written',
    async () => {
      await bronze(
        tenant.root,
        'orders',
        `SELECT * FROM VALUES (7, 'x', 'NEW', 1.00BD, 1), (7, 'x', 'PAID', 1.00BD, 1) AS t(id, customer, status, amount, ts)`,
        '2026-09-03',
      );
      const before = read('sat_order');
      const r = await run('sat.conf', '2026-09-03', ['source.snapshot-date=2026-09-03']);
      expect(r.code).toBe(65);
      expect(r.status.error).toMatchObject({ code: 'SAT_AMBIGUOUS_ORDER', message: expect.stringContaining(md5('7')) });
      expect(read('sat_order')).toEqual(before);
    },
    SLOW,
  );

  it(
    'a run without --logical-date stops before anything is written (64)',
    async () => {
      const r = await runCli(['--config', join(dir, 'hub.conf'), '--env', join(dir, 'platform.conf'), '--remote', remote()]);
      expect(r.code).toBe(64);
      expect(JSON.parse(r.stdout).error.message).toContain('--logical-date');
      writeFileSync(join(dir, 'unused'), '');
    },
    SLOW,
  );
});
