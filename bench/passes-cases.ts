/**
 * bench/passes: the table of cases it walks. One row per (template, version, format) run of an
 * example config of configs/examples/, in the order a lake fills (bronze, silver and the raw vault,
 * gold, operations): each case runs on day 1 (its tables are created) and day 2 (a steady-state run
 * over that day's changes). A case names the inputs it needs (`seeds`, prepared once per day before
 * the first case that needs them) and the cases whose tables it reads (`after`, run first even when
 * BENCH_PASSES_ONLY leaves them out).
 *
 * A new template (or version) is one new row; test/unit/bench/passes-cases.test.ts fails while a
 * version of the registry has no row.
 */

export const DAYS = ['2026-07-05', '2026-07-06'] as const;
export type Day = (typeof DAYS)[number];

/**
 * What a case's input needs before it runs on a day (bench/passes.ts does it):
 *   shop-db     the quickstart's CDC events of the day in the application database (SQLite)
 *   kafka       the same events, as Debezium change events, appended to the topic acme.shop.orders
 *   orders-2025 a retired Iceberg table of the day (orders_2025 on day 1, orders_2025_h2 on day 2)
 *               and the history table it is appended to (iceberg-zero-copy-append)
 */
export type Seed = 'shop-db' | 'kafka' | 'orders-2025';

export interface PassCase {
  /** Unique; names the runs ("<day> <name>") and the baseline's entries. */
  readonly name: string;
  readonly template: string;
  readonly version: number;
  /** A file of configs/examples/. */
  readonly config: string;
  /** Arguments after --config/--env for a day: the example's comment, applied to that day. */
  readonly args: (day: Day) => readonly string[];
  readonly seeds?: readonly Seed[];
  readonly after?: readonly string[];
}

const set = (...kv: string[]) => kv.flatMap((s) => ['--set', s]);
/** The same template writing a Delta table of the session catalog instead (table renamed: both formats side by side). */
const delta = (table: string) => set('target.format=delta', 'target.catalog=spark_catalog', `target.table=${table}`);

