import { join } from 'node:path';
import { factsOf } from '../../support/facts.js';
import { toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError, DataError } from '../../../src/core/errors.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import type { Step } from '../../../src/jobs/template.js';
import { tempFiles } from '../../support/files.js';

/** scd2-dim-load without Spark: configs, refusals at their paths, the plan's shape and how each step's rows are read. */

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

const v1 = `
job       { template = "scd2-dim-load", schema-version = 1, name = "acme-dim-customers" }
tenant    { id = "acme", storage-root = "file:///lake/acme" }
source    { table = "customers", where = "country = 'DE'" }
dimension { natural-key = ["id"], tracked-columns = ["name", "tier"], exclude-columns = ["raw"], effective-at = "2026-07-09T00:00:00Z" }
target    { table = "dim_customers" }
`;

const v2 = `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "acme", storage-root = "file:///lake/acme" }
source    { table = "customers_cdc", layer = bronze, format = iceberg, catalog = "lake", snapshot-date = "2026-07-09" }
dimension { natural-key = ["id"], tracked-columns = ["tier"], type1-columns = ["email"] }
history   { sequence-by = "changed_at", delete-when = "op = 'D'", tombstones = true }
target    { table = "dim_customers", format = delta, catalog = "spark_catalog" }
`;

async function load(config: string, opts: { set?: string[]; logicalDate?: string } = {}) {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': platform });
  return loadJob({
    configFile: join(dir, 'job.conf'),
    envFile: join(dir, 'platform.conf'),
    overrides: opts.set ?? [],
    env: {},
    runId: 'test-run',
    ...(opts.logicalDate ? { logicalDate: opts.logicalDate } : {}),
  });
}

async function issues(config: string, set: string[] = []) {
  const err = await load(config, { set }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).exitCode).toBe(78);
  return Object.fromEntries((err as ConfigError).issues.map((i) => [i.path, i.message]));
}

const plans = (steps: readonly Step[]) => JSON.stringify(steps.map((s) => toJson(PlanSchema, stepPlan(s, { reveal: false }))));
/**
 * Where each step after check-batch reads the dimension from: the live table, or what an earlier
 * step kept (the stored versions, the points, the new state); the MERGE must read the live table:
 * it is judged at its commit.
 */
function changeSetReads(steps: readonly Step[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const id of ['check-dimension', 'check-history', 'check-result', 'measure', 'merge']) {
    const json = plans([step(steps, id)]);
    const kept = ['stored', 'points', 'new_state'].filter((name) => json.includes(`"__scd_${name}"`));
    out[id] = [...(json.includes('acme_gold`.`dim_customers') ? ['table'] : []), ...kept];
  }
  return out;
}

const step = (steps: readonly Step[], id: string) => {
  const s = steps.find((x) => x.id === id);
  if (!s) throw new Error(`no step ${id}`);
  return s;
};
const interpret = (steps: readonly Step[], id: string, row: Record<string, unknown>) => {
  const s = step(steps, id);
  if (s.kind !== 'query' && s.kind !== 'materialize') throw new Error(`${id} is not a query`);
  return s.interpret([row]);
};

