import { join } from 'node:path';
import { factsOf } from '../../support/facts.js';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';
import { ConfigError } from '../../../src/core/errors.js';
import { formatPlan, planAccess } from '../../../src/app/plan-view.js';
import { locationPrefixes, sameZorder } from '../../../src/jobs/ops/table-maintenance.js';
import { tempFiles } from '../../support/files.js';

const header = `
job    { template = "table-maintenance", schema-version = 1, name = "acme-maintenance" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
`;

const iceberg = `{
  layer = silver, table = "orders"
  compact { strategy = sort, sort-by = ["id", { column = "ts", direction = desc, nulls = last }], target-file-size-mb = 64, min-input-files = 3, rewrite-all = false }
  rewrite-manifests = true
  expire-snapshots { older-than-hours = 200, retain-last = 3 }
  remove-orphan-files { older-than-hours = 240 }
}`;
const delta = `{ layer = gold, table = "daily", catalog = "spark_catalog", format = delta, compact { strategy = zorder, zorder-by = ["day", "id"] }, vacuum { retain-hours = 200 } }`;

const platform = (extra = '') => `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
${extra}
`;

async function load(config: string, opts: { platform?: string; set?: string[] } = {}) {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': opts.platform ?? platform() });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: opts.set ?? [], env: {}, runId: 'test-run' });
}

async function issues(config: string, opts: Parameters<typeof load>[1] = {}) {
  const err = await load(config, opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).exitCode).toBe(78);
  return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
}

const sqlOf = (step: { kind: string; command?: unknown; query?: unknown }) =>
  JSON.stringify(step.kind === 'command' ? step.command : step.query, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v));

