import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../src/spark/client.js';
import { compileCommandPlan } from '../../src/spark/plan/compile.js';
import { connect, remote, runCli } from '../support/stack.js';
import { testCommand, testQuery } from '../support/sql.js';
import {
  CANARY,
  PLATFORM_ONLY,
  TOKEN,
  attacker,
  bases,
  corpusDir,
  hostileEnv,
  hostileEnvValues,
  hostileExpressions,
  hostileGoldSql,
  hostileRoots,
  platformReach,
  victim,
  withVictim,
} from './corpus.js';
import { needs } from '../support/needs.js';

needs('spark');

/**
 * The live tier of the hostile corpus (corpus.ts): `run` against the real server refuses the
 * configs the validate tier refuses, before anything is sent (78), while a second tenant's canary
 * tables exist; and the classes only a server can answer (a column the source lacks, whose "did you
 * mean" must come from the tenant's own columns) end with their documented code. The canary, the
 * token and the platform-only value never appear on stdout or stderr.
 */
let dir: string;
let client: SparkConnectClient;

beforeAll(async () => {
  dir = corpusDir();
  client = connect();
  // The victim's rows, in an Iceberg and a Delta table and as bronze files, each holding the canary
  // in a column whose name is close to the attacker's misspellings below.
  const rows = testQuery(`SELECT 1 AS id, '${CANARY}' AS v, CAST(1 AS BIGINT) AS ts, '${CANARY}' AS secret_idd`);
  for (const [catalog, format] of [
    ['lake', 'iceberg'],
    ['spark_catalog', 'delta'],
  ] as const) {
    await client.execute(compileCommandPlan(testCommand(`CREATE NAMESPACE IF NOT EXISTS ${catalog}.${victim.id}_silver`), { reveal: true }));
    await client.execute(
      compileCommandPlan(
        rows.writeTo([catalog, `${victim.id}_silver`, 'secrets'], 'create', {
          provider: format,
          properties: { location: `${victim.root}/silver/secrets_${format}` },
        }),
        { reveal: true },
      ),
    );
  }
  await client.execute(compileCommandPlan(rows.writeFiles(`${victim.root}/bronze/orders_cdc`, 'parquet', { mode: 'overwrite' }), { reveal: true }));
  // The attacker's own bronze, so that a config that slipped through would really run.
  mkdirSync(attacker.root.replace(/^file:\/\//, ''), { recursive: true });
  await client.execute(
    compileCommandPlan(
      testQuery(`SELECT 1 AS id, 'mine' AS v, CAST(1 AS BIGINT) AS ts, 'c' AS op, DATE'2026-07-05' AS _snapshot_date`).writeFiles(
        `${attacker.root}/bronze/orders_cdc`,
        'parquet',
        { mode: 'overwrite', partitionBy: ['_snapshot_date'] },
      ),
      { reveal: true },
    ),
  );
});
afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
});

async function runHostile(config: string, set: string[], env: Record<string, string> = {}, code = 78) {
  const file = join(dir, `run-${randomBytes(4).toString('hex')}.conf`);
  writeFileSync(file, config);
  const r = await runCli(
    ['--config', file, '--env', join(dir, 'platform.conf'), '--remote', remote(), '--logical-date', '2026-07-05', ...set.flatMap((s) => ['--set', s])],
    env,
  );
  expect(r.code, r.stderr).toBe(code);
  for (const secret of [CANARY, TOKEN, PLATFORM_ONLY]) {
    expect(r.stdout).not.toContain(secret);
    expect(r.stderr).not.toContain(secret);
  }
  const status = JSON.parse(r.stdout) as { status: string; exitCode: number; error: { category: string; message: string; path?: string } };
  expect(status).toMatchObject({ status: 'failed', exitCode: code });
  return status;
}

describe('run against the real server refuses the same configs before sending anything (78), and the canary never shows', () => {
  it.each(hostileExpressions)('expression: %s', async (_, expr) => {
    await runHostile(bases['cdc-silver-merge v2']!, [`cdc.delete-when=${JSON.stringify(expr())}`]);
  });

  it.each(hostileRoots)('storage root: %s', async (_, root) => {
    await runHostile(bases['cdc-silver-merge v1']!, [`tenant.storage-root=${JSON.stringify(root())}`]);
  });

  it.each(hostileEnv)('environment: %s', async (_, line) => {
    await runHostile(`${bases['cdc-silver-merge v1']}\n${line}\n`, [], { ...hostileEnvValues, SPARK_REMOTE: `${remote()}/;token=${TOKEN}` });
  });

  it.each(platformReach.filter(([what]) => /by name|symbolic|substitute its/.test(what)))('the platform config: %s', async (_, line) => {
    await runHostile(`${bases['cdc-silver-merge v1']}\n${line}\n`, []);
  });

  it.each(['constructor', '__proto__'])('a name every JavaScript object answers to: %s as the catalog and the tenant', async (n) => {
    const status = await runHostile(bases['gold-publish v1']!, [`target.catalog=${n}`, `tenant.id=${n}`]);
    expect(status.error.category).toBe('config');
  });

  it.each(hostileGoldSql.filter(([what]) => /backquoted name|script transform|VALUES/.test(what)))('gold SQL: %s', async (_, sql) => {
    const status = await runHostile(bases['gold-publish v1']!.replace('"SELECT id, v FROM silver.orders"', JSON.stringify(withVictim(sql))), []);
    expect(status.error.message).toContain('transform.sql');
  });
});

describe('a column the config names that the source lacks: 78 at its path, "did you mean" only from the tenant’s own columns', () => {
  // The attacker's bronze has id, v, ts, op; the victim's has secret_idd, one edit away from "idd".
  it.each([
    ['cdc-silver-merge v1', 'cdc.primary-key=["idd"]', 'cdc.primary-key[0]'],
    ['cdc-silver-merge v2', 'cdc.sequence-by=["tss"]', 'cdc.sequence-by'],
    ['dv-satellite v1', 'satellite.payload=["vv"]', 'satellite.payload[0]'],
  ])('%s: %s', async (template, set, path) => {
    const status = await runHostile(bases[template]!, [set], {}, 78);
    expect(status.error.message).toMatch(
      new RegExp(`^${path.replace(/[[\]]/g, '\\$&')}: column "\\w+" is not a column of ${attacker.root}/bronze/orders_cdc; did you mean "(id|ts|v)"\\?$`),
    );
    expect(status.error.message).not.toContain('secret_idd');
  });
});