describe('scd2-dim-load configs', () => {
  it('v1: the seed shape, read from the tenant silver table into its gold layer', async () => {
    const job = await load(v1);
    expect(job.version.version).toBe(1);
    const steps = job.plan.steps;
    expect(steps.map((s) => s.id)).toEqual([
      'check-source-columns',
      'check-batch',
      'create-namespace',
      'create-table',
      'check-schema',
      'check-dimension',
      'check-history',
      'check-result',
      'measure',
      'merge',
      'read-snapshot',
    ]);
    const json = plans(steps);
    expect(json).toContain('"targetTableName":"`lake`.`acme_gold`.`dim_customers`"');
    expect(json).toContain('"unparsedIdentifier":"`lake`.`acme_silver`.`customers`"');
    expect(json).toContain('CREATE NAMESPACE IF NOT EXISTS `lake`.`acme_gold`');
    // The table lives in the tenant's gold layer.
    expect(step(steps, 'create-table')).toMatchObject({ location: 'file:///lake/acme/gold/dim_customers', configPath: 'target.table' });
    // Only check-batch carries source.where (judged by the tenant read policy): it keeps the batch's
    // rows for the run, and no later step reads the source or the filter again.
    expect(steps.filter((s) => s.untrusted).map((s) => s.id)).toEqual(['check-batch']);
    expect(step(steps, 'check-batch')).toMatchObject({ kind: 'materialize', untrusted: ['source.where'] });
    const later = steps.slice(steps.findIndex((s) => s.id === 'check-batch') + 1);
    // check-source-columns before it analyses the source's columns without the filter.
    expect(plans([step(steps, 'check-source-columns')])).not.toContain('country');
    expect(plans([step(steps, 'check-batch')])).toContain('country');
    for (const s of later) {
      expect(plans([s]), s.id).not.toContain('acme_silver');
      expect(plans([s]), s.id).not.toContain('country');
    }
    expect(changeSetReads(steps)).toEqual({
      'check-dimension': ['table'],
      'check-history': ['stored'],
      'check-result': ['points'],
      measure: ['stored', 'new_state'],
      merge: ['table'],
    });
    // effective-at travels as a timestamp literal.
    expect(json).toContain('"timestamp":"1783555200000000"');
  });

  it('v1 migrates into the v2 spec: the same plan as v2 with late-events = refuse', async () => {
    const asV2 = v1.replace('schema-version = 1', 'schema-version = 2').replace('target    {', 'history { late-events = refuse }\ntarget    {');
    expect(plans((await load(v1)).plan.steps)).toEqual(plans((await load(asV2)).plan.steps));
    // A v2 that places late events sends the same queries; only how check-history's rows are read differs.
    const placing = asV2.replace('late-events = refuse', 'late-events = place');
    const [a, b] = [(await load(asV2)).plan.steps, (await load(placing)).plan.steps];
    expect(plans(a)).toEqual(plans(b));
    expect(interpret(a, 'check-history', { late: 1, late_example: '{"id":1}' }).fail).toBeInstanceOf(DataError);
    expect(interpret(b, 'check-history', { late: 1, late_example: '{"id":1}' }).fail).toBeUndefined();
  });

  it('v2: a bronze change feed into a Delta dimension, with history.delete-when judged by the policy', async () => {
    const job = await load(v2);
    const steps = job.plan.steps;
    expect(steps.map((s) => s.id)).toEqual([
      'probe-partitions',
      'check-source-columns',
      'check-batch',
      'create-namespace',
      'create-table',
      'check-schema',
      'check-dimension',
      'check-history',
      'check-result',
      'measure',
      'merge',
      'read-version',
    ]);
    expect(steps.filter((s) => s.untrusted).map((s) => s.id)).toEqual(['check-batch']);
    expect(step(steps, 'check-batch').untrusted).toEqual(['history.delete-when']);
    for (const s of steps.slice(steps.findIndex((s) => s.id === 'check-batch') + 1)) expect(plans([s]), s.id).not.toContain('customers_cdc');
    const json = plans(steps);
    expect(json).toContain('"targetTableName":"`spark_catalog`.`acme_gold`.`dim_customers`"');
    expect(json).toContain('`lake`.`acme_bronze`.`customers_cdc`');
    expect(job.plan.sessionConf).toMatchObject({ 'spark.sql.legacy.charVarcharAsString': 'true' });
  });

  it('effective-at defaults to the logical date at 00:00 UTC', async () => {
    const noAt = v1.replace(', effective-at = "2026-07-09T00:00:00Z"', '');
    const job = await load(noAt, { logicalDate: '2026-07-10' });
    expect(plans(job.plan.steps)).toContain(`"timestamp":"${Date.parse('2026-07-10T00:00:00Z') * 1000}"`);
  });

  it('refuses a column in two roles, reserved names and a malformed instant, each at its path', async () => {
    const byPath = await issues(
      v1
        .replace('tracked-columns = ["name", "tier"]', 'tracked-columns = ["id", "_scd_current"]')
        .replace('exclude-columns = ["raw"]', 'exclude-columns = ["__scd_p"]')
        .replace('2026-07-09T00:00:00Z', '2026-07-09 00:00'),
    );
    expect(byPath['dimension.tracked-columns[0]']).toMatch(/already in dimension.natural-key/);
    expect(byPath['dimension.tracked-columns[1]']).toMatch(/reserved/);
    expect(byPath['dimension.exclude-columns[0]']).toMatch(/reserved/);
    expect(byPath['dimension.effective-at']).toMatch(/instant with a zone/);
  });

  it('compares column names as Spark resolves them: case-insensitively', async () => {
    const byPath = await issues(
      v1
        .replace('tracked-columns = ["name", "tier"]', 'tracked-columns = ["ID", "_SCD_Current"]')
        .replace('exclude-columns = ["raw"]', 'exclude-columns = ["__Scd_P"]'),
    );
    expect(byPath['dimension.tracked-columns[0]']).toMatch(/already in dimension.natural-key/);
    expect(byPath['dimension.tracked-columns[1]']).toMatch(/reserved/);
    expect(byPath['dimension.exclude-columns[0]']).toMatch(/reserved/);
  });

  it("refuses a source column named like the template's own (65 at source.table), from its analysed columns", async () => {
    const job = await load(v1);
    const check = job.plan.steps.find((s) => s.id === 'check-source-columns') as Extract<Step, { kind: 'checkColumns' }>;
    expect(check.untrusted).toBeUndefined();
    const columns = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    expect(check.interpret(columns('id', 'name', 'tier', '_scd_note', '_dim_keys', 'scd_current'))).toEqual({});
    for (const bad of ['_Dim_Key', '_scd_effective_from', '__scd_ctrl', '__SCD_anything']) {
      const e = check.interpret(columns('id', 'name', 'tier', bad)).fail as DataError;
      expect(e).toBeInstanceOf(DataError);
      expect(e.exitCode).toBe(65);
      expect(e.report()).toMatchObject({ code: 'SOURCE_COLUMN_RESERVED', path: 'source.table' });
      expect(e.message).toContain(`source.table: lake.acme_silver.customers has column(s) "${bad}" named like scd2-dim-load's own columns`);
    }
  });

  it('refuses a key or tracked column the source does not have: 78 at its path with "did you mean", before anything is written', async () => {
    const job = await load(v1);
    const check = job.plan.steps.find((s) => s.id === 'check-source-columns') as Extract<Step, { kind: 'checkColumns' }>;
    const columns = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    const e = check.interpret(columns('customer_id', 'Name', 'tiers')).fail as ConfigError;
    expect(e.exitCode).toBe(78);
    expect(e.issues).toEqual([
      { path: 'dimension.natural-key[0]', message: 'column "id" is not a column of lake.acme_silver.customers' },
      { path: 'dimension.tracked-columns[1]', message: 'column "tier" is not a column of lake.acme_silver.customers; did you mean "tiers"?' },
    ]);
  });

  it('refuses history options that do not fit together', async () => {
    const byPath = await issues(
      v2
        .replace('dimension { natural-key = ["id"]', 'dimension { effective-at = "2026-07-09T00:00:00Z", natural-key = ["id"]')
        .replace('tombstones = true', 'tombstones = true, close-missing = true, op-column = "op", delete-values = ["D"]'),
    );
    expect(byPath['dimension.effective-at']).toMatch(/snapshot sources/);
    expect(byPath['history.close-missing']).toMatch(/full snapshots/);
    expect(byPath['history.delete-when']).toMatch(/either/);
    const noOp = await issues(v2.replace('delete-when = "op = \'D\'"', 'delete-values = ["D"]'));
    expect(noOp['history.delete-values']).toMatch(/needs history.op-column/);
  });

  it('refuses source options of the other layer and unknown keys with a hint', async () => {
    const silverParquet = await issues(v2.replace('layer = bronze, format = iceberg, catalog = "lake", ', 'format = parquet, '));
    expect(silverParquet['source.format']).toMatch(/iceberg or delta/);
    expect(silverParquet['source.snapshot-date']).toMatch(/bronze/);
    const parquetCatalog = await issues(v2.replace('format = iceberg, ', ''));
    expect(parquetCatalog['source.catalog']).toMatch(/parquet files need no catalog/);
    const typo = await issues(v1.replace('natural-key', 'natual-key'));
    expect(typo['dimension.natual-key']).toMatch(/did you mean "natural-key"/);
  });

  it('refuses an expression outside the grammar at its path (78)', async () => {
    const byPath = await issues(v1, [`source.where="java_method('java.lang.System', 'getenv', 'HOME') IS NOT NULL"`]);
    expect(Object.keys(byPath)).toEqual(['source.where']);
  });

  it('refuses a catalog holding the other format, at target.format', async () => {
    const byPath = await issues(v2.replace('catalog = "spark_catalog"', 'catalog = "lake"'));
    expect(byPath['target.format']).toMatch(/holds iceberg tables/);
  });
});

