import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../src/app/main.js';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { createLogger } from '../../../src/core/logger.js';
import type { StatusDocument } from '../../../src/core/status.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { appendToLedger } from '../../../src/runner/job-runs.js';
import { runJob } from '../../../src/runner/run.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { parseConnectionString } from '../../../src/spark/connection.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tenantPolicyError, wrapTenantLogic } from '../../../src/spark/policy/index.js';
import { tempFiles } from '../../support/files.js';
import {
  connect,
  freshTenant,
  lakeHome,
  outputMetricsUndefined,
  readDeltaWithDeltaRs,
  readIcebergWithPyIceberg,
  releaseSession,
  remote,
  repoRoot,
  runSession,
} from '../../support/stack.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * The run ledger's table (docs/history.md, "The job_runs table"): under a platform config with
 * `ledger`, a success, a 99 no-op and a failed gold gate each leave exactly one row, read back by
 * PyIceberg (not our client) and equal to the status each run wrote; the same attempt's append sent
 * again adds nothing; a failing append leaves the run's exit code and status file alone; a job config
 * cannot name the key (78); the tenant's own session can neither read nor write the ledger (the
 * server's wall); without the key nothing is created.
 */
const tenant = freshTenant();
const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = `platform_it_${suffix}`;
const TABLE = `job_runs`;
const LEDGER = `lake.${NAMESPACE}.${TABLE}`;
const LOCATION = `file://${lakeHome()}/platform-it-${suffix}/job_runs`;
const BRONZE = `lake.${tenant.id}_bronze.orders_cdc`;
let dir: string;
let client: SparkConnectClient;

const sql = async (text: string) => {
  const r = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return r.table ? arrowRows(r.table) : [];
};

const tenants = `tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`;
const catalogs = `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }`;

const cdc = `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-ledger-cdc" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", format = iceberg, catalog = lake, read = incremental }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", format = iceberg, catalog = lake }
`;

const gold = (sqlText: string) => `
job    { template = "gold-publish", schema-version = 1, name = "it-ledger-gold" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform { sql = """${sqlText}""" }
target { table = "orders_gate", catalog = lake, grain = ["id"], mode = full-refresh }
expectations = [ { name = "no_x", type = expression, expr = "v <> 'x'", action = fail } ]
`;

async function cli(args: string[], env = 'platform.conf') {
  const statusFile = join(dir, `status-${Math.random().toString(36).slice(2, 8)}.json`);
  const out = { stdout: '', stderr: '' };
  const code = await main([...args, '--env', join(dir, env), '--remote', remote(), '--status-file', statusFile], {
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    stdoutIsTTY: false,
    stderrIsTTY: false,
  });
  const status = JSON.parse(readFileSync(statusFile, 'utf8')) as StatusDocument;
  expect(outputMetricsUndefined(status.outputs)).toEqual([]);
  return { code, ...out, status };
}

/** The ledger's rows, as PyIceberg reads the table's metadata and files. */
const ledgerRows = () => readIcebergWithPyIceberg(NAMESPACE, TABLE);
const rowsOf = (runId: string) => ledgerRows().filter((r) => r.run_id === runId);
const runs: Record<string, StatusDocument> = {};

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `${catalogs}\n${tenants}\nledger { catalog = lake, table = "${NAMESPACE}.${TABLE}", location = "${LOCATION}" }`,
    'broken.conf': `${catalogs}\n${tenants}\nledger { catalog = lake, table = "${NAMESPACE}.broken", location = "${LOCATION}-broken" }`,
    'none.conf': `${catalogs}\n${tenants}`,
    'delta.conf': `${catalogs}\n${tenants}\nledger { catalog = spark_catalog, table = "${NAMESPACE}.job_runs", location = "${LOCATION}-delta" }`,
    'cdc.conf': cdc,
    'gate.conf': gold(`SELECT id, v FROM silver.orders`),
    'reads-ledger.conf': gold(`SELECT run_id AS id, status AS v FROM ${LEDGER}`),
    'names-ledger.conf': `${cdc}\nledger { catalog = lake, table = "${NAMESPACE}.elsewhere", location = "${tenant.root}/ledger" }`,
  });
  client = connect();
  await client.config.set({ 'spark.sql.catalog.lake.cache-enabled': 'false' });
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${tenant.id}_bronze`);
  await sql(
    `CREATE TABLE ${BRONZE} (id INT, ts INT, op STRING, v STRING, _lake_tenant STRING, _lake_source STRING, _lake_ingested_at TIMESTAMP, _snapshot_date DATE) USING iceberg LOCATION '${tenant.root}/bronze/orders_cdc'`,
  );
  await sql(
    `INSERT INTO ${BRONZE} VALUES (1, 1, 'c', 'a', 'x', 'it', current_timestamp(), DATE'2026-03-01'), (2, 1, 'c', 'x', 'x', 'it', current_timestamp(), DATE'2026-03-01')`,
  );
  // A table at the broken ledger's name that is no ledger: every append to it fails.
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${NAMESPACE}`);
  await sql(`CREATE TABLE lake.${NAMESPACE}.broken (x INT) USING iceberg LOCATION '${LOCATION}-broken'`);
});

