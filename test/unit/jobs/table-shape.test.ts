import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import type { Step } from '../../../src/jobs/template.js';
import { parsePartitionField, partitionText } from '../../../src/jobs/partition-spec.js';
import { partitionColumnProblems, partitionSpecOf, setPropertiesCommand, shapeChanges } from '../../../src/runner/table-shape.js';
import { formatExpr } from '../../../src/spark/plan/format.js';
import { configIssues, loadConfig } from '../../support/load.js';

/**
 * target.partition-by and target.table-properties (docs/table-shape.md): every refusal is 78 at its
 * config path, before anything is sent: the config's (a property outside the allow-list, a value
 * out of bounds, a transform Delta or Spark's writer cannot create) and the runner's, judged on what
 * the server reports (a partition column the table lacks, an existing table of another spec).
 */

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

const head = (template: string, version: number) => `
job    { template = "${template}", schema-version = ${version}, name = "acme-shape" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
`;

/** One config per template that creates a silver or gold table; `target` is the body of its target section. */
const templates: Record<string, (target: string) => string> = {
  'cdc-silver-merge': (t) => `${head('cdc-silver-merge', 2)}
source { table = "orders_cdc", format = iceberg, catalog = "lake" }
cdc { primary-key = ["id"], sequence-by = ["ts"], delete-when = "op = 'd'" }
target { table = "orders", ${t} }`,
  'scd2-dim-load': (t) => `${head('scd2-dim-load', 2)}
source { table = "orders" }
dimension { natural-key = ["id"], tracked-columns = ["status"] }
history { sequence-by = "ts" }
target { table = "dim_orders", ${t} }`,
  'dv-hub': (t) => `${head('dv-hub', 1)}
sources = [{ table = "orders", layer = silver, record-source = "shop", business-key = ["id"] }]
hub { hash-key = "hk_order", business-key = ["order_id"] }
target { table = "hub_order", ${t} }`,
  'gold-publish': (t) => `${head('gold-publish', 1)}
transform { sql = "SELECT customer, created_at, count(*) AS orders FROM silver.orders GROUP BY customer, created_at" }
target { table = "sales", grain = ["customer", "created_at"], mode = merge, ${t} }`,
};

const createOf = (steps: readonly Step[]) => {
  const s = steps.find((x) => x.id === 'create-table');
  if (s?.kind !== 'ensureTable' || s.create.kind !== 'writeV2') throw new Error('no create-table step');
  return { step: s, create: s.create };
};

