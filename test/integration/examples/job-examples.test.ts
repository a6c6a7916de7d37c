import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTopic, debeziumDecimal, produce, recordKey } from '../../support/kafka.js';
import { QUICKSTART_ORDERS, writeOrderEvents } from '../../support/shop-source.js';
import { lakeHome, readDeltaWithDeltaRs, readIcebergWithPyIceberg, repoRoot, undocumentedMetrics } from '../../support/stack.js';
import { needs } from '../../support/needs.js';
import { headerCommands } from '../../support/example-headers.js';
import { readdirSync } from 'node:fs';

needs('spark', 'kafka', 'py-tools');

/**
 * Every job example in configs/examples/ runs as its comment says: `scripts/lakehouse-jobs` with
 * the local platform config on the local stack's lake (the quickstart's data, two days), and the
 * silver tables hold what the quickstart promises, read by PyIceberg and delta-rs. The runs are
 * idempotent, so the test may share the lake with the quickstart.
 */

const home = lakeHome();
const platform = 'configs/examples/platform-local.conf';

/** The quickstart's CDC events of a day (scripts/quickstart), in the source database. */
const cdcEvents = (day: keyof typeof QUICKSTART_ORDERS) => writeOrderEvents(home, QUICKSTART_ORDERS[day]);

/** `scripts/lakehouse-jobs …` from the repository root, as the examples' comments write it. */
function lakehouseJobs(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(repoRoot, 'scripts/lakehouse-jobs'), ...args, '--log-level', 'warn'], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('close', (code) => {
      // Every status a test gets is held to the documented metrics (src/core/metrics.ts).
      const undefinedMetrics = undocumentedMetrics(stdout);
      if (undefinedMetrics.length)
        reject(new Error(`status of ${args.join(' ')} has metrics that docs/contracts.md does not define: ${undefinedMetrics.join(', ')}`));
      else resolve({ code, stdout, stderr });
    });
  });
}

async function ok(args: string[]): Promise<any> {
  const r = await lakehouseJobs(args);
  expect(r.code, `${args.join(' ')}\n${r.stderr}`).toBe(0);
  return JSON.parse(r.stdout);
}

const silver = (rows: Record<string, unknown>[]) => rows.map((r) => ({ id: Number(r.id), status: r.status })).sort((a, b) => a.id - b.id);
const EXPECTED = [
  { id: 1, status: 'PAID' },
  { id: 2, status: 'SHIPPED' },
  { id: 5, status: 'NEW' },
];

