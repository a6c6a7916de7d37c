import { describe, expect, it } from 'vitest';
import { toJson } from '@bufbuild/protobuf';
import { type ConfigError, DataError } from '../../../src/core/errors.js';
import type { QueryStep, Step } from '../../../src/jobs/template.js';
import { compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { Query } from '../../../src/spark/plan/query.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { factsOf } from '../../support/facts.js';
import { fileURLToPath } from 'node:url';
import { loadJob } from '../../../src/runner/load-job.js';
import { configIssues, loadConfig } from '../../support/load.js';

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

const config = (source: string, target = 'catalog = lake') => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "acme-orders" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", ${source} }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op" }
target { table = "orders", ${target} }
`;

const BRONZE = 'lake.acme_bronze.orders_cdc';
const options = (rel: unknown) => JSON.stringify(rel, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)).match(/"options":\{[^}]*\}/g) ?? [];

describe('bound options', () => {
  const q = Query.table(['lake', 'ns', 't'], { 'start-snapshot-id': { bound: 'from' }, 'end-snapshot-id': { bound: 'to' }, other: 'x' });
  const namedTable = (bound?: ReadonlyMap<string, string>) =>
    (toJson(PlanSchema, compileRelationPlan(q.rel, { reveal: true, ...(bound ? { bound } : {}) })) as { root: { read: { namedTable: { options: object } } } })
      .root.read.namedTable.options;

  it('are their names in a plan compiled without values (plan output), their values in a run, and left out when unbound', () => {
    expect(namedTable()).toEqual({ 'start-snapshot-id': '<from>', 'end-snapshot-id': '<to>', other: 'x' });
    expect(namedTable(new Map([['to', '7']]))).toEqual({ 'end-snapshot-id': '7', other: 'x' });
    expect(
      namedTable(
        new Map([
          ['from', '3'],
          ['to', '7'],
        ]),
      ),
    ).toEqual({ 'start-snapshot-id': '3', 'end-snapshot-id': '7', other: 'x' });
  });
});

describe('cdc-silver-merge source.read', () => {
  it('incremental: the position steps run first, the read is bound to them, the MERGE and record-position stamp the position', async () => {
    const job = await loadConfig(config('format = iceberg, catalog = lake, read = incremental'), { platform });
    const ids = job.plan.steps.map((s) => s.id);
    expect(ids.slice(0, 4)).toEqual(['read-position', 'read-source-head', 'check-source-columns', 'check-batch']);
    expect(ids).toContain('record-position');
    const byId = (id: string) => job.plan.steps.find((s) => s.id === id)!;
    // plan shows the bound options by name
    expect(options(stepPlan(byId('check-batch'), { reveal: false }))).toContainEqual(
      expect.stringContaining('"start-snapshot-id":"<source.from>","end-snapshot-id":"<source.to>","versionAsOf":"<source.version>"'),
    );
    const position = (row: Record<string, unknown>) => factsOf(job.plan.steps, { 'read-position': [row] });
    const row = { head: '30', stamps: 2, latest_stamp: '20', consumed: '20', appends: 1, rewrites: 0 };
    const facts = position(row);
    expect(job.plan.bind!(facts)).toEqual({ 'source.from': '20', 'source.to': '30' });
    expect(byId('merge').stamp!(facts)).toEqual({ [`read.${BRONZE}`]: '30' });
    expect(byId('record-position').stamp!(facts)).toEqual({ [`read.${BRONZE}`]: '30' });
    const interpret = (r: Record<string, unknown>) => (byId('read-position') as QueryStep<string>).interpret([r]);
    expect(interpret(row).output?.read).toEqual({ source: BRONZE, mode: 'incremental', from: '20', to: '30' });
    expect(interpret({ ...row, consumed: '30' }).skip).toMatch(/^nothing new in lake.acme_bronze.orders_cdc since snapshot 30/);
    expect(interpret({ ...row, appends: 0 }).skip).toMatch(/only rewrites \(compaction\)/);
    expect(interpret({ ...row, rewrites: 1 }).output?.read).toMatchObject({ mode: 'full', from: '20', to: '30' });
    // Delete files matter to a changelog read only: bronze's appends are read as they are.
    expect(interpret({ ...row, deletes: 1 }).output?.read).toEqual({ source: BRONZE, mode: 'incremental', from: '20', to: '30' });
    expect(job.plan.bind!(position({ ...row, rewrites: 1 }))).toEqual({ 'source.version': '30' });
    const lost = interpret({ ...row, consumed: null }).fail as DataError;
    expect(lost.exitCode).toBe(65);
    expect(lost.code).toBe('SOURCE_POSITION_LOST');
    expect(lost.message).toContain('lake.acme_silver.orders last recorded reading lake.acme_bronze.orders_cdc up to snapshot 20');
    expect(lost.message).toContain('its newest snapshot is 30');
    expect(lost.hint).toContain('--set source.read=full');
    // A first run (no stamp, or no silver yet): all of bronze as of its newest snapshot.
    expect(job.plan.bind!(position({ ...row, stamps: 0, consumed: null }))).toEqual({ 'source.version': '30' });
    const first = factsOf(job.plan.steps, { 'read-position': [], 'read-source-head': [{ head: '5' }] });
    expect(job.plan.bind!(first)).toEqual({ 'source.version': '5' });
    expect(byId('read-source-head').when!(first)).toBe(true);
    expect(byId('read-source-head').when!(facts)).toBe(false);
  });

  it('full: reads bronze as of its newest snapshot and records it; without the key nothing is stamped', async () => {
    const full = await loadConfig(config('format = iceberg, read = full'), { platform });
    expect(full.plan.steps.map((s) => s.id).slice(0, 2)).toEqual(['read-source-head', 'check-source-columns']);
    const facts = factsOf(full.plan.steps, { 'read-source-head': [{ head: '9' }] });
    expect(full.plan.bind!(facts)).toEqual({ 'source.version': '9' });
    const merge = full.plan.steps.find((s) => s.id === 'merge') as Step;
    expect(merge.stamp!(facts)).toEqual({ [`read.${BRONZE}`]: '9' });
    const plain = await loadConfig(config('format = iceberg'), { platform });
    expect(plain.plan.bind).toBeUndefined();
    expect(plain.plan.steps.some((s) => s.stamp)).toBe(false);
  });

  it('is refused (78) for parquet bronze and with snapshot-date', async () => {
    expect(await configIssues(config('read = incremental'), { platform })).toEqual([
      { path: 'source.read', message: expect.stringContaining('parquet files have no commits') },
    ]);
    expect((await loadConfig(config('format = delta, catalog = spark_catalog, read = incremental'), { platform })).plan.bind).toBeDefined();
    expect(await configIssues(config('format = iceberg, read = incremental, snapshot-date = "2026-07-05"'), { platform })).toEqual([
      { path: 'source.snapshot-date', message: expect.stringContaining('cannot be combined with source.read') },
    ]);
  });
});

describe('cdc-silver-merge source.read on a Delta bronze table', () => {
  const DBRONZE = 'spark_catalog.acme_bronze.orders_cdc';
  const KEY = `read.${DBRONZE}`;
  const ID = `${KEY}#table-id`;
  const row = {
    head: '30',
    table_id: 'T1',
    cdf: 'true',
    oldest: 0,
    stamps: 2,
    latest_stamp: '20',
    latest_id: 'T1',
    consumed: '20',
    changes: 3,
    first_removal: null,
    vacuum: null,
    vacuum_cut: null,
    first_removal_at: null,
  };
  const load = (read = 'incremental') =>
    loadConfig(config(`format = delta, catalog = spark_catalog, read = ${read}`, 'format = delta, catalog = spark_catalog'), { platform });

  it('incremental: the change feed of the versions after the position, its version and table id stamped in the MERGE', async () => {
    const job = await load();
    const byId = (id: string) => job.plan.steps.find((s) => s.id === id)!;
    expect(job.plan.steps.map((s) => s.id).slice(0, 4)).toEqual(['read-position', 'read-source-head', 'check-source-columns', 'check-batch']);
    // plan shows both forms of the one read by their bound names
    expect(options(stepPlan(byId('check-batch'), { reveal: false }))).toContainEqual(
      expect.stringContaining(
        '"readChangeFeed":"<source.feed>","startingVersion":"<source.from>","endingVersion":"<source.to>","versionAsOf":"<source.version>"',
      ),
    );
    // the table form's rows get a NULL change type from a UNION ALL BY NAME (missing columns NULL)
    const plan = JSON.stringify(stepPlan(byId('check-batch'), { reveal: false }), (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    expect(plan).toMatch(/"setOpType":2,"isAll":true,"byName":true,"allowMissingColumns":true/);
    const facts = factsOf(job.plan.steps, { 'read-position': [row] });
    // Delta's startingVersion is inclusive: the version after the one read
    expect(job.plan.bind!(facts)).toEqual({ 'source.feed': 'true', 'source.from': '21', 'source.to': '30' });
    expect(byId('merge').stamp!(facts)).toEqual({ [KEY]: '30', [ID]: 'T1' });
    expect(byId('record-position').stamp!(facts)).toEqual({ [KEY]: '30', [ID]: 'T1' });
    const interpret = (r: Record<string, unknown>) => (byId('read-position') as QueryStep<string>).interpret([r]);
    expect(interpret(row).output?.read).toEqual({ source: DBRONZE, mode: 'incremental', from: '20', to: '30' });
    expect(interpret({ ...row, consumed: '30' }).skip).toBe(`nothing new in ${DBRONZE} since version 30, which spark_catalog.acme_silver.orders already holds`);
    expect(interpret({ ...row, changes: 0 }).skip).toMatch(/only rewrites \(compaction\) and maintenance since/);
    // A removal after the position older than a later VACUUM's cutoff is gone; a younger one is kept.
    expect(interpret({ ...row, first_removal: 25, first_removal_at: 1000, vacuum: 27, vacuum_cut: 999 }).output?.read).toMatchObject({ mode: 'incremental' });
    const vacuumed = interpret({ ...row, first_removal: 25, first_removal_at: 1000, vacuum: 27, vacuum_cut: 2000 }).fail as DataError;
    expect(vacuumed.exitCode).toBe(65);
    expect(vacuumed.code).toBe('SOURCE_POSITION_LOST');
    expect(vacuumed.message).toContain('up to version 20; version 25 of spark_catalog.acme_bronze.orders_cdc removed files and the VACUUM of version 27');
    const expired = interpret({ ...row, consumed: null, oldest: 25 }).fail as DataError;
    expect(expired.exitCode).toBe(65);
    expect(expired.message).toContain(
      "up to version 20, which spark_catalog.acme_bronze.orders_cdc's history no longer holds (its oldest version is 25, its newest 30",
    );
    const recreated = interpret({ ...row, consumed: null, table_id: 'T2' }).fail as DataError;
    expect(recreated.exitCode).toBe(65);
    expect(recreated.message).toContain('up to version 20 of the table with id T1, but spark_catalog.acme_bronze.orders_cdc is now another table (id T2');
    expect(recreated.hint).toContain('--set source.read=full');
    const noFeed = interpret({ ...row, cdf: null }).fail as ConfigError;
    expect(noFeed.exitCode).toBe(78);
    expect(noFeed.issues).toEqual([
      { path: 'source.read', message: expect.stringContaining(`ALTER TABLE ${DBRONZE} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')`) },
    ]);
    // A first run: all of bronze as of its newest version; without the change feed it is refused already.
    const first = factsOf(job.plan.steps, { 'read-position': [], 'read-source-head': [{ head: '5', table_id: 'T1', cdf: 'true' }] });
    expect(job.plan.bind!(first)).toEqual({ 'source.version': '5' });
    expect(byId('merge').stamp!(first)).toEqual({ [KEY]: '5', [ID]: 'T1' });
    expect((byId('read-source-head') as QueryStep<string>).interpret([{ head: '5', table_id: 'T1', cdf: 'false' }]).fail?.exitCode).toBe(78);
    expect(interpret({ ...row, stamps: 0, consumed: null, cdf: 'false' }).fail?.exitCode).toBe(78);
  });

  it('full: all of bronze as of its newest version, recorded; no change feed needed', async () => {
    const job = await load('full');
    expect(job.plan.steps.map((s) => s.id).slice(0, 2)).toEqual(['read-source-head', 'check-source-columns']);
    const facts = factsOf(job.plan.steps, { 'read-source-head': [{ head: '9', table_id: 'T1', cdf: null }] });
    expect(job.plan.bind!(facts)).toEqual({ 'source.version': '9' });
    expect(job.plan.steps.find((s) => s.id === 'merge')!.stamp!(facts)).toEqual({ [KEY]: '9', [ID]: 'T1' });
  });
});