export const cases: readonly PassCase[] = [
  {
    name: 'jdbc-snapshot-ingest v1 (parquet)',
    template: 'jdbc-snapshot-ingest',
    version: 1,
    config: 'jdbc-snapshot-ingest.v1.conf',
    args: (day) => set(`target.snapshot-date=${day}`),
    seeds: ['shop-db'],
  },
  {
    name: 'jdbc-snapshot-ingest v2 (iceberg)',
    template: 'jdbc-snapshot-ingest',
    version: 2,
    config: 'jdbc-snapshot-ingest.v2.conf',
    args: (day) => set(`target.snapshot-date=${day}`),
    seeds: ['shop-db'],
  },
  {
    name: 'jdbc-snapshot-ingest v2 (delta)',
    template: 'jdbc-snapshot-ingest',
    version: 2,
    config: 'jdbc-snapshot-ingest.v2.conf',
    args: (day) => [...set(`target.snapshot-date=${day}`), ...delta('orders_cdc_delta')],
    seeds: ['shop-db'],
  },
  {
    name: 'kafka-bronze-ingest v1 (iceberg)',
    template: 'kafka-bronze-ingest',
    version: 1,
    config: 'kafka-bronze-ingest.v1.conf',
    args: () => [],
    seeds: ['kafka'],
  },
  {
    name: 'kafka-bronze-ingest v1 (delta)',
    template: 'kafka-bronze-ingest',
    version: 1,
    config: 'kafka-bronze-ingest.v1.conf',
    args: () => delta('orders_events_delta'),
    seeds: ['kafka'],
  },
  {
    name: 'cdc-silver-merge v1 (iceberg)',
    template: 'cdc-silver-merge',
    version: 1,
    config: 'cdc-silver-merge.v1.conf',
    args: (day) => set(`source.where="_snapshot_date = '${day}'"`),
    after: ['jdbc-snapshot-ingest v1 (parquet)'],
  },
  {
    name: 'cdc-silver-merge v2 (delta)',
    template: 'cdc-silver-merge',
    version: 2,
    config: 'cdc-silver-merge.v2.conf',
    args: (day) => set(`source.snapshot-date=${day}`),
    after: ['jdbc-snapshot-ingest v2 (iceberg)'],
  },
  ...(['iceberg', 'delta'] as const).flatMap((format): PassCase[] => {
    const to = (table: string) => (format === 'delta' ? delta(`${table}_delta`) : []);
    const after = ['jdbc-snapshot-ingest v2 (iceberg)'];
    return [
      {
        name: `dv-hub v1 (${format})`,
        template: 'dv-hub',
        version: 1,
        config: 'dv-hub.v1.conf',
        args: (day) => ['--logical-date', day, ...to('hub_order')],
        after,
      },
      {
        name: `dv-link v1 (${format})`,
        template: 'dv-link',
        version: 1,
        config: 'dv-link.v1.conf',
        args: (day) => ['--logical-date', day, ...set(`source.snapshot-date=${day}`), ...to('link_order_customer')],
        after,
      },
      {
        name: `dv-satellite v1 (${format})`,
        template: 'dv-satellite',
        version: 1,
        config: 'dv-satellite.v1.conf',
        args: (day) => ['--logical-date', day, ...set(`source.snapshot-date=${day}`), ...to('sat_order')],
        after,
      },
    ];
  }),
  {
    // SQL transform over silver.orders, three expectations (fail, quarantine, warn), replace-range.
    name: 'gold-publish v1 (iceberg, replace-range)',
    template: 'gold-publish',
    version: 1,
    config: 'gold-publish.v1.conf',
    args: (day) => ['--logical-date', day],
    after: ['cdc-silver-merge v1 (iceberg)'],
  },
  {
    // Two SQL steps over the raw vault, three expectations and the grain check, full-refresh.
    name: 'gold-publish v1 (delta, full-refresh over the vault)',
    template: 'gold-publish',
    version: 1,
    config: 'gold-publish.vault.v1.conf',
    args: (day) => ['--logical-date', day],
    after: ['dv-hub v1 (iceberg)', 'dv-satellite v1 (iceberg)'],
  },
  {
    name: 'scd2-dim-load v1 (iceberg)',
    template: 'scd2-dim-load',
    version: 1,
    config: 'scd2-dim-load.v1.conf',
    args: (day) => set(`dimension.effective-at="${day}T23:00:00Z"`),
    after: ['cdc-silver-merge v1 (iceberg)'],
  },
  {
    name: 'scd2-dim-load v2 (delta)',
    template: 'scd2-dim-load',
    version: 2,
    config: 'scd2-dim-load.v2.conf',
    args: (day) => set(`source.snapshot-date=${day}`),
    after: ['jdbc-snapshot-ingest v2 (iceberg)'],
  },
  {
    // Both formats in one config: sort compaction, manifests, expiry, orphans (Iceberg); Z-order, vacuum (Delta).
    name: 'table-maintenance v1 (iceberg + delta)',
    template: 'table-maintenance',
    version: 1,
    config: 'table-maintenance.v1.conf',
    args: () => [],
    after: ['cdc-silver-merge v1 (iceberg)', 'cdc-silver-merge v2 (delta)'],
  },
  {
    // Day 2 appends another retired table (a retired source is appended once).
    name: 'iceberg-zero-copy-append v1 (iceberg)',
    template: 'iceberg-zero-copy-append',
    version: 1,
    config: 'iceberg-zero-copy-append.v1.conf',
    args: (day) => (day === DAYS[0] ? [] : set('source.table=orders_2025_h2')),
    seeds: ['orders-2025'],
  },
  {
    // Reads the commits of the tables above (metadata) and one event-time aggregate; writes nothing.
    name: 'freshness-check v1 (iceberg + delta)',
    template: 'freshness-check',
    version: 1,
    config: 'freshness-check.v1.conf',
    args: () => [],
    after: ['jdbc-snapshot-ingest v2 (iceberg)', 'cdc-silver-merge v1 (iceberg)', 'cdc-silver-merge v2 (delta)'],
  },
  {
    // The day's bronze snapshot against the source it was taken from: one aggregate on each side, joined.
    name: 'reconcile v1 (iceberg vs jdbc)',
    template: 'reconcile',
    version: 1,
    config: 'reconcile.v1.conf',
    args: (day) => set(`table.where="_snapshot_date = '${day}'"`),
    seeds: ['shop-db'],
    after: ['jdbc-snapshot-ingest v2 (iceberg)'],
  },
];

/** The cases to run for BENCH_PASSES_ONLY=<template,…> (all when empty), with the cases they read from, in table order. */
export function selectCases(only: readonly string[]): PassCase[] {
  if (only.length === 0) return [...cases];
  const unknown = only.filter((t) => !cases.some((c) => c.template === t));
  if (unknown.length) throw new Error(`BENCH_PASSES_ONLY: no case for ${unknown.join(', ')}`);
  const wanted = new Set<string>();
  const want = (name: string) => {
    if (wanted.has(name)) return;
    wanted.add(name);
    for (const a of cases.find((c) => c.name === name)?.after ?? []) want(a);
  };
  for (const c of cases) if (only.includes(c.template)) want(c.name);
  return cases.filter((c) => wanted.has(c.name));
}