describe('configs/examples, run as their comments say', () => {
  it('v1: jdbc-snapshot-ingest.v1.conf into parquet bronze, cdc-silver-merge.v1.conf into Iceberg silver (the quickstart)', async () => {
    for (const day of ['2026-07-05', '2026-07-06'] as const) {
      cdcEvents(day);
      const ingest = await ok([
        '--job',
        'jdbc-snapshot-ingest',
        '--config',
        'configs/examples/jdbc-snapshot-ingest.v1.conf',
        '--env',
        platform,
        '--set',
        `target.snapshot-date=${day}`,
      ]);
      expect(ingest.outputs[0]).toMatchObject({ path: `file://${home}/acme/bronze/orders_cdc`, format: 'parquet' });
      const merge = await ok([
        '--job',
        'cdc-silver-merge',
        '--config',
        'configs/examples/cdc-silver-merge.v1.conf',
        '--env',
        platform,
        '--set',
        `source.where="_snapshot_date = '${day}'"`,
      ]);
      expect(merge.outputs[0]).toMatchObject({ table: 'lake.acme_silver.orders', format: 'iceberg' });
    }
    expect(silver(readIcebergWithPyIceberg('acme_silver', 'orders'))).toEqual(EXPECTED);
  });

  it('v2: jdbc-snapshot-ingest.v2.conf into an Iceberg bronze table, cdc-silver-merge.v2.conf from it into Delta silver; a rerun commits nothing', async () => {
    for (const day of ['2026-07-05', '2026-07-06'] as const) {
      cdcEvents(day);
      const ingest = await ok(['--config', 'configs/examples/jdbc-snapshot-ingest.v2.conf', '--env', platform, '--set', `target.snapshot-date=${day}`]);
      expect(ingest.outputs[0]).toMatchObject({ table: 'lake.acme_bronze.orders_cdc_table', format: 'iceberg' });
      const merge = await ok(['--config', 'configs/examples/cdc-silver-merge.v2.conf', '--env', platform, '--set', `source.snapshot-date=${day}`]);
      expect(merge.outputs[0]).toMatchObject({ table: 'spark_catalog.acme_silver.orders_delta', format: 'delta' });
    }
    expect(silver(readDeltaWithDeltaRs(`${home}/acme/silver/orders_delta`))).toEqual(EXPECTED);
    const rerun = await ok(['--config', 'configs/examples/cdc-silver-merge.v2.conf', '--env', platform, '--set', 'source.snapshot-date=2026-07-06']);
    expect(rerun.outputs[0]).toMatchObject({ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0 } });
  });

  /** The raw vault example (README.md, "Raw vault example"): bronze of a day, then its hub, link and satellite loads. */
  async function rawVaultDay(day: '2026-07-05' | '2026-07-06'): Promise<any[]> {
    const vault = (template: string, extra: string[] = []) =>
      ok(['--config', `configs/examples/${template}.v1.conf`, '--env', platform, '--logical-date', day, ...extra]);
    cdcEvents(day);
    await ok(['--config', 'configs/examples/jdbc-snapshot-ingest.v2.conf', '--env', platform, '--set', `target.snapshot-date=${day}`]);
    return [
      await vault('dv-hub'),
      await vault('dv-link', ['--set', `source.snapshot-date=${day}`]),
      await vault('dv-satellite', ['--set', `source.snapshot-date=${day}`]),
    ];
  }
  /** A dozen CLI runs against a shared, busy server: minutes. */
  const VAULT_TIMEOUT = 1_800_000;
  const orderKey = (id: string) =>
    execFileSync('python3', [join(repoRoot, 'test/support/dv_keys.py'), JSON.stringify([['md5', [id]]])])
      .toString()
      .trim();

  it(
    'raw vault: dv-hub, dv-link and dv-satellite .v1.conf from the Iceberg bronze of jdbc-snapshot-ingest.v2.conf, two days, read back by PyIceberg; a rerun inserts nothing',
    async () => {
      for (const day of ['2026-07-05', '2026-07-06'] as const) {
        const [hub, link, sat] = await rawVaultDay(day);
        expect(hub.outputs[0]).toMatchObject({ table: 'lake.acme_silver.hub_order', format: 'iceberg' });
        expect(link.outputs[0]).toMatchObject({ table: 'lake.acme_silver.link_order_customer', format: 'iceberg' });
        expect(sat.outputs[0]).toMatchObject({ table: 'lake.acme_silver.sat_order', format: 'iceberg' });
      }
      // Every order once with its key as Python's hashlib computes it, and the ghost record (business key NULL).
      const hub = readIcebergWithPyIceberg('acme_silver', 'hub_order');
      expect(hub.map((r) => [r.order_id, r.hk_order, r.record_source]).sort((a, b) => String(a[0]).localeCompare(String(b[0])))).toEqual([
        ...['1', '2', '3', '4', '5'].map((id) => [id, orderKey(id), 'shop.orders']),
        [null, '0'.repeat(32), 'SYSTEM'],
      ]);
      const link = readIcebergWithPyIceberg('acme_silver', 'link_order_customer').filter((r) => r.record_source !== 'SYSTEM');
      expect(link.map((r) => r.hk_order).sort()).toEqual(['1', '2', '3', '4', '5'].map(orderKey).sort());
      // Day one: 1 NEW then PAID, 2, 3 and 4 NEW (3's delete left out); day two: 2 SHIPPED, 5 NEW; 3's late copy repeats its state.
      const sat = readIcebergWithPyIceberg('acme_silver', 'sat_order').filter((r) => r.record_source !== 'SYSTEM');
      expect(sat.map((r) => `${String(r.load_date).slice(0, 10)} ${r.load_seq} ${r.customer} ${r.status}`).sort()).toEqual([
        '2026-07-05 1 alice NEW',
        '2026-07-05 1 bob NEW',
        '2026-07-05 1 carol NEW',
        '2026-07-05 1 dave NEW',
        '2026-07-05 2 alice PAID',
        '2026-07-06 1 bob SHIPPED',
        '2026-07-06 1 erin NEW',
      ]);
      for (const output of (await rawVaultDay('2026-07-06')).map((r) => r.outputs[0]))
        expect(output).toMatchObject({ committed: false, metrics: { inserted: 0 } });
    },
    VAULT_TIMEOUT,
  );

  it(
    'raw vault to gold: bronze, hub, link, satellite, then gold-publish.vault.v1.conf over the hub and the satellite’s current rows into Delta, read back by delta-rs; a rerun commits nothing',
    async () => {
      const gold = (day: string) => ok(['--config', 'configs/examples/gold-publish.vault.v1.conf', '--env', platform, '--logical-date', day]);
      for (const day of ['2026-07-05', '2026-07-06'] as const) {
        await rawVaultDay(day);
        expect((await gold(day)).outputs[0]).toMatchObject({ table: 'spark_catalog.acme_gold.orders_current', format: 'delta' });
      }
      // The hub's load date of each order, read by PyIceberg: when the vault first saw it.
      const firstLoaded = new Map(readIcebergWithPyIceberg('acme_silver', 'hub_order').map((r) => [String(r.order_id), String(r.load_date).slice(0, 10)]));
      const rows = readDeltaWithDeltaRs(`${home}/acme/gold/orders_current`)
        .map((r) => ({ ...r, order_id: Number(r.order_id), first_loaded: String(r.first_loaded).slice(0, 10), changed_on: String(r.changed_on).slice(0, 10) }))
        .sort((a, b) => a.order_id - b.order_id);
      // The satellite keeps states, not deletes: 3 and 4 keep their last state (NEW).
      expect(rows).toEqual(
        [
          { order_id: 1, customer: 'alice', status: 'PAID', amount: '10.00', changed_on: '2026-07-05' },
          { order_id: 2, customer: 'bob', status: 'SHIPPED', amount: '25.50', changed_on: '2026-07-06' },
          { order_id: 3, customer: 'carol', status: 'NEW', amount: '7.25', changed_on: '2026-07-05' },
          { order_id: 4, customer: 'dave', status: 'NEW', amount: '99.99', changed_on: '2026-07-05' },
          { order_id: 5, customer: 'erin', status: 'NEW', amount: '42.00', changed_on: '2026-07-06' },
        ].map((r) => ({ ...r, first_loaded: firstLoaded.get(String(r.order_id)) })),
      );
      const rerun = await gold('2026-07-06');
      expect(rerun.outputs[0]).toMatchObject({ table: 'spark_catalog.acme_gold.orders_current', committed: false, metrics: { rows: 5 } });
      expect(rerun.outputs[0].expectations.map((e: any) => [e.name, e.outcome, e.failedRows])).toEqual([
        ['customer_present', 'passed', 0],
        ['known_status', 'passed', 0],
        ['amount_positive', 'passed', 0],
        ['grain_unique', 'passed', 0],
      ]);
    },
    VAULT_TIMEOUT,
  );

  it('iceberg-zero-copy-append.v1.conf appends lake.acme_silver.orders_2025 to orders_history by reference; a rerun appends nothing', async () => {
    // The platform's DDL the example's header gives (the two tables, the source with two rows).
    execFileSync('bash', ['scripts/spark-sql', '--file', 'configs/examples/iceberg-zero-copy-append.setup.sql'], { cwd: repoRoot, stdio: 'pipe' });
    const args = ['--config', 'configs/examples/iceberg-zero-copy-append.v1.conf', '--env', platform];
    const first = await ok(args);
    expect(first.outputs[0]).toMatchObject({ table: 'lake.acme_silver.orders_history', format: 'iceberg' });
    const rerun = await ok(args);
    expect(rerun.outputs[0]).toMatchObject({ committed: false, snapshotId: first.outputs[0].snapshotId });
    const history = readIcebergWithPyIceberg('acme_silver', 'orders_history')
      .map((r) => Number(r.id))
      .sort();
    expect(history).toEqual(
      readIcebergWithPyIceberg('acme_silver', 'orders_2025')
        .map((r) => Number(r.id))
        .sort(),
    );
  });

  it('scd2-dim-load.v1.conf: the status history of lake.acme_silver.orders (the v1 chain above) in an Iceberg gold dimension; a reload writes nothing', async () => {
    const first = await ok(['--job', 'scd2-dim-load', '--config', 'configs/examples/scd2-dim-load.v1.conf', '--env', platform]);
    expect(first.outputs[0]).toMatchObject({ table: 'lake.acme_gold.dim_order_status', format: 'iceberg' });
    const current = readIcebergWithPyIceberg('acme_gold', 'dim_order_status').filter((r) => r._scd_current === true);
    expect(silver(current)).toEqual(EXPECTED);
    const rerun = await ok(['--job', 'scd2-dim-load', '--config', 'configs/examples/scd2-dim-load.v1.conf', '--env', platform]);
    expect(rerun.outputs[0]).toMatchObject({ committed: false });
  });

  it('scd2-dim-load.v2.conf: the bronze change feed of the v2 chain above, day by day, into a Delta gold dimension with tombstones; a rerun writes nothing', async () => {
    for (const day of ['2026-07-05', '2026-07-06'])
      expect(
        (await ok(['--config', 'configs/examples/scd2-dim-load.v2.conf', '--env', platform, '--set', `source.snapshot-date=${day}`])).outputs[0],
      ).toMatchObject({
        table: 'spark_catalog.acme_gold.dim_orders',
        format: 'delta',
      });
    const rows = readDeltaWithDeltaRs(`${home}/acme/gold/dim_orders`);
    const current = rows.filter((r) => r._scd_current === true);
    expect(
      current
        .filter((r) => r._scd_deleted === false)
        .map((r) => ({ id: Number(r.id), status: r.status }))
        .sort((a, b) => a.id - b.id),
    ).toEqual(EXPECTED);
    expect(
      current
        .filter((r) => r._scd_deleted === true)
        .map((r) => Number(r.id))
        .sort(),
    ).toEqual([3, 4]);
    // 1: NEW, PAID; 2: NEW, SHIPPED; 3: NEW, deleted; 4: NEW, deleted; 5: NEW.
    expect(rows).toHaveLength(9);
    const rerun = await ok(['--config', 'configs/examples/scd2-dim-load.v2.conf', '--env', platform, '--set', 'source.snapshot-date=2026-07-06']);
    expect(rerun.outputs[0]).toMatchObject({ committed: false });
  });

  it('kafka-bronze-ingest.v1.conf: Debezium events produced to acme.shop.orders land in lake.acme_bronze.orders_events once each (PyIceberg); a rerun adds nothing (99)', async () => {
    // The example's topic, as a producer (Debezium) would fill it; ids unique to this run, as the lake is shared.
    const topic = 'acme.shop.orders';
    createTopic(topic, 1);
    const base = Date.now();
    const event = (id: number, op: 'c' | 'u', status: string, ts: number) => {
      const row = { id, customer: `c${id}`, status, amount: debeziumDecimal('12.50', 2) }; // Debezium's default (precise) encoding
      return { key: JSON.stringify({ id }), value: { before: op === 'c' ? null : row, after: row, op, ts_ms: ts, source: { ts_ms: ts } } };
    };
    const produced = produce(topic, [event(base, 'c', 'NEW', base), event(base, 'u', 'PAID', base + 1), event(base + 1, 'c', 'NEW', base + 2)]);
    const args = ['--config', 'configs/examples/kafka-bronze-ingest.v1.conf', '--env', platform];
    const first = await ok(args);
    expect(first.outputs[0]).toMatchObject({ table: 'lake.acme_bronze.orders_events', format: 'iceberg' });
    const landed = () => readIcebergWithPyIceberg('acme_bronze', 'orders_events');
    const rows = landed();
    const keys = rows.map(recordKey);
    // Every offset of the topic once (earlier runs' too), this run's records among them, parsed.
    expect(new Set(keys).size).toBe(keys.length);
    for (const p of produced) expect(keys.filter((k) => k === recordKey(p))).toHaveLength(1);
    const mine = rows.filter((r) => Number(r.id) === base).sort((a, b) => Number(a._kafka_offset) - Number(b._kafka_offset));
    expect(mine.map((r) => [r.op, r.status])).toEqual([
      ['c', 'NEW'],
      ['u', 'PAID'],
    ]);
    const rerun = await lakehouseJobs(args);
    expect(rerun.code, rerun.stderr).toBe(99);
    expect(landed().map(recordKey).sort()).toEqual([...keys].sort());
  });

  it('jdbc-snapshot-ingest.postgres.v1.conf validates with its platform config (running it needs scripts/postgres on its port)', async () => {
    const r = await ok([
      'validate',
      '--job',
      'jdbc-snapshot-ingest',
      '--config',
      'configs/examples/jdbc-snapshot-ingest.postgres.v1.conf',
      '--env',
      'configs/examples/jdbc-snapshot-ingest.platform.conf',
    ]);
    expect(r.status).toBe('succeeded');
  });
});

