import { describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { freshTenant, useClient } from '../../support/stack.js';
import { load, readDimension, silverTable } from './scd2-support.js';
import { testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * scd2-dim-load on the real server: v1 on Iceberg (versions, an unchanged reload, a late
 * effective-at refused), v2 on Delta (a change feed with deletes, tombstones, a late event that
 * splits an interval, type-1 columns), and a dimension changed outside the template refused before
 * anything is written. Every result is read back by PyIceberg or delta-rs.
 */
// Several loads per test, each a handful of Spark queries: more than the default 5 minutes on a loaded 2-core runner.
const LOADS_TIMEOUT = 600_000;

let client: SparkConnectClient;
useClient((c) => (client = c));

const day = (d: string) => `2026-07-${d}T00:00:00Z`;
const iso = (v: unknown) =>
  v === null || v === undefined
    ? null
    : new Date(
        String(v)
          .replace(' ', 'T')
          .replace(/(\+00:00)?$/, 'Z')
          .replace('ZZ', 'Z'),
      ).toISOString();
const history = (rows: Record<string, unknown>[], ...cols: string[]) =>
  rows.map((r) => ({
    id: Number(r.id),
    ...Object.fromEntries(cols.map((c) => [c, r[c]])),
    from: iso(r._scd_effective_from),
    to: iso(r._scd_effective_to),
    current: r._scd_current,
  }));

describe('scd2-dim-load v1 on Iceberg', () => {
  const tenant = freshTenant();
  const config = (at: string) => `
job       { template = "scd2-dim-load", schema-version = 1 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customers" }
dimension { natural-key = ["id"], tracked-columns = ["tier"], exclude-columns = ["secret"], effective-at = "${at}" }
target    { table = "dim_customers" }`;

  it(
    'opens and closes versions in one commit, writes nothing for an unchanged state, refuses a late effective-at',
    async () => {
      await silverTable(
        client,
        tenant,
        'iceberg',
        'customers',
        `SELECT * FROM VALUES (1, 'gold', 'ann', 's1'), (2, 'silver', 'bob', 's2') AS t(id, tier, name, secret)`,
      );
      const first = await load(client, tenant, config(day('01')));
      expect(first).toMatchObject({ code: 0, outputs: [{ committed: true, metrics: { inserted: 2, updated: 0, deleted: 0 } }] });

      // 1 changes tier, 2 changes only an untracked column, 3 is new.
      await silverTable(
        client,
        tenant,
        'iceberg',
        'customers',
        `SELECT * FROM VALUES (1, 'platinum', 'ann', 's1'), (2, 'silver', 'bobby', 's2'), (3, 'gold', 'cy', 's3') AS t(id, tier, name, secret)`,
      );
      const second = await load(client, tenant, config(day('02')));
      expect(second).toMatchObject({ code: 0, outputs: [{ committed: true, metrics: { inserted: 2, updated: 1, deleted: 0 } }] });
      const rows = readDimension(tenant, 'iceberg', 'dim_customers');
      expect(history(rows, 'tier', 'name')).toEqual([
        { id: 1, tier: 'gold', name: 'ann', from: day('01').replace('Z', '.000Z'), to: day('02').replace('Z', '.000Z'), current: false },
        { id: 1, tier: 'platinum', name: 'ann', from: day('02').replace('Z', '.000Z'), to: null, current: true },
        { id: 2, tier: 'silver', name: 'bob', from: day('01').replace('Z', '.000Z'), to: null, current: true },
        { id: 3, tier: 'gold', name: 'cy', from: day('02').replace('Z', '.000Z'), to: null, current: true },
      ]);
      expect(rows.every((r) => !('secret' in r))).toBe(true);
      expect(new Set(rows.map((r) => String(r._dim_key))).size).toBe(4);

      const again = await load(client, tenant, config(day('02')));
      expect(again).toMatchObject({ code: 0, outputs: [{ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0 } }] });
      expect(readDimension(tenant, 'iceberg', 'dim_customers')).toEqual(rows);

      await silverTable(client, tenant, 'iceberg', 'customers', `SELECT * FROM VALUES (1, 'bronze', 'ann', 's1') AS t(id, tier, name, secret)`);
      const late = await load(client, tenant, config('2026-06-30T00:00:00Z'));
      expect(late.code).toBe(65);
      expect(late.message).toMatch(/already have a version starting after this load's effective-at, e\.g\. \{"id":1/);
      expect(readDimension(tenant, 'iceberg', 'dim_customers')).toEqual(rows);

      // A dimension changed outside the template (a second current version) is refused before any write.
      await client.execute(
        compileCommandPlan(
          testCommand(
            `INSERT INTO lake.${tenant.id}_gold.dim_customers SELECT id, tier, name, _dim_key + 1, _scd_effective_from + INTERVAL 1 HOUR, NULL, true, false FROM lake.${tenant.id}_gold.dim_customers WHERE id = 2`,
          ),
          { reveal: true },
        ),
      );
      const corrupted = readDimension(tenant, 'iceberg', 'dim_customers');
      await silverTable(client, tenant, 'iceberg', 'customers', `SELECT * FROM VALUES (1, 'diamond', 'ann', 's1') AS t(id, tier, name, secret)`);
      const refused = await load(client, tenant, config(day('03')));
      expect(refused.code).toBe(65);
      expect(refused.message).toMatch(
        /already breaks the SCD2 invariants \(it was changed outside this template\); nothing was written: multiple current \(2\), overlaps \(1\), e\.g\. key \{"id":2\}/,
      );
      expect(readDimension(tenant, 'iceberg', 'dim_customers')).toEqual(corrupted);
    },
    LOADS_TIMEOUT,
  );
});

describe('scd2-dim-load: instants keep their microseconds', () => {
  const tenant = freshTenant();
  const config = (at: string) => `
job       { template = "scd2-dim-load", schema-version = 1 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "accounts" }
dimension { natural-key = ["id"], effective-at = "${at}" }
target    { table = "dim_accounts" }`;

  it(
    'a version opened at .100100 starts there, and a load 300 µs later is the next version (once a JavaScript Date made it .100000 and refused it, 65 SCD2_CONFLICT)',
    async () => {
      await silverTable(client, tenant, 'iceberg', 'accounts', `SELECT * FROM VALUES (1, 'open') AS t(id, state)`);
      expect(await load(client, tenant, config('2026-07-05T06:00:00.100100Z'))).toMatchObject({ code: 0, outputs: [{ metrics: { inserted: 1 } }] });
      await silverTable(client, tenant, 'iceberg', 'accounts', `SELECT * FROM VALUES (1, 'closed') AS t(id, state)`);
      expect(await load(client, tenant, config('2026-07-05T06:00:00.100400Z'))).toMatchObject({
        code: 0,
        outputs: [{ committed: true, metrics: { inserted: 1, updated: 1 } }],
      });
      // Read back by PyIceberg, to the microsecond.
      const rows = readDimension(tenant, 'iceberg', 'dim_accounts').map((r) => [r.state, String(r._scd_effective_from), String(r._scd_effective_to)]);
      expect(rows).toEqual([
        ['open', expect.stringMatching(/^2026-07-05[ T]06:00:00\.100100/), expect.stringMatching(/^2026-07-05[ T]06:00:00\.100400/)],
        ['closed', expect.stringMatching(/^2026-07-05[ T]06:00:00\.100400/), 'null'],
      ]);
    },
    LOADS_TIMEOUT,
  );
});

describe('scd2-dim-load v2 on Delta: a change feed', () => {
  const tenant = freshTenant();
  const config = `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customer_events", format = delta, catalog = "spark_catalog", where = "batch = 1" }
dimension { natural-key = ["id"], tracked-columns = ["tier"], type1-columns = ["email"], exclude-columns = ["batch"] }
history   { sequence-by = "at", op-column = "op", tombstones = true }
target    { table = "dim_customers", format = delta, catalog = "spark_catalog" }`;
  const events = `SELECT id, tier, email, op, CAST(at AS TIMESTAMP) AS at, batch FROM VALUES
      (1, 'gold',     'a@1', 'u', '2026-07-01 00:00:00', 1),
      (1, 'platinum', 'a@2', 'u', '2026-07-05 00:00:00', 1),
      (2, 'silver',   'b@1', 'u', '2026-07-01 00:00:00', 1),
      (2, 'silver',   'b@1', 'd', '2026-07-04 00:00:00', 1),
      (1, 'bronze',   'a@0', 'u', '2026-07-03 00:00:00', 2),
      (2, 'gold',     'b@2', 'u', '2026-07-02 00:00:00', 2),
      (3, 'gold',     'c@1', 'u', '2026-07-02 00:00:00', 2)
    AS t(id, tier, email, op, at, batch)`;
  const at = (d: string) => `2026-07-0${d}T00:00:00.000Z`;

  it(
    'deletes open tombstones, late events split the interval they fall into, type-1 values are the latest in every version',
    async () => {
      await silverTable(client, tenant, 'delta', 'customer_events', events);
      expect(await load(client, tenant, config)).toMatchObject({ code: 0, outputs: [{ committed: true, metrics: { inserted: 4 } }] });
      expect(await load(client, tenant, config, { set: ['source.where="batch = 2"'] })).toMatchObject({ code: 0, outputs: [{ committed: true }] });
      const rows = readDimension(tenant, 'delta', 'dim_customers');
      expect(history(rows, 'tier', 'email', '_scd_deleted')).toEqual([
        { id: 1, tier: 'gold', email: 'a@2', _scd_deleted: false, from: at('1'), to: at('3'), current: false },
        { id: 1, tier: 'bronze', email: 'a@2', _scd_deleted: false, from: at('3'), to: at('5'), current: false },
        { id: 1, tier: 'platinum', email: 'a@2', _scd_deleted: false, from: at('5'), to: null, current: true },
        { id: 2, tier: 'silver', email: 'b@2', _scd_deleted: false, from: at('1'), to: at('2'), current: false },
        { id: 2, tier: 'gold', email: 'b@2', _scd_deleted: false, from: at('2'), to: at('4'), current: false },
        { id: 2, tier: 'silver', email: 'b@2', _scd_deleted: true, from: at('4'), to: null, current: true },
        { id: 3, tier: 'gold', email: 'c@1', _scd_deleted: false, from: at('2'), to: null, current: true },
      ]);
      // Replaying both batches changes nothing.
      for (const b of [1, 2])
        expect(await load(client, tenant, config, { set: [`source.where="batch = ${b}"`] })).toMatchObject({ code: 0, outputs: [{ committed: false }] });
      // An event that contradicts the stored history at the same instant is refused; the table is unchanged.
      await silverTable(
        client,
        tenant,
        'delta',
        'customer_events',
        `SELECT 1 AS id, 'iron' AS tier, 'a@9' AS email, 'u' AS op, TIMESTAMP'2026-07-03 00:00:00' AS at, 3 AS batch`,
      );
      const conflict = await load(client, tenant, config, { set: ['source.where="batch = 3"'] });
      expect(conflict.code).toBe(65);
      expect(conflict.message).toMatch(/say something else than the dimension holds/);
      expect(readDimension(tenant, 'delta', 'dim_customers')).toEqual(rows);
    },
    LOADS_TIMEOUT,
  );
});

describe.each(['iceberg', 'delta'] as const)('scd2-dim-load v2 close-missing on %s: full snapshots', (format) => {
  const tenant = freshTenant();
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const config = (d: string) => `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customers", format = ${format}, catalog = "${catalog}" }
dimension { natural-key = ["id"], tracked-columns = ["tier"], effective-at = "${day(d)}" }
history   { close-missing = true }
target    { table = "dim_customers", format = ${format}, catalog = "${catalog}" }`;
  const snapshot = (...rows: [number, string][]) =>
    silverTable(client, tenant, format, 'customers', `SELECT * FROM VALUES ${rows.map(([id, tier]) => `(${id}, '${tier}')`).join(', ')} AS t(id, tier)`);
  const at = (d: string) => day(d).replace('Z', '.000Z');

  it(
    'a key missing from the snapshot closes its current version at effective-at without a new version; a returning key opens a new one; reruns write nothing',
    async () => {
      await snapshot([1, 'gold'], [2, 'silver'], [3, 'bronze']);
      expect(await load(client, tenant, config('01'))).toMatchObject({
        code: 0,
        outputs: [{ committed: true, metrics: { inserted: 3, updated: 0, deleted: 0 } }],
      });

      // 2 is missing: its version ends at the snapshot's effective time, nothing opens for it.
      await snapshot([1, 'gold'], [3, 'bronze']);
      expect(await load(client, tenant, config('02'))).toMatchObject({
        code: 0,
        outputs: [{ committed: true, metrics: { inserted: 0, updated: 1, deleted: 0 } }],
      });
      const closed = readDimension(tenant, format, 'dim_customers');
      expect(history(closed, 'tier', '_scd_deleted')).toEqual([
        { id: 1, tier: 'gold', _scd_deleted: false, from: at('01'), to: null, current: true },
        { id: 2, tier: 'silver', _scd_deleted: false, from: at('01'), to: at('02'), current: false },
        { id: 3, tier: 'bronze', _scd_deleted: false, from: at('01'), to: null, current: true },
      ]);
      // The same snapshot again: the closed key stays closed, nothing is committed.
      expect(await load(client, tenant, config('02'))).toMatchObject({
        code: 0,
        outputs: [{ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0 } }],
      });
      expect(readDimension(tenant, format, 'dim_customers')).toEqual(closed);

      // 2 returns (same tier: still a new version, the gap stays), 3 goes missing, 1 changes.
      await snapshot([1, 'platinum'], [2, 'silver']);
      expect(await load(client, tenant, config('03'))).toMatchObject({
        code: 0,
        outputs: [{ committed: true, metrics: { inserted: 2, updated: 2, deleted: 0 } }],
      });
      const rows = readDimension(tenant, format, 'dim_customers');
      expect(history(rows, 'tier', '_scd_deleted')).toEqual([
        { id: 1, tier: 'gold', _scd_deleted: false, from: at('01'), to: at('03'), current: false },
        { id: 1, tier: 'platinum', _scd_deleted: false, from: at('03'), to: null, current: true },
        { id: 2, tier: 'silver', _scd_deleted: false, from: at('01'), to: at('02'), current: false },
        { id: 2, tier: 'silver', _scd_deleted: false, from: at('03'), to: null, current: true },
        { id: 3, tier: 'bronze', _scd_deleted: false, from: at('01'), to: at('03'), current: false },
      ]);
      expect(new Set(rows.map((r) => String(r._dim_key))).size).toBe(rows.length);
      expect(await load(client, tenant, config('03'))).toMatchObject({
        code: 0,
        outputs: [{ committed: false, metrics: { inserted: 0, updated: 0, deleted: 0 } }],
      });
      expect(readDimension(tenant, format, 'dim_customers')).toEqual(rows);
    },
    // Five loads and three snapshots: twice the others' budget on a loaded 2-core runner.
    2 * LOADS_TIMEOUT,
  );
});

describe.each(['iceberg', 'delta'] as const)('scd2-dim-load on %s: two loads of one dimension at once', (format) => {
  const tenant = freshTenant();
  const catalog = format === 'iceberg' ? 'lake' : 'spark_catalog';
  const config = (at: string) => `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customers", format = ${format}, catalog = "${catalog}" }
dimension { natural-key = ["id"], effective-at = "${at}" }
target    { table = "dim_customers", format = ${format}, catalog = "${catalog}" }`;

  it(
    'paused before their MERGE and let go together: one commits, the other commits too or exits 75; the reruns converge and the invariants hold',
    async () => {
      await silverTable(client, tenant, format, 'customers', `SELECT * FROM VALUES (1, 'gold'), (2, 'silver') AS t(id, tier)`);
      expect(await load(client, tenant, config(day('01')))).toMatchObject({ code: 0 });
      await silverTable(client, tenant, format, 'customers', `SELECT * FROM VALUES (1, 'platinum'), (2, 'silver'), (3, 'new') AS t(id, tier)`);
      let arrived = 0;
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      const gate = async (step: { id: string }) => {
        if (step.id !== 'merge') return;
        if (++arrived === 2) open();
        await opened;
      };
      // Each load runs on a session of its own, as two runner processes would.
      const runs = await Promise.all([
        load(client, tenant, config(day('02')), { beforeStep: gate }),
        load(client, tenant, config(day('03')), { beforeStep: gate }),
      ]);
      expect(
        runs.map((r) => r.code),
        JSON.stringify(runs),
      ).toSatisfy((codes: number[]) => codes.every((c) => c === 0 || c === 75));
      for (const [i, r] of runs.entries()) if (r.code === 75) expect((await load(client, tenant, config(day(i === 0 ? '02' : '03')))).code).toBe(0);
      const rows = readDimension(tenant, format, 'dim_customers');
      const current = rows.filter((r) => r._scd_current === true);
      expect(current.map((r) => Number(r.id)).sort(), JSON.stringify(rows)).toEqual([1, 2, 3]);
      expect(new Set(rows.map((r) => String(r._dim_key))).size, JSON.stringify(rows)).toBe(rows.length);
      // A later load finds the dimension consistent.
      expect((await load(client, tenant, config(day('04')))).code, JSON.stringify(rows)).toBe(0);
    },
    LOADS_TIMEOUT,
  );
});
