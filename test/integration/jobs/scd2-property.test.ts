import { describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { freshTenant, useClient } from '../../support/stack.js';
import { type Format, catalogOf, load, readDimension, silverTable } from './scd2-support.js';
import { mulberry32, shuffledIndices } from '../../support/random.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * scd2-dim-load's history as a property: random change feeds (upserts with few distinct states, so
 * equal consecutive states meet often, and deletes), split into random batches loaded in random
 * order — so late events land inside stored intervals — must end equal to an oracle written here
 * that applies the documented semantics batch by batch: points from the stored versions plus the
 * batch's events, equal consecutive states merged, a version ends where the next point starts,
 * deletes close (or open a tombstone), the type-1 column takes the latest state's value. On Iceberg
 * (with tombstones) and Delta (without), read back by PyIceberg and delta-rs; the invariants hold.
 */

interface Event {
  id: number;
  tier: string;
  email: string;
  del: boolean;
  at: number;
  batch: number;
}
interface Version {
  from: number;
  to: number | null;
  del: boolean;
  tier: string;
  email: string;
}
interface Point {
  ts: number;
  del: boolean;
  tier: string;
  email: string;
  rank: number;
}

const BATCHES = 3;
const HOUR = 3_600_000;
const T0 = Date.parse('2026-07-01T00:00:00Z');

function feed(seed: number): Event[] {
  const rand = mulberry32(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const events: Event[] = [];
  for (const id of [1, 2, 3]) {
    const hours = [...new Set(Array.from({ length: 7 }, () => int(40)))]; // distinct instants per key
    for (const h of hours) events.push({ id, tier: ['a', 'b'][int(2)]!, email: `e${int(100)}`, del: rand() < 0.25, at: T0 + h * HOUR, batch: int(BATCHES) });
  }
  return events;
}

/** The documented semantics, one batch at a time. */
function oracle(events: Event[], order: number[], tombstones: boolean): Map<number, Version[]> {
  const dim = new Map<number, Version[]>();
  for (const b of order) {
    const batch = events.filter((e) => e.batch === b);
    for (const id of new Set(batch.map((e) => e.id))) {
      const byTs = new Map<number, Point>();
      const put = (p: Point) => {
        const cur = byTs.get(p.ts);
        if (!cur || p.rank > cur.rank) byTs.set(p.ts, p);
      };
      for (const v of dim.get(id) ?? []) {
        put({ ts: v.from, del: v.del, tier: v.tier, email: v.email, rank: 1 });
        if (v.to !== null) put({ ts: v.to, del: true, tier: v.tier, email: v.email, rank: 0 });
      }
      for (const e of batch.filter((x) => x.id === id)) put({ ts: e.at, del: e.del, tier: e.tier, email: e.email, rank: 2 });
      const points = [...byTs.values()].sort((x, y) => x.ts - y.ts);
      const latest = points.filter((p) => !p.del).at(-1);
      const sig = (p: Point) => (p.del ? '-' : p.tier);
      const kept = points.filter((p, i) => (i === 0 ? !p.del : sig(p) !== sig(points[i - 1]!)));
      const versions = kept
        .map((p, i) => ({ from: p.ts, to: kept[i + 1]?.ts ?? null, del: p.del, tier: p.tier, email: latest?.email ?? '' }))
        .filter((v) => tombstones || !v.del);
      dim.set(id, versions);
    }
  }
  return dim;
}

const rowsOf = (dim: Map<number, Version[]>) =>
  [...dim.entries()]
    .flatMap(([id, vs]) =>
      vs.map((v) => ({
        id,
        tier: v.del ? '(deleted)' : v.tier,
        email: v.email,
        from: new Date(v.from).toISOString(),
        to: v.to === null ? null : new Date(v.to).toISOString(),
        current: v.to === null,
        deleted: v.del,
      })),
    )
    .sort((a, b) => a.id - b.id || a.from.localeCompare(b.from));

const iso = (v: unknown) =>
  v === null || v === undefined
    ? null
    : new Date(
        `${String(v)
          .replace(' ', 'T')
          .replace(/(Z|\+00:00)?$/, '')}Z`,
      ).toISOString();

let client: SparkConnectClient;
useClient((c) => (client = c));

async function loadFeed(seed: number, format: Format, tombstones: boolean) {
  const events = feed(seed);
  const tenant = freshTenant();
  const values = events
    .map(
      (e) =>
        `(${e.id}, '${e.tier}', '${e.email}', '${e.del ? 'd' : 'u'}', TIMESTAMP'${new Date(e.at).toISOString().replace('T', ' ').replace('.000Z', '')}', ${e.batch})`,
    )
    .join(',\n');
  await silverTable(client, tenant, format, 'events', `SELECT * FROM VALUES ${values} AS t(id, tier, email, op, at, batch)`);
  const config = `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "events", catalog = "${catalogOf(format)}" }
dimension { natural-key = ["id"], tracked-columns = ["tier"], type1-columns = ["email"], exclude-columns = ["batch"] }
history   { sequence-by = "at", op-column = "op", tombstones = ${tombstones} }
target    { table = "dim", format = ${format}, catalog = "${catalogOf(format)}" }`;
  const order = shuffledIndices(BATCHES, mulberry32(seed * 31));
  for (const b of order) {
    const r = await load(client, tenant, config, { set: [`source.where="batch = ${b}"`], runId: `prop-${seed}-${b}` });
    expect([0, 99], `batch ${b}: ${r.message}`).toContain(r.code);
  }
  const actual = readDimension(tenant, format, 'dim').map((r) => ({
    id: Number(r.id),
    tier: r._scd_deleted ? '(deleted)' : r.tier,
    email: r.email,
    from: iso(r._scd_effective_from)!,
    to: iso(r._scd_effective_to),
    current: r._scd_current,
    deleted: r._scd_deleted,
  }));
  // Events older than an event of their key that an earlier batch loaded: late points.
  const late = events.filter((e) => events.some((o) => o.id === e.id && order.indexOf(o.batch) < order.indexOf(e.batch) && o.at > e.at)).length;
  return { expected: rowsOf(oracle(events, order, tombstones)), actual, order, late };
}

describe('scd2-dim-load equals the oracle on random change feeds in random batch order', () => {
  for (const [seed, format, tombstones] of [
    [21, 'iceberg', true],
    [22, 'delta', false],
  ] as const) {
    it(`seed ${seed} on ${format}${tombstones ? ' with tombstones' : ''}`, async () => {
      const { expected, actual, order, late } = await loadFeed(seed, format, tombstones);
      expect(expected.length).toBeGreaterThan(3);
      // The feed is adversarial: later batches bring events older than what is stored for their key.
      expect(late).toBeGreaterThan(0);
      expect(actual, `batch order ${order.join(',')}`).toEqual(expected);
      // At most one current version per key, chained intervals.
      for (const id of new Set(actual.map((r) => r.id))) {
        const vs = actual.filter((r) => r.id === id);
        expect(vs.filter((v) => v.current).length).toBeLessThanOrEqual(1);
        for (let i = 1; i < vs.length; i++) expect(vs[i - 1]!.to! <= vs[i]!.from).toBe(true);
      }
    }, 1_200_000);
  }
});
