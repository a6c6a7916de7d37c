import { toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../../src/core/errors.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { sameColumnType } from '../../../src/jobs/template.js';
import { schemaDecision } from '../../../src/jobs/silver/cdc-silver-merge.js';
import { BRONZE_STAMPS } from '../../../src/jobs/layers/bronze.js';
import { configIssues, loadConfig } from '../../support/load.js';

/** The layer contracts as cdc-silver-merge and jdbc-snapshot-ingest use them, without Spark. */

const platform = `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }`;

const load = (config: string, set: string[] = []) => loadConfig(config, { platform, set, runId: 'r' });
const issues = (config: string, set: string[] = []) => configIssues(config, { platform, set });

const plans = (job: Awaited<ReturnType<typeof load>>) =>
  Object.fromEntries(job.plan.steps.map((s) => [s.id, JSON.stringify(toJson(PlanSchema, stepPlan(s, { reveal: false })))]));

const cdc = (source: string) => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc"${source} }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"] }
target { table = "orders", format = delta, catalog = "spark_catalog" }
`;

describe('cdc-silver-merge reads bronze through the bronze layer', () => {
  it('parquet (the default): the files at the bronze path, exact partitions when dates are selected', async () => {
    const all = plans(await load(cdc('')));
    expect(all['check-batch']).toContain('"paths":["file:///lake/acme/bronze/orders_cdc"]');
    const dated = await load(cdc(''), ['source.snapshot-date=2026-07-05']);
    const step = dated.plan.steps.find((s) => s.id === 'probe-partitions');
    expect(step).toMatchObject({ kind: 'probePaths', paths: ['file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05'] });
    if (step?.kind !== 'probePaths') throw new Error('unreachable');
    expect(step.interpret(step.paths.slice())).toEqual({ skip: expect.stringMatching(/no bronze partition for source.snapshot-date 2026-07-05/) });
  });

  for (const [format, catalog] of [
    ['iceberg', 'lake'],
    ['delta', 'spark_catalog'],
  ] as const) {
    it(`${format}: the table through its catalog, never its files; selected dates as a literal filter`, async () => {
      const job = await load(cdc(`, format = ${format}, catalog = "${catalog}"`), ['source.snapshot-date=[2026-07-05, 2026-07-06]']);
      const p = plans(job);
      expect(p['check-batch']).toContain(`"unparsedIdentifier":"\`${catalog}\`.\`acme_bronze\`.\`orders_cdc\`"`);
      expect(p['check-batch']).not.toContain('"paths"');
      expect(p['check-batch']).not.toContain('"dataSource"');
      expect(p['check-batch']).toContain('"functionName":"in"');
      expect(p['check-batch']).toMatch(/"date":\d+/);
      const probe = job.plan.steps.find((s) => s.id === 'probe-partitions');
      expect(probe?.kind).toBe('query');
      if (probe?.kind !== 'query') throw new Error('unreachable');
      expect(
        probe.interpret([
          { date: '2026-07-05', rows: 3n },
          { date: '2026-07-06', rows: 1n },
        ]),
      ).toEqual({});
      expect(probe.interpret([{ date: '2026-07-05', rows: 3n }])).toEqual({
        skip: `no bronze partition for source.snapshot-date 2026-07-06 in ${catalog}.acme_bronze.orders_cdc`,
      });
    });
  }

  it('refuses a catalog for parquet bronze, an unknown catalog, and a format the catalog does not hold (78, at source.*)', async () => {
    expect(await issues(cdc(', catalog = "lake"'))).toEqual([{ path: 'source.catalog', message: expect.stringMatching(/parquet files need no catalog/) }]);
    expect(await issues(cdc(', format = iceberg, catalog = "hms"'))).toEqual([
      { path: 'source.catalog', message: expect.stringMatching(/"hms" is not configured/) },
    ]);
    expect(await issues(cdc(', format = delta, catalog = "lake"'))).toEqual([
      { path: 'source.format', message: 'is delta, but catalog "lake" holds iceberg tables' },
    ]);
    expect((await issues(cdc(', format = orc'))).map((i) => i.path)).toEqual(['source.format']);
  });

  it('drops exactly the bronze stamps (and the op column) before silver', async () => {
    expect(BRONZE_STAMPS).toEqual(['_lake_tenant', '_lake_source', '_lake_ingested_at', '_snapshot_date']);
    const p = plans(await load(cdc('')));
    // check-batch resolves the batch once (silver's columns only) and keeps it; the table is created from those rows.
    for (const c of [...BRONZE_STAMPS, 'op']) expect(p['check-batch']).toContain(`"${c}"`);
    expect(p['create-table']).toContain('"cachedRemoteRelation":{"relationId":"cdc-batch"}');
    for (const c of [...BRONZE_STAMPS, 'op']) expect(p['create-table']).not.toContain(`"${c}"`);
  });

  it('runs v1 configs through the same plan as their v2 equivalent (migrated by the kit)', async () => {
    const v1 = await load(`
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }
`);
    const v2 = await load(`
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'", format = parquet }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"], tombstone-retention-days = 30 }
schema-evolution = fail
target { table = "orders", catalog = "lake" }
`);
    expect(plans(v1)).toEqual(plans(v2));
    expect(v1.plan.sessionConf).toEqual({ 'spark.sql.legacy.charVarcharAsString': 'true', 'spark.sql.legacy.allowHashOnMapType': 'true' });
  });
});

describe('silver schema is fixed at creation', () => {
  const parts = ['lake', 'acme_silver', 'orders'];
  const none = { added: [], missing: [], changed: [] };

  it('refuses a changed column type (65, SCHEMA_CHANGED), naming column, silver type and batch type, even with add-columns', () => {
    for (const evolution of ['fail', 'add-columns'] as const) {
      const d = schemaDecision(
        { ...none, changed: [{ name: 'amount', tableType: 'decimal(12,2)', sourceType: 'string' }] },
        'lake.acme_silver.orders',
        parts,
        evolution,
      );
      expect(d.fail).toBeInstanceOf(DataError);
      expect(d.fail?.exitCode).toBe(65);
      expect(d.fail?.code).toBe('SCHEMA_CHANGED');
      expect(d.fail?.message).toMatch(/amount \(lake\.acme_silver\.orders has decimal\(12,2\), the batch string\)/);
      expect(d.commands).toBeUndefined();
    }
  });

  it('refuses a missing column and new columns without add-columns; adds only new columns with it', () => {
    expect(schemaDecision({ ...none, missing: ['name'] }, 't', parts, 'add-columns').fail?.message).toMatch(/lacks columns .*: name/);
    expect(schemaDecision({ ...none, added: [{ name: 'note', type: 'string' }] }, 't', parts, 'fail').fail?.message).toMatch(
      /new columns note string; set schema-evolution = add-columns/,
    );
    const add = schemaDecision({ ...none, added: [{ name: 'note', type: 'string' }] }, 't', parts, 'add-columns');
    expect(add.fail).toBeUndefined();
    expect(JSON.stringify(add.commands)).toContain('ALTER TABLE `lake`.`acme_silver`.`orders` ADD COLUMNS (`note` string)');
    expect(schemaDecision(none, 't', parts, 'fail')).toEqual({});
  });

  it('compares types as the table formats store them: text is text, narrow integers are int', () => {
    expect(sameColumnType('string', 'varchar(0)')).toBe(true);
    expect(sameColumnType('string', 'char(3)')).toBe(true);
    expect(sameColumnType('int', 'smallint')).toBe(true);
    expect(sameColumnType('decimal(12,2)', 'decimal(12, 2)')).toBe(true);
    expect(sameColumnType('decimal(12,2)', 'string')).toBe(false);
    expect(sameColumnType('decimal(12,2)', 'decimal(10,2)')).toBe(false);
    expect(sameColumnType('bigint', 'int')).toBe(false);
    expect(sameColumnType('timestamp', 'timestamp_ntz')).toBe(false);
  });
});

describe('jdbc-snapshot-ingest writes bronze through the bronze layer', () => {
  const ingest = (target: string) => `