describe('scd2-dim-load steps read their rows', () => {
  it('check-batch: no rows skips (99), a NULL key or ambiguous rows fail (65)', async () => {
    const { steps } = (await load(v1)).plan;
    expect(interpret(steps, 'check-batch', { rows: 0 }).skip).toMatch(/no rows in lake.acme_silver.customers matching source.where/);
    const nulls = interpret(steps, 'check-batch', { rows: 3, null_groups: 1, null_example: '{"at":"…"}' }).fail;
    expect(nulls).toBeInstanceOf(DataError);
    expect(nulls).toMatchObject({ exitCode: 65, code: 'SCD2_NULL_KEY' });
    expect(interpret(steps, 'check-batch', { rows: 3, null_groups: 0, ties: 2, tie_example: '{"id":1}' }).fail).toMatchObject({
      exitCode: 65,
      code: 'SCD2_AMBIGUOUS',
    });
    expect(interpret(steps, 'check-batch', { rows: 3, null_groups: 0, ties: 0 })).toEqual({ metrics: { rowsRead: 3 } });
  });

  it('check-dimension, check-history and check-result: a breach or a conflict fails before the MERGE (65)', async () => {
    const { steps } = (await load(v1)).plan;
    const stored = interpret(steps, 'check-dimension', { multiple_current: 2, overlaps: 1, example: '{"id":7}' }).fail;
    expect(stored).toMatchObject({ exitCode: 65, code: 'SCD2_INVARIANT' });
    expect(stored?.message).toMatch(/already breaks the SCD2 invariants.*multiple current \(2\), overlaps \(1\), e.g. key \{"id":7\}/);
    expect(interpret(steps, 'check-dimension', { multiple_current: 0, gaps: 0, duplicate_dim_keys: 0 })).toEqual({});
    expect(interpret(steps, 'check-result', { empty_interval: 1, example: '{"id":1}' }).fail).toMatchObject({
      code: 'SCD2_INVARIANT',
      message: expect.stringMatching(/new history .* would break/),
    });
    expect(interpret(steps, 'check-history', { conflicts: 1, conflict_example: '{"id":1}' }).fail).toMatchObject({ exitCode: 65, code: 'SCD2_CONFLICT' });
    expect(interpret(steps, 'check-history', { late: 1, late_example: '{"id":1}' }).fail).toMatchObject({ exitCode: 65, code: 'SCD2_LATE' });
  });

  it('measure counts the changes; an unchanged state sends no MERGE', async () => {
    const { steps } = (await load(v1)).plan;
    expect(interpret(steps, 'measure', { inserted: 1, updated: 1, deleted: 0 })).toEqual({
      output: {
        table: 'lake.acme_gold.dim_customers',
        format: 'iceberg',
        location: 'file:///lake/acme/gold/dim_customers',
        committed: true,
        metrics: { inserted: 1, updated: 1, deleted: 0 },
      },
      metrics: { rowsWritten: 2 },
    });
    expect(interpret(steps, 'measure', { inserted: 0, updated: 0, deleted: 0 }).output).toMatchObject({ committed: false });
    const merge = step(steps, 'merge');
    expect(merge.when!(factsOf(steps, { measure: [{ inserted: 0, updated: 0, deleted: 0 }] }))).toBe(false);
    expect(merge.when!(factsOf(steps, { measure: [{ inserted: 0, updated: 1, deleted: 0 }] }))).toBe(true);
  });
});

