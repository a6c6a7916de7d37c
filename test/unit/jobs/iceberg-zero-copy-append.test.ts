import { join } from 'node:path';
import { instant } from '../../../src/core/instant.js';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { describe, expect, it } from 'vitest';
import { type LakehouseError } from '../../../src/core/errors.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { configIssues as refusedIssues } from '../../support/load.js';
import { formatPlan, planAccess } from '../../../src/app/plan-view.js';
import { CHECK_COLUMNS, CHECK_TYPE, COMMIT_TYPE, judge, resolve, shouldAppend } from '../../../src/jobs/ops/iceberg-zero-copy-append.js';
import type { Step, TypedRow } from '../../../src/jobs/template.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';

const valid = `
job    { template = "iceberg-zero-copy-append", schema-version = 1, name = "acme-history" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_2025" }
target { table = "orders_history", catalog = "lake" }
`;

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants {
  acme {
    storage-roots = ["file:///lake/acme"]
    read-namespaces = ["lake.shared_ref"]
    read-roots = ["file:///lake/shared"]
  }
}
`;

async function load(config: string, opts: { platform?: string; set?: string[] } = {}) {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': opts.platform ?? platform });
  return loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: opts.set ?? [], env: {}, runId: 'run-1' });
}

const configIssues = (config: string, opts: Parameters<typeof load>[1] = {}) => refusedIssues(config, { ...opts, platform: opts.platform ?? platform });

/** The string fields of an extension's message, decoded from the wire format as the plugin does. */
function decodeFields(value: Uint8Array): [number, string][] {
  const r = new BinaryReader(value);
  const out: [number, string][] = [];
  while (r.pos < r.len) {
    const [field] = r.tag();
    out.push([field, r.string()]);
  }
  return out;
}

const step = (steps: readonly Step[], id: string) => steps.find((s) => s.id === id)!;

describe('iceberg-zero-copy-append: config', () => {
  it('accepts the minimal config with layer defaults (silver)', async () => {
    const job = await load(valid);
    expect(job.config.source).toEqual({ table: 'orders_2025', layer: 'silver' });
    expect(job.config.target).toEqual({ table: 'orders_history', layer: 'silver', catalog: 'lake' });
  });

  it('refuses unknown keys, bad names and layers, each at its path (78)', async () => {
    const issues = await configIssues(valid, { set: ['source.tabel=x', 'target.layer=platinum', 'source.table="../beta_silver"'] });
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['source.tabel', 'target.layer', 'source.table']));
  });

  it('refuses appending a table to itself (78 at target.table)', async () => {
    const issues = await configIssues(valid, { set: ['target.table=orders_2025'] });
    expect(issues).toEqual([expect.objectContaining({ path: 'target.table', message: expect.stringMatching(/cannot be appended to itself/) })]);
  });

  it('refuses a Delta catalog (78 at target.catalog)', async () => {
    const issues = await configIssues(valid, { set: ['target.catalog=spark_catalog'] });
    expect(issues).toEqual([expect.objectContaining({ path: 'target.catalog', message: expect.stringMatching(/holds delta tables/) })]);
  });

  it("refuses a source namespace the platform does not grant, e.g. another tenant's layer (78 at source.namespace)", async () => {
    for (const ns of ['beta_silver', 'shared_other']) {
      const issues = await configIssues(valid, { set: [`source.namespace=${ns}`] });
      expect(issues).toEqual([
        expect.objectContaining({ path: 'source.namespace', message: expect.stringMatching(/not a namespace the platform grants tenant acme/) }),
      ]);
    }
  });
});

describe('iceberg-zero-copy-append: the plan', () => {
  it('checks with the plugin relation, appends with the plugin command, reads the snapshot', async () => {
    const { plan } = await load(valid);
    expect(plan.steps.map((s) => s.id)).toEqual(['check', 'append', 'read-snapshot']);
    const check = step(plan.steps, 'check');
    const append = step(plan.steps, 'append');
    if (check.kind !== 'query' || append.kind !== 'command') throw new Error('unexpected step kinds');
    expect(check.untrusted).toBeUndefined();

    const rel = compileRelationPlan(check.query.rel, { reveal: false });
    expect(rel.opType.case).toBe('root');
    const any = rel.opType.case === 'root' && rel.opType.value.relType.case === 'extension' ? rel.opType.value.relType.value : undefined;
    expect(any?.typeUrl).toBe(CHECK_TYPE);
    expect(decodeFields(any!.value)).toEqual([
      [1, '`lake`.`acme_silver`.`orders_2025`'],
      [2, '`lake`.`acme_silver`.`orders_history`'],
      [3, 'file:///lake/acme'],
      [4, 'run-1'],
    ]);

    const cmd = compileCommandPlan(append.command, { reveal: false });
    const cany = cmd.opType.case === 'command' && cmd.opType.value.commandType.case === 'extension' ? cmd.opType.value.commandType.value : undefined;
    expect(cany?.typeUrl).toBe(COMMIT_TYPE);
    expect(decodeFields(cany!.value).map(([f]) => f)).toEqual([1, 2, 3, 4]);
  });

  it('shows the plugin steps in `plan` and lists what they read and write in `validate`', async () => {
    const { plan } = await load(valid);
    const text = formatPlan(plan);
    expect(text).toContain('Extension lakehouse.jobs.ZeroCopyAppendCheck');
    expect(text).toContain('Extension lakehouse.jobs.ZeroCopyAppendCommit');
    expect(text).toContain('source = "`lake`.`acme_silver`.`orders_2025`"');
    const access = planAccess(plan);
    expect(access.writes.map((w) => (w.kind === 'table' ? w.table : w.kind === 'path' ? w.path : w.kind))).toEqual(['lake.acme_silver.orders_history']);
    expect(access.reads.map((r) => (r.kind === 'table' ? r.table : r.kind === 'path' ? r.path : r.kind))).toEqual(
      expect.arrayContaining(['lake.acme_silver.orders_2025', 'lake.acme_silver.orders_history']),
    );
  });

  it('a granted source namespace: the source there, its granted roots allowed too', async () => {
    const { context, config } = await load(valid, { set: ['source.namespace=shared_ref', 'source.table=countries'] });
    const r = resolve(context, config as never);
    expect(r.source).toEqual({ catalog: 'lake', namespace: 'shared_ref', table: 'countries' });
    expect(r.roots).toEqual(['file:///lake/acme', 'file:///lake/shared']);
  });

  it("the tenant's own source: only its own storage roots, never the granted read roots", async () => {
    const { context, config } = await load(valid);
    expect(resolve(context, config as never).roots).toEqual(['file:///lake/acme']);
  });
});

describe('iceberg-zero-copy-append: judging the check', () => {
  const ctx = {
    tenant: tenantContext('acme', 'file:///lake/acme'),
    catalog: (name: string | undefined) => ({ name: name ?? 'lake', format: 'iceberg' as const }),
    jdbcConnection: () => {
      throw new Error('unused');
    },
    inlineJdbcUrls: false,
    secret: () => {
      throw new Error('unused');
    },
    kafkaCluster: () => {
      throw new Error('unused');
    },
    schemaRegistry: () => {
      throw new Error('unused');
    },
    runId: 'r',
    clock: instant(0n),
  };
  const r = resolve(ctx, {
    tenant: { id: 'acme', 'storage-root': 'file:///lake/acme' },
    source: { table: 'src', layer: 'silver' },
    target: { table: 'dst', layer: 'silver' },
  });
  const ok: TypedRow<(typeof CHECK_COLUMNS)[number]> = {
    source_exists: true,
    target_exists: true,
    source_uuid: 'u',
    source_location: 'file:/lake/acme/silver/src',
    target_location: 'file:/lake/acme/silver/dst',
    source_snapshot_id: '11',
    target_snapshot_id: '22',
    data_files: 3n,
    position_delete_files: 1n,
    equality_delete_files: 0n,
    records: 42n,
    already_appended: false,
    schema_problem: null,
    last_column_id_problem: null,
    spec_problem: null,
    format_problem: null,
    source_changed_problem: null,
    outside_roots: 0n,
  };
  const failure = (row: typeof ok) => {
    const e = judge(row, r).fail as LakehouseError & { path?: string; report(): { path?: string; code: string } };
    expect(e).toBeDefined();
    return { exit: e.exitCode, path: e.report().path, code: e.report().code, message: e.message };
  };

  it('a clean check: the output to commit, and the append runs', () => {
    expect(judge(ok, r)).toEqual({
      output: {
        table: 'lake.acme_silver.dst',
        format: 'iceberg',
        location: 'file:///lake/acme/silver/dst',
        committed: true,
        metrics: { dataFiles: 3, deleteFiles: 1, records: 42 },
      },
      metrics: { rowsRead: 0, rowsWritten: 42 },
    });
    expect(shouldAppend(ok)).toBe(true);
  });

  it('each refusal: exit code, config path, code', () => {
    expect(failure({ ...ok, source_exists: false })).toMatchObject({ exit: 66, path: 'source.table' });
    expect(failure({ ...ok, target_exists: false })).toMatchObject({ exit: 66, path: 'target.table' });
    expect(failure({ ...ok, target_location: 'file:/lake/beta/silver/dst' })).toMatchObject({ exit: 78, path: 'target.table' });
    expect(failure({ ...ok, outside_roots: 2n })).toMatchObject({ exit: 78, path: 'source.table', message: expect.stringMatching(/2 location\(s\) outside/) });
    expect(failure({ ...ok, schema_problem: 'field id 2 (source column d) is column name in the target' })).toMatchObject({
      exit: 65,
      path: 'source.table',
      code: 'ZERO_COPY_SCHEMA_MISMATCH',
      message: expect.stringMatching(/^source\.table: lake\.acme_silver\.src cannot be appended to lake\.acme_silver\.dst by metadata: field id 2/),
    });
    expect(failure({ ...ok, last_column_id_problem: 'ids up to 4' })).toMatchObject({ exit: 65, code: 'ZERO_COPY_LAST_COLUMN_ID' });
    expect(failure({ ...ok, spec_problem: 'bucket' })).toMatchObject({ exit: 65, path: 'target.table', code: 'ZERO_COPY_PARTITION_SPEC' });
    expect(failure({ ...ok, format_problem: 'v3' })).toMatchObject({ exit: 65, code: 'ZERO_COPY_FORMAT_VERSION' });
    expect(failure({ ...ok, source_changed_problem: "the source's snapshot 7 since is no append (operation overwrite)" })).toMatchObject({
      exit: 65,
      code: 'ZERO_COPY_SOURCE_CHANGED',
    });
    expect(failure({ ...ok, equality_delete_files: 1n })).toMatchObject({ exit: 65, path: 'source.table', code: 'ZERO_COPY_EQUALITY_DELETES' });
  });

  it('tenancy comes first: files outside the roots are refused whatever else is wrong', () => {
    expect(failure({ ...ok, outside_roots: 1n, schema_problem: 'x', equality_delete_files: 3n })).toMatchObject({ exit: 78, path: 'source.table' });
  });

  it('an empty source skips (99); an already appended source snapshot commits nothing', () => {
    expect(judge({ ...ok, data_files: 0n }, r)).toEqual({ skip: expect.stringMatching(/no data files/) });
    expect(judge({ ...ok, source_snapshot_id: null, data_files: 0n }, r).skip).toBeDefined();
    const again = { ...ok, already_appended: true };
    expect(judge(again, r).output).toMatchObject({ committed: false, metrics: { alreadyAppended: 1 } });
    expect(shouldAppend(again)).toBe(false);
    expect(shouldAppend(undefined)).toBe(false);
  });
});
