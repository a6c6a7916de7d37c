import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { ConfigError } from '../../../src/core/errors.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { bindTenant } from '../../../src/runner/tenant-logic.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { SparkError } from '../../../src/spark/errors.js';
import { compileCommandPlan, compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { alias, fn, lit } from '../../../src/spark/plan/expressions.js';
import { Query } from '../../../src/spark/plan/query.js';
import type { Cmd } from '../../../src/spark/plan/commands.js';
import type { Rel } from '../../../src/spark/plan/relations.js';
import { tenantPolicyError, wrapTenantLogic } from '../../../src/spark/policy/index.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, releaseSession, repoRoot, runJob, runSession, useClient } from '../../support/stack.js';
import { testCommand, testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * The binding and the tenant boundary on the live server. A session is bound to one tenant, once;
 * every plan of a bound session is judged by identity, the runner's own template plans included, so
 * a plan a template could send by mistake (a write, a create, a drop, a procedure or a path outside
 * the tenant) is refused before it does anything. Through the CLI, a gold transform that reads
 * another tenant's data by reflection is refused (78) and neither its canary, the server's
 * environment nor the platform's own credentials reach the status, the logs or any table.
 */

const acme = freshTenant();
const victim = freshTenant();
const CANARY = `CANARY-${randomUUID()}`;
const platform = platformSchema.parse({
  catalogs: { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } },
  tenants: { [acme.id]: { 'storage-roots': [acme.root] }, [victim.id]: { 'storage-roots': [victim.root] } },
});
const V = { iceberg: `lake.${victim.id}_silver.t`, files: `${victim.root}/bronze/p` };
const OWN = `lake.${acme.id}_silver.o`;

let client: SparkConnectClient;
let session: SparkConnectClient;
useClient((c) => (client = c));
const sql = (text: string) => client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
const count = async (table: string) => arrowRows((await sql(`SELECT count(*) AS n FROM ${table}`)).table!)[0]!.n;

beforeAll(async () => {
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${victim.id}_silver`);
  await sql(`CREATE TABLE ${V.iceberg} (id INT, name STRING) USING iceberg LOCATION '${victim.root}/silver/t'`);
  await sql(`INSERT INTO ${V.iceberg} VALUES (1, '${CANARY}')`);
  await client.execute(
    compileCommandPlan(testQuery(`SELECT 1 AS id, '${CANARY}' AS name`).writeFiles(V.files, 'parquet', { mode: 'overwrite' }), { reveal: true }),
  );
  await sql(`CREATE NAMESPACE IF NOT EXISTS lake.${acme.id}_silver`);
  await sql(`CREATE TABLE ${OWN} (id INT, name STRING) USING iceberg LOCATION '${acme.root}/silver/o'`);
  await sql(`INSERT INTO ${OWN} VALUES (1, 'alice')`);
  session = await runSession(platform, tenantContext(acme.id, acme.root));
});

afterAll(async () => {
  await releaseSession(session);
});

/** What a bound session's plan comes to: rows, or the refusal (never anything the victim holds). */
async function attempt(plan: ReturnType<typeof compileRelationPlan>): Promise<unknown> {
  try {
    const r = await session.execute(plan);
    return r.table ? arrowRows(r.table) : [];
  } catch (e) {
    expect(JSON.stringify(e instanceof SparkError ? [e.serverMessage, e.messageParameters, e.causes] : String(e))).not.toContain(CANARY);
    return tenantPolicyError(e) ?? e;
  }
}
const query = (rel: Rel) => attempt(compileRelationPlan(rel, { reveal: true }));
const command = (cmd: Cmd) => attempt(compileCommandPlan(cmd, { reveal: true }));
const refusedBy = (r: unknown, reason: RegExp) => {
  expect(r).toBeInstanceOf(ConfigError);
  expect((r as ConfigError).message).toMatch(/refused by the tenant policy: /);
  expect((r as ConfigError).message).toMatch(reason);
};

describe('the binding', () => {
  it('binds a session once: the same binding again is a no-op, another is refused', async () => {
    const s = connect();
    try {
      await bindTenant(s, platform, tenantContext(acme.id, acme.root));
      await bindTenant(s, platform, tenantContext(acme.id, acme.root));
      const other = await bindTenant(s, platform, tenantContext(victim.id, victim.root)).catch((e: unknown) => tenantPolicyError(e) ?? e);
      refusedBy(other, /already bound to a tenant; it cannot be bound again/);
      // Still the first tenant's: the victim's table stays out of reach.
      const r = await s.execute(compileRelationPlan(Query.table(V.iceberg.split('.')).rel, { reveal: true })).catch((e: unknown) => tenantPolicyError(e));
      refusedBy(r, /a table outside the tenant's namespaces/);
    } finally {
      await releaseSession(s);
    }
  });

  it('tenant logic in a session nobody bound is refused', async () => {
    const r = await client
      .execute(compileRelationPlan(wrapTenantLogic(testQuery(`SELECT * FROM ${OWN}`).rel, ['transform.sql']), { reveal: true }))
      .catch((e: unknown) => tenantPolicyError(e));
    refusedBy(r, /tenant logic is judged only in a session bound to a tenant/);
    expect((r as ConfigError).issues[0]?.path).toBe('transform.sql');
  });
});

describe('the boundary judges every plan of a bound session, a template’s own included', () => {
  it('its own tables and files pass', async () => {
    expect(await query(Query.table(OWN.split('.')).rel)).toEqual([{ id: 1, name: 'alice' }]);
    expect(await query(testQuery(`DESCRIBE TABLE EXTENDED ${OWN}`).rel)).toEqual(expect.arrayContaining([expect.objectContaining({ col_name: 'Location' })]));
  });

  it.each([
    ['a read of another tenant’s table', () => query(Query.table(V.iceberg.split('.')).rel), /a table outside the tenant's namespaces/],
    [
      'a read of another tenant’s files',
      () => query(Query.read('parquet', { paths: [V.files] }).rel),
      /reads 1 file location\(s\) outside the tenant's storage roots/,
    ],
    [
      'reflection in a template’s plan',
      () => query(Query.table(OWN.split('.')).select(alias(fn('reflect', lit('java.lang.System'), lit('getenv'), lit('HOME')), 'h')).rel),
      /CallMethodViaReflection/,
    ],
    [
      'an append to another tenant’s table',
      () => command(Query.table(OWN.split('.')).writeTo(V.iceberg.split('.'), 'append')),
      /a write to a table outside the tenant's own namespaces/,
    ],
    [
      'a table created in its own namespace at another tenant’s location',
      () =>
        command(
          Query.table(OWN.split('.')).writeTo(['lake', `${acme.id}_silver`, 'grab'], 'create', {
            provider: 'iceberg',
            properties: { location: `${victim.root}/silver/grab` },
          }),
        ),
      /writes a location outside the tenant's storage roots/,
    ],
    [
      'a table created at its own location whose data files go to another tenant’s root (write.data.path)',
      () =>
        command(
          Query.table(OWN.split('.')).writeTo(['lake', `${acme.id}_silver`, 'spill'], 'create', {
            provider: 'iceberg',
            properties: { location: `${acme.root}/silver/spill`, 'write.data.path': `${victim.root}/silver/spilled` },
          }),
        ),
      /table property write\.data\.path is not one a tenant's table may have/,
    ],
    [
      'its own table pointed at another tenant’s root for new files (ALTER … SET TBLPROPERTIES)',
      () => command(testCommand(`ALTER TABLE ${OWN} SET TBLPROPERTIES ('write.object-storage.path' = '${victim.root}/silver/os')`)),
      /table property write\.object-storage\.path is not one a tenant's table may have/,
    ],
    [
      'a property unset that is not one of the allowed',
      () => command(testCommand(`ALTER TABLE ${OWN} UNSET TBLPROPERTIES IF EXISTS ('write.metadata.path')`)),
      /table property write\.metadata\.path is not one a tenant's table may have/,
    ],
    [
      'a table created without a location',
      () => command(Query.table(OWN.split('.')).writeTo(['lake', `${acme.id}_silver`, 'nowhere'], 'create', { provider: 'iceberg' })),
      /created without a location/,
    ],
    // DROP resolves its table first (a read of it): refused there already.
    ['a DROP of another tenant’s table', () => command(testCommand(`DROP TABLE ${V.iceberg}`)), /a (write to a )?table outside the tenant's (own )?namespaces/],
    [
      'a procedure on another tenant’s table',
      () => command(testCommand(`CALL lake.system.expire_snapshots(table => '${victim.id}_silver.t')`)),
      /a write to a table outside the tenant's own namespaces/,
    ],
    // rollback_to_snapshot is allowed (lakehouse-jobs rollback); these are not.
    [
      'a procedure that is neither maintenance nor a rollback: pointing a table at any snapshot',
      () => command(testCommand(`CALL lake.system.set_current_snapshot('${acme.id}_silver.o', 1)`)),
      /procedure system\.set_current_snapshot is not allowed/,
    ],
    [
      'a procedure that adopts files by path (another tenant’s)',
      () => command(testCommand(`CALL lake.system.add_files(table => '${acme.id}_silver.o', source_table => '\`parquet\`.\`${V.files}\`')`)),
      /procedure system\.add_files is not allowed/,
    ],
    [
      'parquet files written under another tenant’s root',
      () => command(Query.table(OWN.split('.')).writeFiles(`${victim.root}/bronze/planted`, 'parquet', { mode: 'overwrite' })),
      /outside the tenant's storage roots/,
    ],
    [
      'another tenant’s namespace created',
      () => command(testCommand(`CREATE NAMESPACE lake.${victim.id}_gold`)),
      /a namespace that is not one of the tenant's/,
    ],
  ])('%s is refused before it does anything', async (_, run, reason) => {
    refusedBy(await run(), reason);
  });

  it('an allow-listed property of its own table passes', async () => {
    expect(await command(testCommand(`ALTER TABLE ${OWN} SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read')`))).toEqual([]);
    // Read in the bound session: the admin session's catalog caches the table as it was.
    const props = (await query(testQuery(`SHOW TBLPROPERTIES ${OWN}`).rel)) as { key: string; value: string }[];
    expect(props).toContainEqual(expect.objectContaining({ key: 'write.merge.mode', value: 'merge-on-read' }));
    // The refused ALTER left nothing behind.
    expect(props.map((p) => p.key)).not.toContain('write.object-storage.path');
  });

  it('left the other tenant’s data as it was', async () => {
    expect(await count(V.iceberg)).toBe(1n);
    expect(existsSync(fileURLToPath(`${victim.root}/silver/spilled`))).toBe(false);
    await expect(sql(`DESCRIBE TABLE lake.${acme.id}_silver.spill`)).rejects.toThrow();
    expect(existsSync(fileURLToPath(`${victim.root}/bronze/planted`))).toBe(false);
    expect(existsSync(fileURLToPath(`${victim.root}/silver/grab`))).toBe(false);
    await expect(sql(`DESCRIBE NAMESPACE lake.${victim.id}_gold`)).rejects.toThrow();
  });
});