describe('scd2-dim-load source.read', () => {
  const incremental = (source: string, history = 'history { sequence-by = "changed_at", op-column = "op" }') => `
job       { template = "scd2-dim-load", schema-version = 2 }
tenant    { id = "acme", storage-root = "file:///lake/acme" }
source    { table = "customer_events", ${source} }
dimension { natural-key = ["id"], tracked-columns = ["tier"] }
${history}
target    { table = "dim_customers", format = delta, catalog = "spark_catalog" }
`;

  it('incremental: the position steps first, the MERGE stamps the position, a batch changing nothing records it alone', async () => {
    const job = await load(incremental('format = iceberg, catalog = lake, read = incremental'));
    const ids = job.plan.steps.map((s) => s.id);
    expect(ids.slice(0, 4)).toEqual(['read-position', 'read-source-head', 'check-source-columns', 'check-batch']);
    expect(ids.slice(-3)).toEqual(['merge', 'record-position', 'read-version']);
    const KEY = 'read.lake.acme_silver.customer_events';
    const row = { head: '30', stamps: 1, latest_stamp: '20', consumed: '20', appends: 1, rewrites: 0 };
    const changed = factsOf(job.plan.steps, { 'read-position': [row], measure: [{ inserted: 1, updated: 1, deleted: 0 }] });
    expect(job.plan.bind!(changed)).toEqual({ 'source.from': '20', 'source.to': '30' });
    expect(step(job.plan.steps, 'merge').stamp!(changed)).toEqual({ [KEY]: '30' });
    expect(step(job.plan.steps, 'merge').when!(changed)).toBe(true);
    expect(step(job.plan.steps, 'record-position').when!(changed)).toBe(false);
    const unchanged = factsOf(job.plan.steps, { 'read-position': [row], measure: [{ inserted: 0, updated: 0, deleted: 0 }] });
    expect(step(job.plan.steps, 'merge').when!(unchanged)).toBe(false);
    expect(step(job.plan.steps, 'record-position').when!(unchanged)).toBe(true);
    expect(step(job.plan.steps, 'record-position').stamp!(unchanged)).toEqual({ [KEY]: '30' });
    // New commits without rows are no skip: the position still moves.
    expect(interpret(job.plan.steps, 'check-batch', { rows: 0, null_groups: 0, ties: 0 }).skip).toBeUndefined();
    // A Delta bronze source: its change feed (version + 1 onwards) and its table id.
    const delta = await load(incremental('layer = bronze, format = delta, catalog = spark_catalog, read = incremental'));
    const drow = { head: '8', table_id: 'T', cdf: 'true', oldest: 0, stamps: 1, latest_stamp: '5', latest_id: 'T', consumed: '5', changes: 1 };
    const dfacts = factsOf(delta.plan.steps, { 'read-position': [drow] });
    expect(delta.plan.bind!(dfacts)).toEqual({ 'source.feed': 'true', 'source.from': '6', 'source.to': '8' });
    expect(step(delta.plan.steps, 'merge').stamp!(dfacts)).toEqual({
      'read.spark_catalog.acme_bronze.customer_events': '8',
      'read.spark_catalog.acme_bronze.customer_events#table-id': 'T',
    });
  });

  it('without the key: no position, and a batch without rows is skipped (99) as before', async () => {
    const job = await load(incremental('format = iceberg, catalog = lake'));
    expect(job.plan.bind).toBeUndefined();
    expect(job.plan.steps.some((s) => s.stamp || s.id === 'record-position')).toBe(false);
    expect(interpret(job.plan.steps, 'check-batch', { rows: 0, null_groups: 0, ties: 0 }).skip).toMatch(/^no rows in/);
  });

  it('is refused (78) for parquet bronze, with snapshot-date and with close-missing', async () => {
    expect(await issues(incremental('layer = bronze, read = incremental'))).toEqual({
      'source.read': expect.stringContaining('parquet files have no commits'),
    });
    expect(await issues(incremental('layer = bronze, format = iceberg, catalog = lake, snapshot-date = "2026-07-09", read = incremental'))).toEqual({
      'source.snapshot-date': expect.stringContaining('cannot be combined with source.read'),
    });
    expect(
      await issues(
        incremental(
          'format = iceberg, catalog = lake, read = incremental',
          'dimension.effective-at = "2026-07-09T00:00:00Z"\nhistory { close-missing = true }',
        ),
      ),
    ).toEqual({ 'history.close-missing': expect.stringContaining('every other key would be closed') });
  });
});