/**
 * What a newcomer does: copy an example header's commands into a shell, in the order the headers
 * build on each other (the quickstart's data, which the tests above made, first). Every command as
 * written, through bash from the repository root; each must succeed. The runs are idempotent, so
 * running them after the tests above proves reruns too.
 */
describe('configs/examples, every header run verbatim', () => {
  const ORDER = [
    'jdbc-snapshot-ingest.v1.conf',
    'cdc-silver-merge.v1.conf',
    'jdbc-snapshot-ingest.v2.conf',
    // Right after the snapshot it compares with the source, which has not moved on since.
    'reconcile.v1.conf',
    'cdc-silver-merge.v2.conf',
    'scd2-dim-load.v1.conf',
    'scd2-dim-load.v2.conf',
    'dv-hub.v1.conf',
    'dv-link.v1.conf',
    'dv-satellite.v1.conf',
    'gold-publish.v1.conf',
    'gold-publish.vault.v1.conf',
    'iceberg-zero-copy-append.v1.conf',
    'kafka-bronze-ingest.v1.conf',
    'table-maintenance.v1.conf',
    // After the tables it checks were written (above): they are fresh.
    'freshness-check.v1.conf',
  ];
  // Its command is an Airflow task's (`{{ ds }}`) against a platform's PostgreSQL: the test above validates it.
  const ELSEWHERE = ['jdbc-snapshot-ingest.postgres.v1.conf'];

  it('covers every example that gives commands', () => {
    const withCommands = readdirSync(join(repoRoot, 'configs/examples'))
      .filter((f) => f.endsWith('.conf') && headerCommands(join(repoRoot, 'configs/examples', f)).length > 0)
      .sort();
    expect(withCommands).toEqual([...ORDER, ...ELSEWHERE].sort());
  });

  it.each(ORDER)(
    '%s',
    async (file) => {
      for (const command of headerCommands(join(repoRoot, 'configs/examples', file))) {
        const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
          const child = spawn('bash', ['-c', command], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
          let stderr = '';
          child.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
          child.on('close', (code) => resolve({ code, stderr }));
        });
        expect(r.code, `${file}: ${command}\n${r.stderr}`).toBe(0);
      }
    },
    600_000,
  );
});
