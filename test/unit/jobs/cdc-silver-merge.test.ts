import { describe, expect, it } from 'vitest';
import { factsOf } from '../../support/facts.js';
import type { Row } from '../../../src/jobs/steps.js';
import { ConfigError, DataError, InputMissingError, UsageError } from '../../../src/core/errors.js';
import type { Step } from '../../../src/jobs/template.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { templates } from '../../../src/jobs/registry.js';
import { stepPlan } from '../../../src/runner/executor.js';
import { toJson } from '@bufbuild/protobuf';
import { PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import { configIssues, loadConfig } from '../../support/load.js';

const valid = `
job    { template = "cdc-silver-merge", schema-version = 1, name = "acme-orders" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'" }
cdc { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }
`;

const platform = `
catalogs { lake { format = iceberg, default = true } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;

const load = loadConfig;

describe('cdc-silver-merge v1 config', () => {
  it('accepts the seed shape and derives names from the tenant', async () => {
    const job = await load(valid, { platform });
    expect(job.template.name).toBe('cdc-silver-merge');
    expect(job.version.version).toBe(1);
    expect(job.tenant.location('silver', 'orders')).toBe('file:///lake/acme/silver/orders');
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'probe-files-only',
      'batch-fingerprint',
      'check-source-columns',
      'check-batch',
      'check-keys',
      'create-namespace',
      'create-table',
      'create-tombstones',
      'check-schema',
      'base-commits',
      'measure',
      'record-tombstones',
      'merge',
      'window-commits',
      'find-resurrected',
      'delete-resurrected',
      'expire-tombstones',
      'read-snapshot',
    ]);
    // Writes that would change nothing are not sent: no empty commit on a rerun.
    const when = Object.fromEntries(
      job.plan.steps.filter((s) => s.when).map((s) => [s.id, (byId: Record<string, Row[]>) => s.when!(factsOf(job.plan.steps, byId))]),
    );
    // Every step after the fingerprint is guarded by it: the batch silver's current commit applied sends nothing more.
    const guarded = job.plan.steps.slice(2).map((s) => s.id);
    expect(Object.keys(when)).toEqual(guarded);
    for (const f of Object.values(when))
      expect(f({ 'batch-fingerprint': [{ fingerprint: 'f', unchanged: 1 }], measure: [{ inserted: 1, tombstones: 1 }] })).toBe(false);
    const conditional = ['check-keys', 'record-tombstones', 'merge', 'find-resurrected', 'delete-resurrected', 'expire-tombstones', 'read-snapshot'];
    for (const id of guarded.filter((id) => !conditional.includes(id)))
      expect(when[id]!({ 'batch-fingerprint': [{ fingerprint: 'f', unchanged: 0 }] })).toBe(true);
    for (const id of Object.keys(when)) if (!conditional.includes(id)) delete when[id];
    // A rerun: nothing to write, no other writer since the first read, no stale row: no second look.
    const attempt = job.context.attempt!;
    const current = (commit: string) => [{ tbl: 'silver', commit, parent: null, attempt: null, current: true }];
    const nothing = {
      measure: [{ inserted: 0, updated: 0, deleted: 0, late: 3, tombstones: 0, stale: 0, expired: 0 }],
      'base-commits': [
        { tbl: 'silver', commit: '7' },
        { tbl: 'tombstones', commit: '9' },
      ],
      'window-commits': [...current('7'), { tbl: 'tombstones', commit: '9', parent: null, attempt: null, current: true }],
      'find-resurrected': [{ rows: 0 }],
    };
    for (const f of Object.values(when)) expect(f(nothing)).toBe(false);
    // The look is taken when a row was already older than its tombstone, when the commits were not
    // read, and when another writer committed to either table since the first read.
    expect(when['find-resurrected']!({ ...nothing, measure: [{ ...nothing.measure[0], stale: 1 }] })).toBe(true);
    expect(when['find-resurrected']!({ measure: nothing.measure })).toBe(true);
    const foreign = { tbl: 'silver', commit: '8', parent: '7', attempt: 'another', current: false };
    expect(
      when['find-resurrected']!({
        ...nothing,
        'window-commits': [foreign, ...nothing['window-commits'].map((r) => (r.tbl === 'silver' ? { ...r, commit: '8' } : r))],
      }),
    ).toBe(true);
    // This run's own merge commit (stamped with its attempt) is no other writer.
    const ours = { ...foreign, attempt };
    expect(
      when['find-resurrected']!({
        ...nothing,
        measure: [{ ...nothing.measure[0], updated: 1 }],
        'window-commits': [ours, ...nothing['window-commits'].map((r) => (r.tbl === 'silver' ? { ...r, commit: '8' } : r))],
      }),
    ).toBe(false);
    expect(when['merge']!({ measure: [{ inserted: 0, updated: 1, deleted: 0 }] })).toBe(true);
    expect(when['record-tombstones']!({ measure: [{ tombstones: 2 }] })).toBe(true);
    expect(when['delete-resurrected']!({ 'find-resurrected': [{ rows: 1 }] })).toBe(true);
    expect(when['expire-tombstones']!({ measure: [{ ...nothing.measure[0], expired: 5 }] })).toBe(true);
    // window-commits reported silver's snapshot; it is read again only after the look deleted rows.
    expect(when['read-snapshot']!({ 'find-resurrected': [{ rows: 2 }] })).toBe(true);
  });

  it('reports every error at once, each with its path', async () => {
    const issues = await configIssues(
      `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "Acme", storage-root = "lake/acme" }