describe('gold-publish source.read', () => {
  const gold = (opts: { sql?: string; source?: string; target?: string; catalogs?: string } = {}) => `
job    { template = "gold-publish", schema-version = 1, name = "acme-daily" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
transform { sql = "${opts.sql ?? 'SELECT order_date AS sale_date, customer, sum(amount) AS revenue FROM silver.orders GROUP BY 1, 2'}"${opts.catalogs ?? ''} }
target { table = "daily_sales", grain = ["sale_date", "customer"], ${opts.target ?? 'mode = replace-range, range-column = "sale_date"'} }
source { ${opts.source ?? 'table = "silver.orders", date-column = order_date, read = incremental'} }
`;
  const SILVER = 'lake.acme_silver.orders';

  it('reads the position, then the dates the changes touch; the check and the publish replace exactly those, and the publish carries the position', async () => {
    const job = await loadConfig(gold(), { platform });
    const ids = job.plan.steps.map((s) => s.id);
    expect(ids.slice(0, 4)).toEqual(['read-position', 'read-source-head', 'read-touched-dates', 'check-source-columns']);
    expect(ids.slice(-3)).toEqual(['publish', 'record-position', 'read-snapshot']);
    const byId = (id: string) => job.plan.steps.find((s) => s.id === id)!;
    // The changes are Iceberg's changelog of the snapshots read; plan shows the bound dates by name.
    expect(options(stepPlan(byId('read-touched-dates'), { reveal: false }))).toContainEqual(
      expect.stringContaining('"start-snapshot-id":"<source.from>","end-snapshot-id":"<source.to>"'),
    );
    const row = { head: '30', stamps: 1, latest_stamp: '20', consumed: '20', appends: 0, rewrites: 2 };
    // A MERGE of silver (overwrite snapshots) is read as its changes, not in full.
    const read = (byId('read-position') as QueryStep<string>).interpret([row]);
    expect(read.output?.read).toEqual({ source: SILVER, mode: 'incremental', from: '20', to: '30' });
    const facts = factsOf(job.plan.steps, { 'read-position': [row], 'read-touched-dates': [{ date: '2026-07-05' }, { date: '2026-07-01' }] });
    expect(job.plan.bind!(facts)).toEqual({ 'source.from': '20', 'source.to': '30', 'gold.dates': '["2026-07-01","2026-07-05"]' });
    expect(byId('publish').stamp!(facts)).toEqual({ [`read.${SILVER}`]: '30' });
    const publish = JSON.stringify(stepPlan(byId('publish'), { reveal: true, bound: new Map(Object.entries(job.plan.bind!(facts)) as [string, string][]) }));
    // Overwrite where sale_date IN (DATE '2026-07-01', DATE '2026-07-05'): literals, as a table format's overwrite by filter needs.
    expect(publish.match(/"case":"date","value":\d+/g)).toHaveLength(4);
    // A merge-on-read silver (delete files after the position): Iceberg's changelog cannot read the
    // range, so every date is recomputed from all of silver as of its newest snapshot.
    const deletes = { ...row, deletes: 1 };
    expect((byId('read-position') as QueryStep<string>).interpret([deletes]).output?.read).toEqual({
      source: SILVER,
      mode: 'full',
      from: '20',
      to: '30',
      reason: `${SILVER} holds delete files (merge-on-read) after snapshot 20, which Iceberg's changelog cannot read`,
    });
    const withDeletes = factsOf(job.plan.steps, { 'read-position': [deletes] });
    expect(job.plan.bind!(withDeletes)).toEqual({ 'source.version': '30', 'gold.dates': '*' });
    expect(byId('read-touched-dates').when!(withDeletes)).toBe(false);
    // A first run (or source.read = full) recomputes and replaces every date.
    const first = factsOf(job.plan.steps, { 'read-position': [], 'read-source-head': [{ head: '5' }] });
    expect(job.plan.bind!(first)).toEqual({ 'source.version': '5', 'gold.dates': '*' });
    const all = JSON.stringify(stepPlan(byId('publish'), { reveal: true, bound: new Map([['gold.dates', '*']]) }));
    expect(all).toContain('"case":"boolean","value":true');
    expect(all).not.toContain('"case":"date"');
    // A touched date list that is not one is a bug, never a wider overwrite.
    expect(() => stepPlan(byId('publish'), { reveal: true, bound: new Map([['gold.dates', '["x"]']]) })).toThrow(/not a list of dates/);
    expect(() => stepPlan(byId('publish'), { reveal: true, bound: new Map() })).toThrow(/no value for gold.dates/);
  });

  it('the example config is valid and follows its silver table', async () => {
    const job = await loadJob({
      configFile: fileURLToPath(new URL('../../../configs/examples/gold-publish.incremental.v1.conf', import.meta.url)),
      envFile: fileURLToPath(new URL('../../../configs/examples/platform-local.conf', import.meta.url)),
      overrides: [],
      env: { LAKEHOUSE_LAKE_HOME: '/lake' },
      runId: 'test-run',
    });
    expect(job.plan.steps.map((s) => s.id)).toContain('read-touched-dates');
  });

  it('a Delta silver is read through its change data feed, every change type', async () => {
    const job = await loadConfig(gold({ catalogs: ', catalogs { silver = spark_catalog }' }), { platform });
    const touched = JSON.stringify(
      stepPlan(
        job.plan.steps.find((s) => s.id === 'read-touched-dates')!,
        { reveal: false },
      ),
    );
    expect(touched).toContain('"readChangeFeed":"<source.feed>"');
    expect(touched).toContain('update_postimage');
  });

  it('is refused with its config path: another mode, a range parameter, a table the transform does not read, the target itself', async () => {
    expect(await configIssues(gold({ target: 'mode = merge' }), { platform })).toEqual([
      { path: 'source.read', message: expect.stringContaining('needs target.mode = replace-range (not merge)') },
    ]);
    expect(
      await configIssues(gold({ sql: 'SELECT order_date AS sale_date, customer, 1 AS revenue FROM silver.orders WHERE order_date >= :range_start' }), {
        platform,
      }),
    ).toEqual([{ path: 'transform.sql', message: expect.stringContaining('uses :range_start, which source.read leaves unbound') }]);
    expect(await configIssues(gold({ source: 'table = "silver.customers", date-column = d, read = incremental' }), { platform })).toEqual([
      { path: 'source.table', message: 'silver.customers is not a table the transform reads (silver.orders)' },
    ]);
    expect(await configIssues(gold({ source: 'table = "orders", date-column = d, read = incremental' }), { platform })).toEqual([
      { path: 'source.table', message: expect.stringContaining('silver.<table> or gold.<table>') },
    ]);
    expect(
      await configIssues(
        gold({
          sql: 'SELECT sale_date, customer, revenue FROM gold.daily_sales',
          source: 'table = "gold.daily_sales", date-column = sale_date, read = incremental',
        }),
        { platform },
      ),
    ).toEqual([{ path: 'source.table', message: expect.stringContaining('is the target itself') }]);
  });
});