job    { template = "jdbc-snapshot-ingest", schema-version = 2 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders", url = "jdbc:sqlite:/data/shop.db", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-07-05"${target} }
`;
  it('keeps text as text in every format, and names parquet bronze by its path', async () => {
    for (const t of ['', ', format = iceberg', ', format = delta, catalog = "spark_catalog"']) {
      const job = await load(ingest(t));
      expect(job.plan.sessionConf).toEqual({ 'spark.sql.legacy.charVarcharAsString': 'true' });
    }
    const parquet = await load(ingest(''));
    const count = parquet.plan.steps.find((s) => s.id === 'count-snapshot');
    if (count?.kind !== 'query') throw new Error('unreachable');
    expect(count.interpret([{ rows: 1n }]).output).toEqual({
      path: 'file:///lake/acme/bronze/orders',
      format: 'parquet',
      location: 'file:///lake/acme/bronze/orders',
      metrics: { rowsWritten: 1 },
    });
    expect(count.interpret([{ rows: 1n }]).output?.table).toBeUndefined();
  });
});

describe('cdc-silver-merge v2 columns.types', () => {
  const typed = (columns: string, extra = '') => `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op" }
columns { ${columns} }
${extra}
target { table = "orders", format = iceberg }
`;

  it('casts every batch to the declared types, so silver is created with them', async () => {
    const job = await load(typed('types { amount = "Decimal(12, 2)", seen = timestamp }'));
    const p = plans(job);
    // Cast once, where the batch is resolved; create-table and merge read those rows.
    expect(p['check-batch']).toContain('"typeStr":"decimal(12,2)"');
    expect(p['check-batch']).toContain('"typeStr":"timestamp"');
    for (const step of ['create-table', 'merge']) expect(p[step]).toContain('"cachedRemoteRelation":{"relationId":"cdc-batch"}');
  });

  it('refuses types outside the allow-list and types for columns that never reach silver (78, at columns.types.<column>)', async () => {
    const bad = await issues(typed('types { amount = "decimal(40,2)", x = "string) ; DROP TABLE t; --", y = "map<string,int>" }'));
    expect(bad.map((i) => i.path).sort()).toEqual(['columns.types.amount', 'columns.types.x', 'columns.types.y']);
    expect(bad[0]?.message).toMatch(/must be one of string, .* or decimal\(p,s\)/);
    const unreachable = await issues(typed('exclude = ["raw"], types { raw = string, op = string, _snapshot_date = date }'));
    expect(unreachable).toEqual(
      expect.arrayContaining([
        { path: 'columns.types.raw', message: '"raw" is excluded (columns.exclude)' },
        { path: 'columns.types.op', message: '"op" is cdc.op-column and never reaches silver' },
        { path: 'columns.types._snapshot_date', message: '"_snapshot_date" is a bronze metadata column and never reaches silver' },
      ]),
    );
    const notIncluded = await issues(typed('include = ["name"], types { amount = string }'));
    expect(notIncluded).toEqual([{ path: 'columns.types.amount', message: '"amount" is not in columns.include' }]);
    expect((await load(typed('include = ["name"], types { id = bigint, name = string }'))).plan.steps.length).toBeGreaterThan(0);
  });
});