describe('through the runner: a gold transform reaching for another tenant', () => {
  it('is refused (78 at transform.sql); the canary, the server’s environment and the platform’s credentials stay out of status, logs and tables', async () => {
    const PLATFORM_ONLY = `platform-secret-${randomUUID()}`;
    const dir = tempFiles({
      'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { ${acme.id} { storage-roots = ["${acme.root}"] }, ${victim.id} { storage-roots = ["${victim.root}"] } }
jdbc.connections.shop { url = "jdbc:postgresql://127.0.0.1:1/shop", user = "u", password = { env = "IT_PLATFORM_SECRET" }, tenants = ["${victim.id}"] }`,
      'gold.conf': `job { template = "gold-publish", schema-version = 1, name = "it-reach" }
tenant { id = "${acme.id}", storage-root = "${acme.root}" }
transform { sql = "SELECT id, \`java_method\`('java.lang.System', 'getenv', 'SPARK_HOME') AS name FROM silver.o" }
target { table = "stolen", grain = ["id"], mode = full-refresh }`,
    });
    process.env.IT_PLATFORM_SECRET = PLATFORM_ONLY;
    const r = await runJob(join(dir, 'gold.conf'), join(dir, 'platform.conf'), ['--tenant', acme.id]).finally(() => delete process.env.IT_PLATFORM_SECRET);
    expect(r.code).toBe(78);
    expect(r.status.error.path).toBe('transform.sql');
    const sparkHome = execFileSync('bash', [join(repoRoot, 'scripts/spark-connect'), 'spark-home'])
      .toString()
      .trim();
    for (const text of [r.stdout, r.stderr, JSON.stringify(r.status)]) {
      expect(text).not.toContain(CANARY);
      expect(text).not.toContain(PLATFORM_ONLY);
      expect(text).not.toContain(sparkHome);
    }
    await expect(sql(`SELECT * FROM lake.${acme.id}_gold.stolen`)).rejects.toThrow(/TABLE_OR_VIEW_NOT_FOUND/);
  });
});