describe('the raw vault loaders, source.read', () => {
  const hub = (sources: string) => `
job { template = "dv-hub", schema-version = 1, name = "acme-hub" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
sources = [ ${sources} ]
hub { hash-key = "hk_customer", business-key = ["customer"] }
target { table = "hub_customer" }
`;
  const silver = (extra = '') => `{ table = "orders", layer = silver, record-source = "shop.orders", read = incremental${extra} }`;

  it('reads the position first, binds the read to it, and stamps the insert and record-position with it', async () => {
    const job = await loadConfig(hub(silver()), { platform, logicalDate: '2026-07-01' });
    const ids = job.plan.steps.map((s) => s.id);
    expect(ids.slice(0, 2)).toEqual(['read-position', 'read-source-head']);
    expect(ids.slice(-3)).toEqual(['insert', 'record-position', 'read-snapshot']);
    const facts = factsOf(job.plan.steps, { 'read-position': [{ head: '30', stamps: 1, latest_stamp: '20', consumed: '20', appends: 1, rewrites: 0 }] });
    expect(job.plan.bind!(facts)).toEqual({ 'source.from': '20', 'source.to': '30' });
    for (const id of ['insert', 'record-position'])
      expect(job.plan.steps.find((s) => s.id === id)!.stamp!(facts)).toEqual({ 'read.lake.acme_silver.orders': '30' });
  });

  it('is refused for parquet bronze files, with snapshot-date, and for a hub job of several sources', async () => {
    expect(await configIssues(hub(`{ table = "orders", record-source = "shop.orders", read = incremental }`), { platform })).toEqual([
      { path: 'sources[0].read', message: expect.stringContaining('parquet files have no commits') },
    ]);
    expect(
      await configIssues(hub(`{ table = "orders", format = iceberg, record-source = "shop.orders", read = incremental, snapshot-date = "2026-07-01" }`), {
        platform,
      }),
    ).toEqual([{ path: 'sources[0].snapshot-date', message: expect.stringContaining('cannot be combined with read') }]);
    expect(await configIssues(hub(`${silver()}, { table = "crm", layer = silver, record-source = "crm" }`), { platform })).toEqual([
      { path: 'sources[0].read', message: expect.stringContaining('needs a hub job with one source (this one has 2)') },
    ]);
  });
});