afterAll(() => client?.close());

describe('the run ledger table', () => {
  it('a success, a no-op and a failed gate each leave one row, equal to their status documents', async () => {
    const success = await cli(['--config', join(dir, 'cdc.conf'), '--run-id', `ok-${suffix}`, '--logical-date', '2026-03-01']);
    expect(success.code).toBe(0);
    const noop = await cli(['--config', join(dir, 'cdc.conf'), '--run-id', `noop-${suffix}`]);
    expect(noop.code).toBe(99);
    const gate = await cli(['--config', join(dir, 'gate.conf'), '--run-id', `gate-${suffix}`]);
    expect(gate.code, gate.stderr).toBe(65);
    for (const r of [success, noop, gate]) expect(r.status.ledger).toEqual({ table: LEDGER, written: true });
    Object.assign(runs, { success: success.status, noop: noop.status, gate: gate.status });

    const all = ledgerRows();
    expect(all.map((r) => r.run_id).sort()).toEqual([`gate-${suffix}`, `noop-${suffix}`, `ok-${suffix}`]);
    for (const doc of Object.values(runs)) {
      const row = all.find((r) => r.run_id === doc.runId)!;
      // The document as the status file has it, but for the ledger's own field (written after the append).
      const { ledger: _l, ...kept } = doc;
      expect(JSON.parse(row.status_document as string)).toEqual(kept);
      expect(row).toMatchObject({
        tenant: tenant.id,
        template: doc.job.template,
        job_name: doc.job.name,
        schema_version: doc.job.schemaVersion,
        command: 'run',
        exit_code: doc.exitCode,
        status: doc.status,
        error_code: doc.error?.code ?? null,
        rows_read: doc.metrics.rowsRead,
        rows_written: doc.metrics.rowsWritten,
        duration_ms: doc.durationMs,
      });
      expect(row.config_hash).toMatch(/^[0-9a-f]{16}$/);
      expect(row.attempt).toMatch(/^[0-9a-f-]{36}$/);
      expect(new Date(row.started_at as string).toISOString()).toBe(doc.startedAt);
      expect(new Date(row.ended_at as string).toISOString()).toBe(doc.finishedAt);
      expect(row.outputs).toEqual(
        doc.outputs.map((o) => ({
          table: o.table ?? null,
          path: o.path ?? null,
          format: o.format ?? null,
          committed: o.committed ?? null,
          snapshot_id: o.snapshotId ?? null,
        })),
      );
    }
    const ok = all.find((r) => r.run_id === `ok-${suffix}`)!;
    expect(ok).toMatchObject({ job: 'cdc-silver-merge/v2/it-ledger-cdc', logical_date: '2026-03-01', rows_written: 2 });
    expect(all.find((r) => r.run_id === `gate-${suffix}`)).toMatchObject({ exit_code: 65, status: 'failed' });
    expect(all.find((r) => r.run_id === `noop-${suffix}`)).toMatchObject({ exit_code: 99, status: 'skipped' });
  });

  it('the same attempt appended again adds no row; another attempt of the run id does', async () => {
    const row = rowsOf(`ok-${suffix}`)[0]!;
    const append = (attempt: string) =>
      appendToLedger({
        spec: parseConnectionString(remote()),
        platform: platformSchema.parse({
          catalogs: { lake: { format: 'iceberg', default: true } },
          ledger: { catalog: 'lake', table: `${NAMESPACE}.${TABLE}`, location: LOCATION },
        }),
        ledger: { catalog: 'lake', table: `${NAMESPACE}.${TABLE}`, location: LOCATION },
        doc: runs.success!,
        facts: { attempt, configHash: row.config_hash as string },
        tenantRoots: [tenant.root],
        settings: { 'spark.sql.catalog.lake.cache-enabled': 'false' },
        tag: 'it-ledger',
        logger: createLogger('silent'),
      });
    expect(await append(row.attempt as string)).toEqual({ table: LEDGER, written: true });
    expect(rowsOf(`ok-${suffix}`)).toHaveLength(1);
    expect(await append('a-later-attempt')).toEqual({ table: LEDGER, written: true });
    expect(
      rowsOf(`ok-${suffix}`)
        .map((r) => r.attempt)
        .sort(),
    ).toEqual([row.attempt, 'a-later-attempt'].sort());
  });

  it("docs/history.md's two queries run on the table as written there", async () => {
    const doc = readFileSync(join(repoRoot, 'docs/history.md'), 'utf8');
    const queries = [...doc.slice(doc.indexOf('## The `job_runs` table')).matchAll(/```sql\n([\s\S]*?);\n```/g)].map((m) =>
      m[1]!.replaceAll('lake.platform.job_runs', LEDGER).replaceAll("'acme'", `'${tenant.id}'`),
    );
    expect(queries).toHaveLength(2);
    const failed = await sql(queries[0]!);
    expect(failed.map((r) => [r.run_id, r.exit_code, r.error_code])).toEqual([[`gate-${suffix}`, 65, 'EXPECTATION_FAILED']]);
    expect(failed[0]!.message).toMatch(/no_x/);
    // The run appended twice above (two attempts) counts once: its latest attempt.
    const perDay = await sql(queries[1]!);
    expect(perDay.find((r) => r.job === 'cdc-silver-merge/v2/it-ledger-cdc')).toMatchObject({ runs: 2n, rows_written: 2n });
    expect(perDay.find((r) => r.job === 'gold-publish/v1/it-ledger-gold')).toMatchObject({ runs: 1n, rows_written: 0n });
  });

  it("a failing append is a warning and a status field: the exit code and the status file are the run's", async () => {
    // The runner itself, to read its log lines.
    const statusFile = join(dir, 'status-broken.json');
    const log: string[] = [];
    const code = await runJob({
      command: 'run',
      config: join(dir, 'cdc.conf'),
      envFile: join(dir, 'broken.conf'),
      remote: remote(),
      set: [],
      runId: `broken-${suffix}`,
      statusFile,
      logLevel: 'info',
      env: process.env,
      targets: { stdout: () => undefined },
      logSink: (line) => log.push(line),
    });
    const status = JSON.parse(readFileSync(statusFile, 'utf8')) as StatusDocument;
    expect(code).toBe(99);
    expect(status).toMatchObject({ status: 'skipped', exitCode: 99 });
    expect(status.ledger).toMatchObject({
      table: `lake.${NAMESPACE}.broken`,
      written: false,
      error: { code: expect.any(String), message: expect.any(String) },
    });
    const warning = log.map((l) => JSON.parse(l) as { level: string; msg: string }).find((l) => /the run ledger was not written/.test(l.msg));
    expect(warning?.level).toBe('warn');
    expect((await sql(`SELECT count(*) AS n FROM lake.${NAMESPACE}.broken`))[0]!.n).toBe(0n);
  });

  it('a cancelled run whose session still exists leaves its row: cancelled, 143', async () => {
    const signals = new EventEmitter();
    const statusFile = join(dir, 'status-cancelled.json');
    const code = await runJob({
      command: 'run',
      config: join(dir, 'cdc.conf'),
      envFile: join(dir, 'platform.conf'),
      remote: remote(),
      set: [],
      runId: `cancelled-${suffix}`,
      statusFile,
      logLevel: 'silent',
      env: process.env,
      targets: { stdout: () => undefined },
      signals,
      exitNow: () => undefined,
      // SIGTERM as the first step starts: its operation is interrupted on the server.
      view: { step: (e) => void (e.kind === 'started' && e.index === 0 && signals.emit('SIGTERM')) },
    });
    const status = JSON.parse(readFileSync(statusFile, 'utf8')) as StatusDocument;
    expect(code).toBe(143);
    expect(status).toMatchObject({ status: 'cancelled', ledger: { table: LEDGER, written: true } });
    expect(rowsOf(`cancelled-${suffix}`).map((r) => [r.status, r.exit_code, r.error_code])).toEqual([['cancelled', 143, 'CANCELLED']]);
  });

  it("a Delta catalog's ledger is a Delta table, read back by delta-rs", async () => {
    const r = await cli(['--config', join(dir, 'cdc.conf'), '--run-id', `delta-${suffix}`], 'delta.conf');
    expect(r.code).toBe(99);
    expect(r.status.ledger).toEqual({ table: `spark_catalog.${NAMESPACE}.job_runs`, written: true });
    const rows = readDeltaWithDeltaRs(`${LOCATION}-delta`);
    expect(rows.map((row) => [row.run_id, row.exit_code, row.status])).toEqual([[`delta-${suffix}`, 99, 'skipped']]);
    const { ledger: _l, ...kept } = r.status;
    expect(JSON.parse(rows[0]!.status_document as string)).toEqual(kept);
  });

  it('a job config cannot name, enable or redirect the ledger (78 at the key)', async () => {
    const named = await cli(['--config', join(dir, 'names-ledger.conf')]);
    expect(named.code).toBe(78);
    expect(named.status.error?.path).toBe('ledger');
    const set = await cli(['--config', join(dir, 'cdc.conf'), '--set', `ledger.table=${NAMESPACE}.elsewhere`], 'none.conf');
    expect(set.code).toBe(78);
    expect(set.status.error?.path).toBe('ledger');
    expect(set.status.ledger).toBeUndefined();
    expect(await sql(`SHOW TABLES IN lake.${NAMESPACE}`)).not.toContainEqual(expect.objectContaining({ tableName: 'elsewhere' }));
  });

  it("the tenant's session can neither read nor write the ledger: the server refuses", async () => {
    const platform = platformSchema.parse({
      catalogs: { lake: { format: 'iceberg', default: true } },
      tenants: { [tenant.id]: { 'storage-roots': [tenant.root] } },
    });
    const session = await runSession(platform, tenantContext(tenant.id, tenant.root));
    const refusal = async (p: Promise<unknown>) => {
      try {
        await p;
        return 'allowed';
      } catch (e) {
        return tenantPolicyError(e) ?? e;
      }
    };
    try {
      // As gold's SQL reaches the server: the tenant's logic, judged by the strict judge.
      const read = await refusal(
        session.execute(compileRelationPlan(wrapTenantLogic(testQuery(`SELECT * FROM ${LEDGER}`).rel, ['transform.sql']), { reveal: true })),
      );
      expect(read).toBeInstanceOf(ConfigError);
      expect((read as ConfigError).code).toBe('TENANT_POLICY');
      // A plain read and a write, judged by the tenant boundary.
      expect(await refusal(session.execute(compileRelationPlan(testQuery(`SELECT count(*) FROM ${LEDGER}`).rel, { reveal: true })))).toBeInstanceOf(
        ConfigError,
      );
      const write = await refusal(session.execute(compileCommandPlan(testCommand(`DELETE FROM ${LEDGER} WHERE true`), { reveal: true })));
      expect(write).toBeInstanceOf(ConfigError);
      expect(await refusal(session.execute(compileRelationPlan(testQuery(`SELECT * FROM parquet.\`${LOCATION}/data\``).rel, { reveal: true })))).toBeInstanceOf(
        ConfigError,
      );
    } finally {
      await releaseSession(session);
    }
    // Through a run: the tenant's gold SQL naming the ledger never reaches it (78), and its rows stay.
    const before = ledgerRows();
    const r = await cli(['--config', join(dir, 'reads-ledger.conf'), '--run-id', `reads-${suffix}`]);
    expect(r.code).toBe(78);
    expect(r.status.error?.path).toBe('transform.sql');
    expect(ledgerRows().filter((row) => row.run_id !== `reads-${suffix}`)).toEqual(before);
  });

  it('without the key, a run writes no ledger and says nothing of one', async () => {
    const r = await cli(['--config', join(dir, 'cdc.conf'), '--run-id', `none-${suffix}`], 'none.conf');
    expect(r.code).toBe(99);
    expect(r.status.ledger).toBeUndefined();
    expect(r.stderr).not.toMatch(/ledger/);
    expect(rowsOf(`none-${suffix}`)).toEqual([]);
    // The key's default table: nothing names it, so nothing may have created it.
    expect((await sql(`SHOW NAMESPACES IN lake`)).map((n) => n.namespace)).not.toContain('platform');
  });
});