source { tabel = "orders_cdc" }
cdc { primary-key = [], sequence-by = "ts", delete-values = ["d"] }
target { table = "orders; DROP TABLE x" }
`,
    );
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i.message]));
    expect(byPath['tenant.id']).toMatch(/must match/);
    expect(byPath['tenant.storage-root']).toMatch(/absolute URI/);
    expect(byPath['source.tabel']).toMatch(/did you mean "table"/);
    // One problem, not two: the misspelling stands for the required key it names.
    expect(byPath['source.table']).toBeUndefined();
    expect(byPath['cdc.primary-key']).toMatch(/at least one key/);
    expect(byPath['cdc.delete-values']).toMatch(/needs cdc.op-column/);
    expect(byPath['target.table']).toMatch(/must match/);
    expect(issues.length).toBeGreaterThanOrEqual(6);
  });

  it('rejects an unknown job.template with a hint: the config is wrong (78, at job.template)', async () => {
    const err = await load(valid.replace('"cdc-silver-merge"', '"cdc-silver-merg"')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      // The catalog grows: the known templates are whatever the registry lists.
      {
        path: 'job.template',
        message: `unknown template "cdc-silver-merg"; did you mean "cdc-silver-merge"? (known: ${templates.map((t) => t.name).join(', ')})`,
      },
    ]);
    expect((err as ConfigError).exitCode).toBe(78);
  });

  it('rejects an unknown --job with a hint (usage, 64)', async () => {
    const err = await load(valid.replace('template = "cdc-silver-merge", ', ''), { job: 'cdc-silver-merg' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).message).toMatch(/did you mean "cdc-silver-merge"/);
    expect((err as UsageError).exitCode).toBe(64);
  });

  it('says which side of a --job / job.template disagreement looks misspelled', async () => {
    expect(await configIssues(valid, { job: 'cdc-silver-merg' })).toEqual([
      { path: 'job.template', message: 'is "cdc-silver-merge" but --job says "cdc-silver-merg"; did you mean --job cdc-silver-merge?' },
    ]);
    expect(await configIssues(valid.replace('"cdc-silver-merge"', '"cdc-silvr-merge"'), { job: 'cdc-silver-merge' })).toEqual([
      { path: 'job.template', message: 'is "cdc-silvr-merge" but --job says "cdc-silver-merge"; did you mean job.template = "cdc-silver-merge"?' },
    ]);
  });

  it('rejects --job that differs from job.template', async () => {
    const issues = await configIssues(valid, { job: 'jdbc-snapshot-ingest' });
    expect(issues).toEqual([{ path: 'job.template', message: 'is "cdc-silver-merge" but --job says "jdbc-snapshot-ingest"' }]);
  });

  it('rejects an unsupported schema-version, naming the supported ones', async () => {
    const issues = await configIssues(valid.replace('schema-version = 1', 'schema-version = 7'));
    expect(issues[0]).toEqual({ path: 'job.schema-version', message: '7 is not supported by cdc-silver-merge (supported: 1, 2)' });
  });

  it('rejects the sequence column inside the key and bronze metadata columns as CDC columns', async () => {
    const issues = await configIssues(valid.replace('sequence-by = "ts"', 'sequence-by = "id"').replace('op-column = "op"', 'op-column = "_lake_source"'));
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(['cdc.sequence-by', 'cdc']));
  });

  it('enforces the tenant policy of the platform config', async () => {
    const outside = await configIssues(valid.replace('file:///lake/acme', 'file:///lake/globex'), { platform });
    expect(outside).toEqual([expect.objectContaining({ path: 'tenant.storage-root', message: expect.stringMatching(/outside the storage roots/) })]);
    const sibling = await configIssues(valid.replace('file:///lake/acme', 'file:///lake/acme2'), { platform });
    expect(sibling[0]?.path).toBe('tenant.storage-root');
    const unknown = await configIssues(valid.replace('id = "acme"', 'id = "globex"'), { platform });
    expect(unknown[0]).toEqual({ path: 'tenant.id', message: 'tenant "globex" is not known to the platform config' });
  });

  it('rejects a catalog the platform does not configure', async () => {
    const issues = await configIssues(valid.replace('catalog = "lake"', 'catalog = "hms"'), { platform });
    expect(issues[0]?.path).toBe('target.catalog');
    expect(issues[0]?.message).toMatch(/not configured by the platform \(configured: lake\)/);
  });

  it('applies --set overrides', async () => {
    const job = await load(valid, { set: ['source.where="_snapshot_date = \'2026-07-06\'"'] });
    expect(job.config.source.where?.text).toBe("_snapshot_date = '2026-07-06'");
  });

  it('reports a missing config file as input missing (66)', async () => {
    const err = await loadJob({ configFile: '/nonexistent/job.conf', env: {}, runId: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputMissingError);
    expect((err as InputMissingError).exitCode).toBe(66);
  });

  it("refuses a bronze column named like the plan's internal ones (__lake_…, 65 at source.table) before any config logic runs", async () => {
    const job = await load(valid, { platform });
    const check = job.plan.steps.find((s) => s.id === 'check-source-columns') as Extract<Step, { kind: 'checkColumns' }>;
    expect(check.kind).toBe('checkColumns');
    expect(check.untrusted).toBeUndefined();
    const columns = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    expect(check.interpret(columns('id', 'ts', 'op', '__deleted', '_lake_note', '_lake_tenant'))).toEqual({});
    const e = check.interpret(columns('id', 'ts', 'op', '__LAKE_delete', '__lake_rn')).fail as DataError;
    expect(e).toBeInstanceOf(DataError);
    expect(e.report()).toMatchObject({ code: 'SOURCE_COLUMN_RESERVED', path: 'source.table' });
    expect(e.message).toContain(
      'source.table: file:///lake/acme/bronze/orders_cdc has column(s) "__LAKE_delete", "__lake_rn" named like cdc-silver-merge\'s own',
    );
  });

  it('refuses a key, sequence or op column bronze does not have: 78 at its path, "did you mean" from bronze\'s own columns, before anything is written', async () => {
    const job = await load(valid, { platform });
    const check = job.plan.steps.find((s) => s.id === 'check-source-columns') as Extract<Step, { kind: 'checkColumns' }>;
    expect(job.plan.steps.findIndex((s) => s.id === 'check-source-columns')).toBeLessThan(job.plan.steps.findIndex((s) => s.id === 'create-namespace'));
    const columns = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    // Spark resolves names case-insensitively: ID is id.
    expect(check.interpret(columns('ID', 'Ts', 'OP', 'v'))).toEqual({});
    const e = check.interpret(columns('order_id', 'tss', 'v', '_lake_tenant')).fail as ConfigError;
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.exitCode).toBe(78);
    expect(e.issues).toEqual([
      { path: 'cdc.primary-key[0]', message: 'column "id" is not a column of file:///lake/acme/bronze/orders_cdc' },
      { path: 'cdc.sequence-by', message: 'column "ts" is not a column of file:///lake/acme/bronze/orders_cdc; did you mean "tss"?' },
      { path: 'cdc.op-column', message: 'column "op" is not a column of file:///lake/acme/bronze/orders_cdc' },
    ]);
  });
});

describe('cdc-silver-merge v1 plans', () => {
  it('sends config values as literals and expressions, never inside statement text', async () => {
    const job = await load(valid.replace('delete-values = ["d"]', `delete-values = ["d'); DROP TABLE x; --"]`), { platform });
    const json = JSON.stringify(job.plan.steps.map((s) => toJson(PlanSchema, stepPlan(s, { reveal: false }))));
    // The hostile delete value travels only as a string literal.
    expect(json).toContain(`"string":"d'); DROP TABLE x; --"`);
    const statements = [...json.matchAll(/"query":"([^"]*)"/g)].map((m) => m[1]);
    // Only validated, quoted table names reach statement text (the commit-window reads of metadata tables).
    expect(statements).toEqual([
      "SELECT 'stamp' AS kind, CAST(snapshot_id AS STRING) AS snapshot, summary['lakehouse-jobs.batch'] AS batch, summary['lakehouse-jobs.batch-keys'] AS batch_keys, summary['lakehouse-jobs.tombstones-at'] AS tombstones_at, summary['lakehouse-jobs.attempt'] AS attempt, NULL AS parent FROM `lake`.`acme_silver`.`orders`.`snapshots` WHERE summary['lakehouse-jobs.batch'] IS NOT NULL UNION ALL SELECT 'tombstone-commit', CAST(snapshot_id AS STRING), NULL, NULL, NULL, summary['lakehouse-jobs.attempt'], CAST(parent_id AS STRING) FROM `lake`.`acme_silver`.`orders__cdc_tombstones`.`snapshots` UNION ALL SELECT 'silver', CAST(snapshot_id AS STRING), NULL, NULL, NULL, NULL, NULL FROM `lake`.`acme_silver`.`orders`.`refs` WHERE name = 'main' UNION ALL SELECT 'tombstones', CAST(snapshot_id AS STRING), NULL, NULL, NULL, NULL, NULL FROM `lake`.`acme_silver`.`orders__cdc_tombstones`.`refs` WHERE name = 'main'",
      'CREATE NAMESPACE IF NOT EXISTS `lake`.`acme_silver`',
      "SELECT 'silver' AS tbl, CAST(snapshot_id AS STRING) AS commit FROM `lake`.`acme_silver`.`orders`.`refs` WHERE name = 'main' UNION ALL SELECT 'tombstones' AS tbl, CAST(snapshot_id AS STRING) AS commit FROM `lake`.`acme_silver`.`orders__cdc_tombstones`.`refs` WHERE name = 'main'",
      "SELECT 'silver' AS tbl, CAST(snapshot_id AS STRING) AS commit, CAST(parent_id AS STRING) AS parent, summary['lakehouse-jobs.attempt'] AS attempt, false AS current FROM `lake`.`acme_silver`.`orders`.`snapshots` UNION ALL SELECT 'silver', CAST(snapshot_id AS STRING), NULL, NULL, true FROM `lake`.`acme_silver`.`orders`.`refs` WHERE name = 'main' UNION ALL SELECT 'tombstones' AS tbl, CAST(snapshot_id AS STRING) AS commit, CAST(parent_id AS STRING) AS parent, summary['lakehouse-jobs.attempt'] AS attempt, false AS current FROM `lake`.`acme_silver`.`orders__cdc_tombstones`.`snapshots` UNION ALL SELECT 'tombstones', CAST(snapshot_id AS STRING), NULL, NULL, true FROM `lake`.`acme_silver`.`orders__cdc_tombstones`.`refs` WHERE name = 'main'",
      'DELETE FROM `lake`.`acme_silver`.`orders__cdc_tombstones` WHERE `_cdc_deleted_at` < current_timestamp() - make_dt_interval(30)',
    ]);
    // source.where is parsed into plan nodes: a quoted column compared with a literal, never SQL text.
    expect(json).toContain(
      '"condition":{"unresolvedFunction":{"functionName":"==","arguments":[{"unresolvedAttribute":{"unparsedIdentifier":"`_snapshot_date`"}},{"literal":{"string":"2026-07-05"}}]}}}}',
    );
    expect(json).not.toContain('expressionString');
    // MERGE into the quoted target, keys compared null-safely.
    expect(json).toContain('"targetTableName":"`lake`.`acme_silver`.`orders`"');
    expect(json).toContain('"functionName":"<=>"');
  });
});

const v2 = `
job    { template = "cdc-silver-merge", schema-version = 2 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc" }
cdc {
  primary-key = ["order_id"]
  sequence-by = ["source_ts", "kafka_offset"]
  delete-when = "op = 'd'"
  tombstone-retention-days = 7
}
columns { exclude = ["raw"] }
schema-evolution = add-columns
target { table = "orders", format = delta, catalog = "spark_catalog" }
`;
const platform2 = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
`;

describe('cdc-silver-merge v2 config', () => {
  it('accepts ordered sequences, delete-when, column selection, schema evolution and the format', async () => {
    const job = await load(v2, { platform: platform2 });
    expect(job.version.version).toBe(2);
    expect(job.config.cdc['sequence-by']).toEqual(['source_ts', 'kafka_offset']);
    expect(job.plan.steps.at(-1)?.id).toBe('read-version');
    const json = JSON.stringify(job.plan.steps.map((s) => toJson(PlanSchema, stepPlan(s, { reveal: false }))));
    // delete-when, parsed: coalesce(op = 'd', false), so a NULL op is an upsert.
    expect(json).toContain(
      '{"unresolvedFunction":{"functionName":"coalesce","arguments":[{"unresolvedFunction":{"functionName":"==","arguments":[{"unresolvedAttribute":{"unparsedIdentifier":"`op`"}},{"literal":{"string":"d"}}]}},{"literal":{"boolean":false}}]}}',
    );
    expect(json).not.toContain('expressionString');
    expect(json).toContain('make_dt_interval(7)');
  });

  it('accepts a single sequence column as a string', async () => {
    const job = await load(v2.replace('["source_ts", "kafka_offset"]', '"source_ts"'), { platform: platform2 });
    expect(job.config.cdc['sequence-by']).toEqual(['source_ts']);
  });

  it('rejects delete-when together with op-column, excluding a key, include with exclude, and a format the catalog does not hold', async () => {
    const both = await configIssues(v2.replace('tombstone-retention-days = 7', 'tombstone-retention-days = 7, op-column = "op"'), { platform: platform2 });
    expect(both.map((i) => i.path)).toContain('cdc.delete-when');
    const key = await configIssues(v2.replace('exclude = ["raw"]', 'exclude = ["raw", "order_id"]'), { platform: platform2 });
    expect(key).toContainEqual({ path: 'columns.exclude[1]', message: '"order_id" is a key or sequence column and cannot be excluded' });
    const inc = await configIssues(v2.replace('exclude = ["raw"]', 'exclude = ["raw"], include = ["x"]'), { platform: platform2 });
    expect(inc.map((i) => i.path)).toContain('columns');
    const fmt = await configIssues(v2.replace('catalog = "spark_catalog"', 'catalog = "lake"'), { platform: platform2 });
    expect(fmt).toEqual([{ path: 'target.format', message: 'is delta, but catalog "lake" holds iceberg tables' }]);
    const evo = await configIssues(v2.replace('schema-evolution = add-columns', 'schema-evolution = merge'), { platform: platform2 });
    expect(evo[0]).toMatchObject({ path: 'schema-evolution', message: expect.stringContaining('"fail", "add-columns"') });
    const ret = await configIssues(v2.replace('tombstone-retention-days = 7', 'tombstone-retention-days = 0'), { platform: platform2 });
    expect(ret[0]?.path).toBe('cdc.tombstone-retention-days');
  });
});

describe('config expressions', () => {
  const where = (expr: string) => valid.replace(`where = "_snapshot_date = '2026-07-05'"`, `where = "${expr}"`);

  it('refuse subqueries and reflection at their position: an expression sees only its row', async () => {
    expect(await configIssues(where('id IN (SELECT id FROM lake.globex_silver.orders)'))).toEqual([
      {
        path: 'source.where',
        message: 'at position 8: unexpected "SELECT" (subqueries and table references are not allowed: an expression sees only the columns of its row)',
      },
    ]);
    expect(await configIssues(where("java_method('java.lang.System', 'exit', 1) IS NULL"))).toEqual([
      { path: 'source.where', message: 'at position 1: function java_method is not allowed: reflection runs Java code on the shared server' },
    ]);
    expect(await configIssues(where('`reflect`(1)'))).toEqual([{ path: 'source.where', message: 'at position 1: backticked function names are not allowed' }]);
  });

  it('refuse delete-when outside the grammar, at cdc.delete-when', async () => {
    const issues = await configIssues(v2.replace(`delete-when = "op = 'd'"`, `delete-when = "op = 'd' OR EXISTS (TABLE lake.globex_silver.orders)"`), {
      platform: platform2,
    });
    expect(issues).toEqual([
      {
        path: 'cdc.delete-when',
        message: 'at position 13: unexpected "EXISTS" (subqueries and table references are not allowed: an expression sees only the columns of its row)',
      },
    ]);
  });

  it('refuse an empty or overlong expression', async () => {
    expect(await configIssues(where('  '))).toEqual([{ path: 'source.where', message: 'at position 1: is empty' }]);
    expect(await configIssues(where(''))).toEqual([{ path: 'source.where', message: 'source.where must not be empty' }]);
    expect(await configIssues(where(`a IN (${'1, '.repeat(5_000)}1)`))).toEqual([
      { path: 'source.where', message: 'source.where is longer than 10000 characters' },
    ]);
  });
});

describe('cdc-silver-merge: a rerun of the batch silver applied', () => {
  type Fp = Extract<Step, { kind: 'fingerprint' }>;
  const plan = async (text = valid) => {
    const job = await load(text, { platform });
    const fp = job.plan.steps.find((s): s is Fp => s.kind === 'fingerprint')!;
    const merge = job.plan.steps.find((s) => s.id === 'merge')!;
    return { job, fp, merge };
  };
  // Silver's main branch at 20, stamped by attempt A with batch F; the tombstones' commits.
  const rows = (over: { at?: string; batch?: string; silver?: string; tombstones?: string; commits?: Row[] } = {}): Row[] => [
    { kind: 'stamp', snapshot: '20', batch: over.batch ?? 'F', batch_keys: '4', tombstones_at: over.at ?? '9', attempt: 'A', parent: null },
    ...(over.commits ?? [{ kind: 'tombstone-commit', snapshot: '9', attempt: 'Z', parent: '8' }]),
    { kind: 'silver', snapshot: over.silver ?? '20' },
    ...(over.tombstones === 'none' ? [] : [{ kind: 'tombstones', snapshot: over.tombstones ?? '9' }]),
  ];

  it('reports what the full rerun reports, without reading, only when both tables are as the MERGE left them', async () => {
    const { fp } = await plan();
    expect(fp.interpret('F', rows())).toEqual({
      unchanged: true,
      output: {
        table: 'lake.acme_silver.orders',
        format: 'iceberg',
        location: 'file:///lake/acme/silver/orders',
        committed: false,
        snapshotId: '20',
        metrics: { inserted: 0, updated: 0, deleted: 0, late: 4 },
      },
    });
    // Another batch; another commit of silver (or a rollback to another snapshot); the tombstones moved on.
    expect(fp.interpret('G', rows()).unchanged).toBeUndefined();
    expect(fp.interpret('F', rows({ silver: '21' })).unchanged).toBeUndefined();
    expect(fp.interpret('F', rows({ tombstones: '10' })).unchanged).toBeUndefined();
    expect(fp.interpret('F', rows({ tombstones: 'none' })).unchanged).toBeUndefined();
    // A first run: no table, no rows.
    expect(fp.interpret('F', []).unchanged).toBeUndefined();
    // Tombstones without a commit then and now.
    expect(fp.interpret('F', rows({ at: 'none', tombstones: 'none', commits: [] })).unchanged).toBe(true);
  });

  it("records both tables' main refs as the commit window's base, so that base-commits is not sent", async () => {
    const { job, fp, merge } = await plan();
    expect(fp.interpret('G', rows()).commits).toEqual({ silver: '20', tombstones: '9' });
    expect(fp.interpret('G', rows({ tombstones: 'none' })).commits).toEqual({ silver: '20', tombstones: null });
    // A missing table (the read failed: no rows): the base is read after the creates.
    expect(fp.interpret('G', []).commits).toBeUndefined();
    const base = job.plan.steps.find((s) => s.id === 'base-commits')!;
    const known = { 'batch-fingerprint': [{ fingerprint: 'F', unchanged: 0, commits: { silver: '20', tombstones: '9' } }] };
    expect(base.when!(factsOf(job.plan.steps, known))).toBe(false);
    expect(base.when!(factsOf(job.plan.steps, { 'batch-fingerprint': [{ fingerprint: 'F', unchanged: 0, commits: null }] }))).toBe(true);
    // The MERGE's stamp takes the tombstones' base from it; a tombstone table without a commit is `none`.
    const measured = { 'check-batch': [{ events: 6, keys: 4, flagged: 0 }], measure: [{ inserted: 1, tombstones: 0 }] };
    expect(merge.stamp!(factsOf(job.plan.steps, { ...known, ...measured }))).toEqual({ batch: 'F', 'batch-keys': '4', 'tombstones-at': '9' });
    const none = { 'batch-fingerprint': [{ fingerprint: 'F', unchanged: 0, commits: { silver: '20', tombstones: null } }] };
    expect(merge.stamp!(factsOf(job.plan.steps, { ...none, ...measured }))).toEqual({ batch: 'F', 'batch-keys': '4', 'tombstones-at': 'none' });
    // The look's window check reads no base step then: the run's own MERGE on 20 is a clean window.
    const look = job.plan.steps.find((s) => s.id === 'find-resurrected')!;
    const window = [
      { tbl: 'silver', commit: '21', parent: '20', attempt: job.context.attempt, current: false },
      { tbl: 'silver', commit: '21', parent: null, attempt: null, current: true },
      { tbl: 'tombstones', commit: '9', parent: null, attempt: null, current: true },
    ];
    const after = { ...known, measure: [{ inserted: 1, updated: 0, deleted: 0, late: 0, tombstones: 0, stale: 0, expired: 0 }], 'window-commits': window };
    expect(look.when!(factsOf(job.plan.steps, after))).toBe(false);
    expect(look.when!(factsOf(job.plan.steps, { ...after, 'window-commits': window.map((r) => ({ ...r, attempt: r.attempt && 'another' })) }))).toBe(true);
  });

  it('takes the tombstones the MERGE recorded itself only as its own one commit on the base', async () => {
    const { fp } = await plan();
    const own = (attempt: string, parent: string) =>
      rows({ at: '9+1', tombstones: '10', commits: [{ kind: 'tombstone-commit', snapshot: '10', attempt, parent }] });
    expect(fp.interpret('F', own('A', '9')).unchanged).toBe(true);
    // Another writer's commit, or ours on another base (an expiry after the MERGE is a commit on ours).
    expect(fp.interpret('F', own('B', '9')).unchanged).toBeUndefined();
    expect(fp.interpret('F', own('A', '10')).unchanged).toBeUndefined();
  });

  it("stamps the MERGE's commit with the batch, its keys and the tombstones' base", async () => {
    const { job, fp, merge } = await plan();
    const facts = (tombstones: number) =>
      factsOf(job.plan.steps, {
        'batch-fingerprint': [{ fingerprint: 'F', unchanged: 0 }],
        'check-batch': [{ events: 6, keys: 4, flagged: 0 }],
        'base-commits': [
          { tbl: 'silver', commit: '19' },
          { tbl: 'tombstones', commit: '9' },
        ],
        measure: [{ inserted: 1, updated: 0, deleted: 0, late: 3, tombstones: tombstones, stale: 0 }],
      });
    expect(merge.stamp!(facts(0))).toEqual({ batch: 'F', 'batch-keys': '4', 'tombstones-at': '9' });
    expect(merge.stamp!(facts(2))).toEqual({ batch: 'F', 'batch-keys': '4', 'tombstones-at': '9+1' });
    expect(fp.identity).toContain('_snapshot_date');
    // Another source.where is another batch.
    const other = await plan(valid.replace("'2026-07-05'", "'2026-07-06'"));
    expect(other.fp.identity).not.toBe(fp.identity);
  });

  it('is not planned for Delta silver or table bronze', async () => {
    const delta = await load(v2, { platform: platform2 });
    expect(delta.plan.steps.some((s) => s.kind === 'fingerprint')).toBe(false);
  });
});