describe('table-maintenance plan', () => {
  it('inspects and measures every table first, then acts, then measures again', async () => {
    const job = await load(`${header}\ntables = [ ${iceberg}, ${delta} ]`);
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'inspect-0',
      'inspect-1',
      'foreign-files-0',
      'measure-before-0',
      'measure-before-1',
      'compact-0',
      'rewrite-manifests-0',
      'expire-snapshots-0',
      'find-orphans-0',
      'remove-orphans-0',
      'last-commits-1',
      'optimize-1',
      'find-vacuum-1',
      'vacuum-1',
      'measure-after-0',
      'measure-after-1',
    ]);
    // Delta's own 7-day check stays on: 200 hours is above it.
    expect(job.plan.sessionConf).toBeUndefined();
    // No step carries tenant logic: nothing needs the read policy, and no config text is in the SQL.
    expect(job.plan.steps.filter((s) => s.untrusted)).toEqual([]);
  });

  it('builds the procedures from quoted names and validated values, with literal cut-offs', async () => {
    const before = Date.now();
    const job = await load(`${header}\ntables = [ ${iceberg}, ${delta} ]`);
    const text = formatPlan(job.plan);
    expect(text).toContain(
      "CALL `lake`.`system`.`rewrite_data_files`(table => '`acme_silver`.`orders`', strategy => 'sort', sort_order => '`id` ASC, `ts` DESC NULLS LAST', options => map('target-file-size-bytes', '67108864', 'min-input-files', '3', 'rewrite-all', 'false'))",
    );
    expect(text).toContain("CALL `lake`.`system`.`rewrite_manifests`(table => '`acme_silver`.`orders`')");
    const expire = /expire_snapshots`\(table => '`acme_silver`.`orders`', older_than => TIMESTAMP '([^']+)', retain_last => 3\)/.exec(text);
    expect(expire).not.toBeNull();
    const cutoff = Date.parse(expire![1]!);
    expect(before - cutoff).toBeGreaterThanOrEqual(200 * 3_600_000 - 5_000);
    expect(before - cutoff).toBeLessThanOrEqual(200 * 3_600_000 + 5_000);
    expect(text).toMatch(/remove_orphan_files`\(table => '`acme_silver`.`orders`', older_than => TIMESTAMP '[^']+', dry_run => true\)/);
    expect(text).toContain('OPTIMIZE `spark_catalog`.`acme_gold`.`daily` ZORDER BY (`day`, `id`)');
    expect(text).toContain('VACUUM `spark_catalog`.`acme_gold`.`daily` RETAIN 200 HOURS DRY RUN');
    expect(text).toContain('DESCRIBE TABLE EXTENDED `lake`.`acme_silver`.`orders`');
    expect(text).toContain('Table lake.acme_silver.orders.files');
  });

  it('zorder on Iceberg; binpack without options; removal only when the dry run found files', async () => {
    const job = await load(
      `${header}\ntables = [ { layer = bronze, table = "raw", compact { strategy = zorder, zorder-by = ["a"] }, remove-orphan-files { older-than-hours = 168 } }, { layer = silver, table = "x", compact {} } ]`,
    );
    const text = formatPlan(job.plan);
    expect(text).toContain("CALL `lake`.`system`.`rewrite_data_files`(table => '`acme_bronze`.`raw`', strategy => 'sort', sort_order => 'zorder(`a`)')");
    expect(text).toContain("CALL `lake`.`system`.`rewrite_data_files`(table => '`acme_silver`.`x`', strategy => 'binpack')");
    const remove = job.plan.steps.find((s) => s.id === 'remove-orphans-0')!;
    expect(remove.when?.(factsOf(job.plan.steps, { 'find-orphans-0': [{ n: 0 }] }))).toBe(false);
    expect(remove.when?.(factsOf(job.plan.steps, { 'find-orphans-0': [{ n: 2 }] }))).toBe(true);
  });

  it('validate and plan list what its SQL statements read and change (the sql tag names their tables)', async () => {
    const changed = (set: string[] = []) =>
      load(`${header}\ntables = [ ${iceberg}, ${delta} ]`, { set }).then((job) => {
        const access = planAccess(job.plan);
        return {
          reads: access.reads.map((a) => (a.kind === 'table' ? a.table : a.kind === 'path' ? a.path : a.kind)),
          writes: access.writes.map((a) => (a.kind === 'table' ? a.table : a.kind === 'path' ? a.path : a.kind)),
        };
      });
    const run = await changed();
    expect(run.writes.sort()).toEqual(['lake.acme_silver.orders', 'spark_catalog.acme_gold.daily']);
    const dry = await changed(['dry-run=true']);
    expect(dry.writes).toEqual([]);
    expect(dry.reads.sort()).toEqual(['lake.acme_silver.orders', 'spark_catalog.acme_gold.daily']);
  });

  it('a dry run sends nothing that changes a table', async () => {
    const job = await load(`${header}\ntables = [ ${iceberg}, ${delta} ]`, { set: ['dry-run=true'] });
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'inspect-0',
      'inspect-1',
      'foreign-files-0',
      'measure-before-0',
      'measure-before-1',
      'find-orphans-0',
      'find-vacuum-1',
    ]);
    expect(job.plan.steps.every((s) => s.kind === 'query')).toBe(true);
    for (const s of job.plan.steps) expect(sqlOf(s)).not.toMatch(/rewrite_data_files|expire_snapshots|OPTIMIZE|RETAIN \d+ HOURS"/);
  });

  it("turns Delta's 7-day VACUUM check off only below it and at or above the platform's floor", async () => {
    const job = await load(`${header}\ntables = [ { layer = silver, table = "d", catalog = "spark_catalog", vacuum { retain-hours = 24 } } ]`, {
      platform: platform('maintenance { retention-floor-hours = 24 }'),
    });
    expect(job.plan.sessionConf).toEqual({ 'spark.databricks.delta.retentionDurationCheck.enabled': 'false' });
  });

  it('reports the files and bytes before and after, and the dry runs, per table', async () => {
    const job = await load(`${header}\ntables = [ ${iceberg} ]`);
    const step = (id: string) => job.plan.steps.find((s) => s.id === id)!;
    const interpret = (id: string, rows: Record<string, unknown>[]) => {
      const s = step(id);
      if (s.kind !== 'query') throw new Error(id);
      return s.interpret(rows);
    };
    expect(interpret('measure-before-0', [{ files: 8, bytes: 8000n, snapshots: 9, expirable: 4 }]).output).toEqual({
      table: 'lake.acme_silver.orders',
      format: 'iceberg',
      location: 'file:///lake/acme/silver/orders',
      committed: false,
      metrics: { filesBefore: 8, bytesBefore: 8000, snapshotsBefore: 9, snapshotsExpirable: 4 },
    });
    expect(interpret('find-orphans-0', [{ n: 2n }]).output?.metrics).toEqual({ orphanFiles: 2 });
    expect(interpret('measure-after-0', [{ files: 1, bytes: 900, snapshots: 3, expirable: 0 }]).output).toMatchObject({
      committed: true,
      metrics: { filesAfter: 1, bytesAfter: 900, snapshotsAfter: 3 },
    });
  });

  it('inspect refuses a table at another location or in another format, and unknown sort columns (78, the table path)', async () => {
    const job = await load(`${header}\ntables = [ ${iceberg} ]`);
    const inspect = job.plan.steps[0]!;
    if (inspect.kind !== 'query') throw new Error('inspect is a query');
    const rows = (location: string, provider = 'iceberg', columns = ['id', 'ts']) => [
      ...columns.map((c) => ({ col_name: c, data_type: 'bigint' })),
      { col_name: '', data_type: '' },
      { col_name: '# Detailed Table Information', data_type: '' },
      { col_name: 'Provider', data_type: provider },
      { col_name: 'Location', data_type: location },
    ];
    expect(inspect.interpret(rows('file:/lake/acme/silver/orders')).fail).toBeUndefined();
    const elsewhere = inspect.interpret(rows('file:/lake/beta/silver/orders')).fail as ConfigError;
    expect(elsewhere.issues[0]).toMatchObject({ path: 'tables[0].table' });
    expect(elsewhere.message).toContain('file:///lake/acme/silver/orders');
    const prefix = inspect.interpret(rows('file:/lake/acme/silver/orders2')).fail as ConfigError;
    expect(prefix.issues[0]?.path).toBe('tables[0].table');
    expect((inspect.interpret(rows('file:/lake/acme/silver/orders', 'parquet')).fail as ConfigError).issues[0]?.path).toBe('tables[0].table');
    expect((inspect.interpret(rows('file:/lake/acme/silver/orders', 'iceberg', ['id'])).fail as ConfigError).issues[0]?.path).toBe(
      'tables[0].compact.sort-by[1]',
    );
  });
});