describe.each(Object.entries(templates))('%s', (_name, config) => {
  it('creates its table with the configured spec and allow-listed properties, values typed', async () => {
    const job = await loadConfig(
      config(
        `catalog = "lake", partition-by = ["days(created_at)", "bucket(16, id)", "status"], table-properties { write.merge.mode = merge-on-read, format-version = 3, "write.target-file-size-bytes" = 134217728 }`,
      ),
      { platform },
    );
    const { step, create } = createOf(job.plan.steps);
    expect(create.partitionBy.map(formatExpr)).toEqual(['days(created_at)', 'bucket(16, id)', 'status']);
    expect(create.properties).toMatchObject({ 'write.merge.mode': 'merge-on-read', 'format-version': '3', 'write.target-file-size-bytes': '134217728' });
    // The location is always the tenant's layout, whatever the config says.
    expect(create.properties.location).toBe(step.location);
    expect(step.shape?.partitionBy.map((f) => f.path)).toEqual(['target.partition-by[0]', 'target.partition-by[1]', 'target.partition-by[2]']);
  });

  it('Delta: columns and delta.* properties', async () => {
    const job = await loadConfig(
      config(`catalog = "spark_catalog", partition-by = ["status"], table-properties { delta.enableDeletionVectors = true, delta.checkpointInterval = 20 }`),
      { platform },
    );
    const { create } = createOf(job.plan.steps);
    expect(create.partitionBy.map(formatExpr)).toEqual(['status']);
    expect(create.properties).toMatchObject({ 'delta.enableDeletionVectors': 'true', 'delta.checkpointInterval': '20' });
  });

  it.each([
    [`table-properties { location = "file:///lake/other" }`, 'target.table-properties.location', /not a table property a job may set/],
    [`table-properties { write.metadata.path = "file:///elsewhere" }`, 'target.table-properties.write.metadata.path', /not a table property/],
    [`table-properties { "write.object-storage.path" = "s3://x" }`, 'target.table-properties.write.object-storage.path', /not a table property/],
    [`table-properties { provider = parquet }`, 'target.table-properties.provider', /not a table property/],
    [`table-properties { write.merge.mod = merge-on-read }`, 'target.table-properties.write.merge.mod', /did you mean "write.merge.mode"\?/],
    [`table-properties { write.merge.mode = fast }`, 'target.table-properties.write.merge.mode', /"fast" must be one of copy-on-write, merge-on-read/],
    [`table-properties { format-version = 1 }`, 'target.table-properties.format-version', /must be one of 2, 3/],
    [`table-properties { write.target-file-size-bytes = 10 }`, 'target.table-properties.write.target-file-size-bytes', /within 1048576\.\.2147483648/],
    [`partition-by = ["days(created_at"]`, 'target.partition-by[0]', /not a partition field/],
    [`partition-by = ["bucket(0, id)"]`, 'target.partition-by[0]', /bucket count 0 is outside/],
    [`partition-by = ["status", "status"]`, 'target.partition-by[1]', /repeats partition-by\[0\]/],
    [`partition-by = ["days(created_at)", "hours(created_at)"]`, 'target.partition-by[1]', /one time transform per column/],
  ])('refuses %s (78 at %s)', async (body, path, message) => {
    const issues = await configIssues(config(`catalog = "lake", ${body}`), { platform });
    expect(issues).toContainEqual(expect.objectContaining({ path, message: expect.stringMatching(message) }));
  });

  it.each([
    [`catalog = "spark_catalog", partition-by = ["days(created_at)"]`, 'target.partition-by[0]', /Delta tables are partitioned by columns only/],
    [`catalog = "spark_catalog", partition-by = ["bucket(8, id)"]`, 'target.partition-by[0]', /Delta tables are partitioned by columns only/],
    [`catalog = "lake", partition-by = ["truncate(4, status)"]`, 'target.partition-by[0]', /truncate\(4, status\) cannot be created through Spark Connect/],
    [
      `catalog = "lake", table-properties { delta.enableDeletionVectors = true }`,
      'target.table-properties.delta.enableDeletionVectors',
      /of delta tables, and this table is iceberg/,
    ],
    [
      `catalog = "spark_catalog", table-properties { write.merge.mode = merge-on-read }`,
      'target.table-properties.write.merge.mode',
      /of iceberg tables, and this table is delta/,
    ],
  ])("refuses, for the catalog's format, %s (78 at %s)", async (body, path, message) => {
    const err = await loadConfig(config(body), { platform }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(78);
    expect((err as ConfigError).issues).toContainEqual(expect.objectContaining({ path, message: expect.stringMatching(message) }));
  });
});

describe('gold-publish replace-range', () => {
  const gold = (extra: string) => `${head('gold-publish', 1)}
transform { sql = "SELECT sale_date, customer FROM silver.orders WHERE sale_date = :logical_date" }
target { table = "daily", catalog = "lake", grain = ["sale_date", "customer"], mode = replace-range, range-column = "sale_date"${extra} }`;

  it('is partitioned by its range column by default, and a configured spec must keep it', async () => {
    const plain = await loadConfig(gold(''), { platform, logicalDate: '2026-07-05' });
    expect(createOf(plain.plan.steps).create.partitionBy.map(formatExpr)).toEqual(['sale_date']);
    expect(createOf(plain.plan.steps).step.shape?.partitionByConfigured).toBe(false);
    const bucketed = await loadConfig(gold(`, partition-by = ["sale_date", "bucket(4, customer)"]`), { platform, logicalDate: '2026-07-05' });
    expect(createOf(bucketed.plan.steps).create.partitionBy.map(formatExpr)).toEqual(['sale_date', 'bucket(4, customer)']);
    const issues = await configIssues(gold(`, partition-by = ["bucket(4, customer)"]`), { platform, logicalDate: '2026-07-05' });
    expect(issues).toContainEqual(
      expect.objectContaining({ path: 'target.partition-by', message: expect.stringMatching(/must include the range column sale_date/) }),
    );
  });
});

describe('partition fields', () => {
  it.each([
    ['created_at', 'created_at'],
    ['day(created_at)', 'days(created_at)'],
    [' DAYS( created_at ) ', 'days(created_at)'],
    ['years(d)', 'years(d)'],
    ['month(ts)', 'months(ts)'],
    ['hours(ts)', 'hours(ts)'],
    ['bucket(16,id)', 'bucket(16, id)'],
    ['truncate(4, code)', 'truncate(4, code)'],
  ])('%s is %s', (text, canonical) => {
    const f = parsePartitionField(text);
    expect('problem' in f).toBe(false);
    expect(partitionText(f as never)).toBe(canonical);
  });

  it.each(['', 'a b', 'days()', 'days(a, b)', 'bucket(x, id)', 'minutes(ts)', 'days(`x`)', "days('x')"])('"%s" is refused', (text) => {
    expect(parsePartitionField(text)).toHaveProperty('problem');
  });
});

describe("the runner's shape checks", () => {
  const shaped = async (target: string) => createOf((await loadConfig(templates['cdc-silver-merge']!(target), { platform })).plan.steps).step;

  it('refuses a partition column the new table lacks (did you mean) or of a type its transform cannot take', async () => {
    const step = await shaped(`partition-by = ["days(create_at)", "hours(d)", "bucket(4, amount)"]`);
    const columns = [
      { name: 'id', type: 'bigint' },
      { name: 'created_at', type: 'timestamp' },
      { name: 'd', type: 'date' },
      { name: 'amount', type: 'double' },
    ];
    const err = partitionColumnProblems(step, columns);
    expect(err?.exitCode).toBe(78);
    expect(err?.issues).toEqual([
      expect.objectContaining({
        path: 'target.partition-by[0]',
        message: expect.stringMatching(/create_at, which is not a column of lake\.acme_silver\.orders; did you mean "created_at"\?/),
      }),
      expect.objectContaining({ path: 'target.partition-by[1]', message: 'hours() takes a timestamp column, and d is date' }),
      expect.objectContaining({ path: 'target.partition-by[2]', message: 'bucket() cannot hash a double column' }),
    ]);
    expect(partitionColumnProblems(await shaped(`partition-by = ["days(CREATED_AT)", "d"]`), columns)).toBeUndefined();
  });

  it('reads the spec Spark reports for Iceberg and Delta tables', () => {
    const row = (col_name: string, data_type = '') => ({ col_name, data_type });
    expect(
      partitionSpecOf([
        row('id', 'int'),
        row(''),
        row('# Partitioning'),
        row('Part 0', 'days(created_at)'),
        row('Part 1', 'bucket(16, id)'),
        row(''),
        row('# Metadata Columns'),
      ]),
    ).toEqual(['days(created_at)', 'bucket(16, id)']);
    expect(
      partitionSpecOf([
        row('code', 'string'),
        row('# Partition Information'),
        row('# col_name', 'data_type'),
        row('code', 'string'),
        row(''),
        row('# Detailed Table Information'),
      ]),
    ).toEqual(['code']);
    expect(partitionSpecOf([row('id', 'int'), row(''), row('# Detailed Table Information')])).toEqual([]);
  });

  it('an existing table of another spec is refused naming both; differing properties are set, format-version is refused', async () => {
    const step = await shaped(
      `partition-by = ["days(created_at)"], table-properties { write.merge.mode = merge-on-read, write.delete.mode = merge-on-read, format-version = 2 }`,
    );
    expect(() => shapeChanges(step, { partitionBy: ['bucket(16, id)'], properties: {} })).toThrow(
      /target\.partition-by: table lake\.acme_silver\.orders exists partitioned by \[bucket\(16, id\)\], not by \[days\(created_at\)\] as configured/,
    );
    expect(() => shapeChanges(step, { partitionBy: [], properties: {} })).toThrow(/exists partitioned by unpartitioned|partitioned by unpartitioned/);
    const found = {
      partitionBy: ['days(created_at)'],
      properties: { 'format-version': '2', 'write.merge.mode': 'copy-on-write', 'write.delete.mode': 'merge-on-read' },
    };
    expect(shapeChanges(step, found)).toEqual({ 'write.merge.mode': 'merge-on-read' });
    expect(() => shapeChanges(step, { ...found, properties: { ...found.properties, 'format-version': '3' } })).toThrow(
      /target\.table-properties\.format-version: table lake\.acme_silver\.orders has format-version 3, not 2/,
    );
    // Without partition-by in the config, an existing table's spec is the table's business.
    const unconfigured = await shaped(`table-properties { write.merge.mode = merge-on-read }`);
    expect(shapeChanges(unconfigured, { partitionBy: ['bucket(16, id)'], properties: { 'write.merge.mode': 'merge-on-read' } })).toEqual({});
  });

  it('sets properties with literals, never spliced text', async () => {
    const step = await shaped(`table-properties { write.merge.mode = merge-on-read }`);
    const cmd = setPropertiesCommand(step, { 'write.merge.mode': "merge-on-read'; DROP TABLE x; --" });
    expect(cmd.kind === 'sqlCommand' && cmd.query).toBe(
      "ALTER TABLE `lake`.`acme_silver`.`orders` SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read\\'; DROP TABLE x; --')",
    );
  });
});
