import { toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import type { Step } from '../../../src/jobs/template.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { configIssues, loadConfig } from '../../support/load.js';
import { ConfigError } from '../../../src/core/errors.js';

/** Templates read bronze by exact partitions and give every table they create its expected location. */

const catalogs = 'catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }';

const merge = (source: string, version = 2) => `
job    { template = "cdc-silver-merge", schema-version = ${version} }
tenant { id = "acme", storage-root = "file:///lake/acme/" }
source { table = "orders_cdc"${source} }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op" }
target { table = "orders" }
`;

const ingest = (format: string) => `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "acme", storage-root = "FILE:/lake/acme" }
source { table = "orders", url = "jdbc:sqlite:/data/shop.db" }
target { table = "orders_cdc", snapshot-date = "2026-07-05", format = ${format}, catalog = ${format === 'delta' ? 'spark_catalog' : 'lake'} }
`;

const load = (config: string, set: string[] = []) => loadConfig(config, { platform: catalogs, set });
const issues = (config: string, set: string[] = []) => configIssues(config, { platform: catalogs, set });

/** The parquet read of the check-batch step: its paths and options. */
function bronzeRead(steps: readonly Step[]): { paths: string[]; options: Record<string, string> } {
  const found: { format?: string; paths?: string[]; options?: Record<string, string> }[] = [];
  const walk = (x: unknown): void => {
    if (Array.isArray(x)) x.forEach(walk);
    else if (typeof x === 'object' && x !== null) {
      const ds = (x as Record<string, unknown>).dataSource as (typeof found)[number] | undefined;
      if (ds?.format === 'parquet') found.push(ds);
      Object.values(x).forEach(walk);
    }
  };
  walk(
    toJson(
      PlanSchema,
      stepPlan(
        steps.find((s) => s.id === 'check-batch')!,
        { reveal: false },
      ),
    ),
  );
  expect(found).toHaveLength(1);
  return { paths: found[0]!.paths ?? [], options: found[0]!.options ?? {} };
}

describe('cdc-silver-merge source.snapshot-date (v2)', () => {
  it('reads exactly the selected partition, with basePath at the bronze dir, after probing it', async () => {
    const job = await load(merge(''), ['source.snapshot-date=2026-07-05']);
    expect(job.plan.steps.slice(0, 2).map((s) => s.id)).toEqual(['probe-files-only', 'probe-partitions']);
    expect(job.plan.steps[1]).toMatchObject({
      kind: 'probePaths',
      id: 'probe-partitions',
      paths: ['file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05'],
    });
    expect(bronzeRead(job.plan.steps)).toEqual({
      paths: ['file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05'],
      options: { mergeSchema: 'true', basePath: 'file:///lake/acme/bronze/orders_cdc' },
    });
  });

  it('reads each date of a list', async () => {
    const job = await load(merge(', snapshot-date = ["2026-07-05", "2026-07-06"]'));
    expect(bronzeRead(job.plan.steps).paths).toEqual([
      'file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05',
      'file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-06',
    ]);
  });

  it('reads the whole bronze dir without a selection (and probes nothing)', async () => {
    const job = await load(merge(''));
    expect(job.plan.steps.slice(0, 4).map((s) => s.id)).toEqual(['probe-files-only', 'batch-fingerprint', 'check-source-columns', 'check-batch']);
    expect(bronzeRead(job.plan.steps)).toEqual({ paths: ['file:///lake/acme/bronze/orders_cdc'], options: { mergeSchema: 'true' } });
    const v1 = await load(merge('', 1));
    expect(bronzeRead(v1.plan.steps)).toEqual({ paths: ['file:///lake/acme/bronze/orders_cdc'], options: { mergeSchema: 'true' } });
  });

  it('reads and writes bronze parquet files only where no Delta or Iceberg table is (78 TABLE_LOCATION_TAKEN at source.table)', async () => {
    const job = await load(merge(''));
    const probe = job.plan.steps[0] as Extract<Step, { kind: 'probePaths' }>;
    expect(probe).toMatchObject({
      kind: 'probePaths',
      id: 'probe-files-only',
      paths: ['file:///lake/acme/bronze/orders_cdc/_delta_log', 'file:///lake/acme/bronze/orders_cdc/metadata'],
    });
    expect(probe.interpret([...probe.paths])).toEqual({});
    for (const [present, format] of [
      [probe.paths[0]!, /a Delta table \(_delta_log\) is there.*format = delta/],
      [probe.paths[1]!, /an Iceberg table \(metadata\) is there.*format = iceberg/],
    ] as const) {
      const fail = probe.interpret(probe.paths.filter((p) => p !== present)).fail as ConfigError;
      expect(fail).toBeInstanceOf(ConfigError);
      expect(fail.exitCode).toBe(78);
      expect(fail.code).toBe('TABLE_LOCATION_TAKEN');
      expect(fail.issues).toEqual([{ path: 'source.table', message: expect.stringMatching(format) }]);
    }
  });

  it('skips (99) when a selected partition is missing, naming the date', async () => {
    const job = await load(merge(', snapshot-date = ["2026-07-05", "2026-07-06"]'));
    const probe = job.plan.steps.find((s) => s.id === 'probe-partitions') as Extract<Step, { kind: 'probePaths' }>;
    expect(probe.interpret([])).toEqual({});
    expect(probe.interpret([probe.paths[1]!])).toEqual({
      skip: 'no bronze partition for source.snapshot-date 2026-07-06 in file:///lake/acme/bronze/orders_cdc',
    });
    expect(probe.interpret([...probe.paths]).skip).toMatch(/2026-07-05, 2026-07-06/);
  });

  it.each([
    ['"2026-02-30"', /not a valid calendar date/],
    ['"2026-07-05/../x"', /must be a date/],
    ['"*"', /must be a date/],
    ['"{2026-07-05,2026-07-06}"', /must be a date/],
    ['[]', /too small|at least|>=1/i],
    ['["2026-07-05", "2026-07-05"]', /twice/],
  ])('refuses snapshot-date = %s with its path (78)', async (value, message) => {
    expect(await issues(merge(`, snapshot-date = ${value}`))).toContainEqual({
      path: expect.stringMatching(/^source\.snapshot-date/),
      message: expect.stringMatching(message),
    });
  });

  it('is a v2 key: v1 refuses it as unknown', async () => {
    expect(await issues(merge(', snapshot-date = "2026-07-05"', 1))).toContainEqual({
      path: 'source.snapshot-date',
      message: expect.stringMatching(/unknown key/),
    });
  });
});

describe('expected table locations', () => {
  const ensured = (steps: readonly Step[]) =>
    steps
      .filter((s): s is Extract<Step, { kind: 'ensureTable' }> => s.kind === 'ensureTable')
      .map((s) => ({ table: s.table.table, location: s.location, configPath: s.configPath }));

  it('cdc-silver-merge: the silver table and its tombstones, at <storage-root>/silver/<table>', async () => {
    const job = await load(merge(''));
    expect(ensured(job.plan.steps)).toEqual([
      { table: 'orders', location: 'file:///lake/acme/silver/orders', configPath: 'target.table' },
      { table: 'orders__cdc_tombstones', location: 'file:///lake/acme/silver/orders__cdc_tombstones', configPath: 'target.table' },
    ]);
    // The table is created where it is later checked to be.
    const create = JSON.stringify(
      toJson(
        PlanSchema,
        stepPlan(
          job.plan.steps.find((s) => s.id === 'create-table')!,
          { reveal: false },
        ),
      ),
    );
    expect(create).toContain('"location":"file:///lake/acme/silver/orders"');
  });

  it.each(['iceberg', 'delta'])('jdbc-snapshot-ingest %s: the bronze table at <storage-root>/bronze/<table>', async (format) => {
    const job = await load(ingest(format));
    expect(ensured(job.plan.steps)).toEqual([{ table: 'orders_cdc', location: 'file:///lake/acme/bronze/orders_cdc', configPath: 'target.table' }]);
  });
});
