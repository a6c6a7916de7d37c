import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { deltaLastCommit, freshTenant, icebergSnapshotSummary, useClient } from '../../support/stack.js';
import { type Format, catalogOf, platformConf, readDimension } from './scd2-support.js';
import { runInProcess } from '../../support/in-process.js';
import { tempFiles } from '../../support/files.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * scd2-dim-load v2 with `source.read = incremental`, table-driven over the source's and the
 * dimension's format (Iceberg incremental scans, Delta's change data feed): each load applies only
 * the events of the source commits since the position the dimension recorded, in order; a key
 * without events keeps its version (not closed and reopened). The dimension and the position stamp
 * of its MERGE's commit are read back by PyIceberg or delta-rs and compared with an oracle.
 */
const LOADS_TIMEOUT = 600_000;

let client: SparkConnectClient;
useClient((c) => (client = c));

const sql = (text: string) => client.execute(compileCommandPlan(testCommand(text), { reveal: true }));
const at = (d: string) => `2026-07-${d}T00:00:00.000Z`;
const iso = (v: unknown) =>
  v === null || v === undefined
    ? null
    : new Date(
        String(v)
          .replace(' ', 'T')
          .replace(/(\+00:00)?$/, 'Z')
          .replace('ZZ', 'Z'),
      ).toISOString();

describe.each(['iceberg', 'delta'] as const)('scd2-dim-load v2, source.read = incremental, %s', (format: Format) => {
  const tenant = freshTenant();
  const catalog = catalogOf(format);
  const source = `${catalog}.${tenant.id}_silver.customer_events`;
  const dim = `dim_${format}`;
  const key = `read.${source}`;
  const config = `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
source    { table = "customer_events", format = ${format}, catalog = "${catalog}", read = incremental }
dimension { natural-key = ["id"], tracked-columns = ["tier"] }
history   { sequence-by = "at", op-column = "op" }
target    { table = "${dim}", format = ${format}, catalog = "${catalog}" }`;
  const append = (...events: [id: number, tier: string, op: string, day: string][]) =>
    sql(
      `INSERT INTO ${source} SELECT id, tier, op, CAST(at AS TIMESTAMP) FROM VALUES ${events.map(([id, tier, op, d]) => `(${id}, '${tier}', '${op}', '2026-07-${d} 00:00:00')`).join(', ')} AS t(id, tier, op, at)`,
    );
  const position = () =>
    format === 'iceberg'
      ? icebergSnapshotSummary(`${tenant.id}_gold`, dim)[`lakehouse-jobs.${key}`]
      : (JSON.parse(String(deltaLastCommit(`${tenant.root}/gold/${dim}`).userMetadata)) as { 'lakehouse-jobs': Record<string, string> })['lakehouse-jobs'][key];
  const head = async (): Promise<string> => {
    const q = format === 'iceberg' ? `SELECT CAST(snapshot_id AS STRING) AS v FROM ${source}.refs WHERE name = 'main'` : `DESCRIBE HISTORY ${source} LIMIT 1`;
    const r = await client.execute(compileRelationPlan(testQuery(q).rel, { reveal: true }));
    const [row] = arrowRows(r.table!);
    return String(row!.v ?? row!.version);
  };
  const history = () =>
    readDimension(tenant, format, dim).map((r) => ({
      id: Number(r.id),
      tier: r.tier,
      from: iso(r._scd_effective_from),
      to: iso(r._scd_effective_to),
      current: r._scd_current,
    }));
  const out = (r: Awaited<ReturnType<typeof load>>) => r.outputs.find((o) => String(o.table).endsWith(`_gold.${dim}`));
  // A load as the runner runs it (commit stamps and all); 99 when it was skipped.
  const load = async () => {
    const dir = tempFiles({ 'job.conf': config, 'platform.conf': platformConf(tenant) });
    const o = await runInProcess({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env: {} });
    return {
      code: o.code === 0 && o.report.skipped ? 99 : o.code,
      message: o.error?.message,
      outputs: o.report.outputs as unknown as Record<string, unknown>[],
    };
  };

  it(
    'a first load reads everything; a later one applies only the new commits, in order; a key without events keeps its version; nothing new is 99',
    async () => {
      await sql(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${tenant.id}_silver`);
      await sql(
        `CREATE TABLE ${source} (id INT, tier STRING, op STRING, at TIMESTAMP) USING ${format} LOCATION '${tenant.root}/silver/customer_events' TBLPROPERTIES (${format === 'iceberg' ? `'format-version' = '2'` : `'delta.enableChangeDataFeed' = 'true'`})`,
      );
      await append([1, 'gold', 'u', '01'], [2, 'silver', 'u', '01']);
      const first = await load();
      const s1 = await head();
      expect(first.code, first.message).toBe(0);
      expect(out(first)).toMatchObject({ read: { source, mode: 'full', to: s1, reason: 'first run' }, metrics: { inserted: 2, updated: 0, deleted: 0 } });
      expect(position()).toBe(s1);
      expect((await load()).code).toBe(99);

      // Two changes of key 1 in one batch, applied in their order; key 3 is new; key 2 has no event.
      await append([1, 'platinum', 'u', '02'], [3, 'gold', 'u', '02']);
      await append([1, 'gold', 'u', '03']);
      const s2 = await head();
      const second = await load();
      expect(second.code, second.message).toBe(0);
      expect(out(second)).toMatchObject({ read: { source, mode: 'incremental', from: s1, to: s2 }, metrics: { inserted: 3, updated: 1, deleted: 0 } });
      expect(position()).toBe(s2);
      expect(history()).toEqual([
        { id: 1, tier: 'gold', from: at('01'), to: at('02'), current: false },
        { id: 1, tier: 'platinum', from: at('02'), to: at('03'), current: false },
        { id: 1, tier: 'gold', from: at('03'), to: null, current: true },
        { id: 2, tier: 'silver', from: at('01'), to: null, current: true },
        { id: 3, tier: 'gold', from: at('02'), to: null, current: true },
      ]);

      // A batch of only an unchanged state (key 2 again at silver) changes no version: its position is recorded alone.
      await append([2, 'silver', 'u', '04']);
      const s3 = await head();
      const third = await load();
      expect(third.code, third.message).toBe(0);
      expect(out(third)).toMatchObject({ read: { mode: 'incremental', from: s2, to: s3 }, metrics: { inserted: 0, updated: 0, deleted: 0 } });
      expect(position()).toBe(s3);
      expect(history()).toHaveLength(5);
      expect((await load()).code).toBe(99);

      // A delete event closes the key's version.
      await append([3, 'gold', 'd', '05']);
      const fourth = await load();
      expect(fourth.code, fourth.message).toBe(0);
      expect(out(fourth)).toMatchObject({ read: { mode: 'incremental', from: s3 }, metrics: { inserted: 0, updated: 1, deleted: 0 } });
      expect(history().find((r) => r.id === 3)).toEqual({ id: 3, tier: 'gold', from: at('02'), to: at('05'), current: false });
    },
    LOADS_TIMEOUT,
  );
});