describe('table-maintenance refusals (78, with the path)', () => {
  it('a retention below the platform floor, for each action', async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "a", expire-snapshots { older-than-hours = 10 }, remove-orphan-files { older-than-hours = 30 } }, { layer = silver, table = "d", catalog = "spark_catalog", vacuum { retain-hours = 0 } } ]`,
    );
    expect(list).toEqual([
      expect.stringMatching(/^tables\[0\]\.expire-snapshots\.older-than-hours: is 10 hours, below the platform's retention floor of 168 hours/),
      expect.stringMatching(/^tables\[0\]\.remove-orphan-files\.older-than-hours: is 30 hours, below .* 168 hours/),
      expect.stringMatching(/^tables\[1\]\.vacuum\.retain-hours: is 0 hours, below .* 168 hours/),
    ]);
  });

  it("the platform's floor is its own: a lower one allows, a config cannot lower it", async () => {
    const config = `${header}\ntables = [ { layer = silver, table = "a", expire-snapshots { older-than-hours = 2 } } ]`;
    await expect(load(config, { platform: platform('maintenance { retention-floor-hours = 1 }') })).resolves.toBeDefined();
    expect(await issues(config, { platform: platform('maintenance { retention-floor-hours = 3 }') })).toEqual([
      expect.stringMatching(/retention floor of 3 hours/),
    ]);
    expect(await issues(`${config}\nmaintenance { retention-floor-hours = 0 }`)).toEqual([expect.stringMatching(/^maintenance: unknown key/)]);
  });

  it('orphan removal under 24 hours even with a floor of 0', async () => {
    const list = await issues(`${header}\ntables = [ { layer = silver, table = "a", remove-orphan-files { older-than-hours = 23 } } ]`, {
      platform: platform('maintenance { retention-floor-hours = 0 }'),
    });
    expect(list).toEqual([expect.stringMatching(/^tables\[0\]\.remove-orphan-files\.older-than-hours: must be at least 24 hours/)]);
  });

  it("another tenant's table cannot be named: names are one lower-case segment, layers are the three", async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "beta_silver.orders", compact {} }, { layer = "../beta", table = "x", compact {} }, { layer = silver, table = "../../beta/silver/orders", compact {} }, { layer = silver, table = "Orders", compact {} } ]`,
    );
    expect(list.map((l) => l.split(':')[0])).toEqual(['tables[0].table', 'tables[1].layer', 'tables[2].table', 'tables[3].table']);
  });

  it('format-specific actions on the other format', async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "i", vacuum { retain-hours = 200 } }, { layer = silver, table = "d", catalog = "spark_catalog", rewrite-manifests = true, expire-snapshots { older-than-hours = 200 }, remove-orphan-files { older-than-hours = 200 }, compact { strategy = sort, sort-by = ["id"], target-file-size-mb = 10 } } ]`,
    );
    expect(list.map((l) => l.split(':')[0])).toEqual([
      'tables[0].vacuum',
      'tables[1].rewrite-manifests',
      'tables[1].expire-snapshots',
      'tables[1].remove-orphan-files',
      'tables[1].compact.strategy',
      'tables[1].compact.target-file-size-mb',
    ]);
  });

  it('catalogs: unknown, or of the other format', async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "a", catalog = "nope", compact {} }, { layer = silver, table = "b", catalog = "lake", format = delta, compact {} } ]`,
    );
    expect(list.map((l) => l.split(':')[0])).toEqual(['tables[0].catalog', 'tables[1].format']);
  });

  it('schema: no action, duplicates, strategy keys, bounds, unknown keys', async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "a" }, { layer = silver, table = "b", compact { strategy = sort } }, { layer = silver, table = "b", compact { sort-by = ["x"], zorder-by = ["y", "y"] } }, { layer = silver, table = "c", expire-snapshots { older-than-hours = -1, retain-last = 0 }, vaccum {} } ]`,
    );
    const paths = list.map((l) => l.split(':')[0]);
    expect(paths).toEqual(
      expect.arrayContaining([
        'tables[0]',
        'tables[1].compact.sort-by',
        'tables[2].compact.sort-by',
        'tables[2].compact.zorder-by',
        'tables[2].compact.zorder-by[1]',
        'tables[2]',
        'tables[3].expire-snapshots.older-than-hours',
        'tables[3].expire-snapshots.retain-last',
        'tables[3].vaccum',
      ]),
    );
    expect(list.find((l) => l.startsWith('tables[3].vaccum: '))).toMatch(/vaccum.*did you mean "vacuum"/);
    expect(list.find((l) => l.startsWith('tables[2]: '))).toMatch(/same table as tables\[1\]/);
  });

  it('a sort column that is not a plain column name (no SQL text reaches the procedure)', async () => {
    const list = await issues(
      `${header}\ntables = [ { layer = silver, table = "a", compact { strategy = sort, sort-by = ["id') , older_than => TIMESTAMP '1970-01-01"] } } ]`,
    );
    expect(list[0]).toMatch(/^tables\[0\]\.compact\.sort-by\[0\]/);
  });
});

describe('table-maintenance: expire_snapshots never deletes files outside the table (adopted by reference)', () => {
  const expireOnly = (loc = '') =>
    `${header}\ntables = [ { layer = silver, table = "orders"${loc}, expire-snapshots { older-than-hours = 200, retain-last = 1 } } ]`;
  const query = (job: Awaited<ReturnType<typeof load>>) => {
    const s = job.plan.steps.find((x) => x.id === 'foreign-files-0');
    if (s?.kind !== 'query') throw new Error('foreign-files-0 is a query');
    return s;
  };

  it("checks every snapshot's files, manifests and manifest lists before anything changes, and refuses any outside the location (78)", async () => {
    const job = await load(expireOnly());
    const ids = job.plan.steps.map((s) => s.id);
    // After the inspection, before the measures and before any action: a refusal leaves the table as it was.
    expect(ids).toEqual(['inspect-0', 'foreign-files-0', 'measure-before-0', 'expire-snapshots-0', 'measure-after-0']);
    const step = query(job);
    const sql = JSON.stringify(step.query);
    // Every snapshot (all_files: data and delete files of all of them), not only the current one.
    for (const t of ['all_files', 'all_manifests', 'snapshots']) expect(sql).toContain(`"${t}"`);
    for (const p of ['file:///lake/acme/silver/orders/', 'file:/lake/acme/silver/orders/']) expect(sql).toContain(JSON.stringify(p));
    expect(step.interpret([{ files: 0n, manifests: 0n, lists: 0n }])).toEqual({});
    for (const row of [
      { files: 3n, manifests: 0n, lists: 0n },
      { files: 0n, manifests: 1n, lists: 0n },
      { files: 0n, manifests: 0n, lists: 2n },
    ]) {
      const fail = step.interpret([row]).fail as ConfigError;
      expect(fail).toBeInstanceOf(ConfigError);
      expect(fail.exitCode).toBe(78);
      expect(fail.issues[0]?.path).toBe('tables[0].expire-snapshots');
      expect(fail.message).toMatch(/outside its location file:\/\/\/lake\/acme\/silver\/orders .*iceberg-zero-copy-append/);
    }
    // The expire is the only action of the table: the refusal stops the run before it.
    expect(ids.indexOf('foreign-files-0')).toBeLessThan(ids.indexOf('expire-snapshots-0'));
  });

  it('in a dry run too; and no check for tables that expire nothing or are Delta', async () => {
    const dry = await load(expireOnly(), { set: ['dry-run=true'] });
    expect(dry.plan.steps.map((s) => s.id)).toContain('foreign-files-0');
    const other = await load(`${header}\ntables = [ { layer = silver, table = "a", compact {} }, ${delta} ]`);
    expect(other.plan.steps.map((s) => s.id).filter((id) => id.startsWith('foreign-files'))).toEqual([]);
  });

  it('a location prefix ends with a slash (orders2 is not under orders) in both spellings of a local path', () => {
    expect(locationPrefixes('file:///lake/acme/silver/orders')).toEqual(['file:///lake/acme/silver/orders/', 'file:/lake/acme/silver/orders/']);
    expect(locationPrefixes('file:/lake/acme/silver/orders/')).toEqual(['file:///lake/acme/silver/orders/', 'file:/lake/acme/silver/orders/']);
    expect(locationPrefixes('s3a://bucket/acme/silver/orders')).toEqual(['s3a://bucket/acme/silver/orders/', 's3://bucket/acme/silver/orders/']);
    expect(locationPrefixes('s3://bucket/acme/silver/orders/')).toEqual(['s3a://bucket/acme/silver/orders/', 's3://bucket/acme/silver/orders/']);
    expect(locationPrefixes('abfss://c@a.dfs.core.windows.net/acme/silver/orders')).toEqual(['abfss://c@a.dfs.core.windows.net/acme/silver/orders/']);
  });
});

describe('sameZorder: a Delta ZORDER is not repeated over nothing new', () => {
  it('is the latest commit that changed files an OPTIMIZE ZORDER BY exactly these columns', () => {
    const z = (operation: string, zorder_by: string | null = null) => ({ operation, zorder_by });
    expect(sameZorder([z('OPTIMIZE', '["id","ts"]')], ['id', 'ts'])).toBe(true);
    expect(sameZorder([z('VACUUM END'), z('VACUUM START'), z('OPTIMIZE', '["ID"]'), z('WRITE')], ['id'])).toBe(true);
    expect(sameZorder([z('WRITE'), z('OPTIMIZE', '["id"]')], ['id'])).toBe(false);
    expect(sameZorder([z('OPTIMIZE', '["ts","id"]')], ['id', 'ts'])).toBe(false);
    expect(sameZorder([z('OPTIMIZE', '[]')], ['id'])).toBe(false);
    expect(sameZorder([z('OPTIMIZE', 'not json')], ['id'])).toBe(false);
    expect(sameZorder([z('VACUUM END')], ['id'])).toBe(false);
    expect(sameZorder(undefined, ['id'])).toBe(false);
  });
});
