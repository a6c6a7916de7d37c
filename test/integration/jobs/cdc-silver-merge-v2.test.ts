import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, deltaLastCommit, freshTenant, icebergSnapshotSummary, readDeltaWithDeltaRs, readIcebergWithPyIceberg, runJob } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'iceberg-rest', 'py-tools');

/**
 * cdc-silver-merge v2 through the CLI: a two-column sequence, delete-when, excluded columns, schema
 * evolution (fail, then add-columns), into a Delta table read back with delta-rs, and into an Iceberg
 * table of the REST catalog (scripts/iceberg-rest) read back by PyIceberg through the REST protocol.
 */
describe.each([
  { format: 'delta', catalog: 'spark_catalog' },
  { format: 'iceberg', catalog: 'rest' },
] as const)('cdc-silver-merge v2 into $format ($catalog)', ({ format, catalog }) => {
  const tenant = freshTenant();
  let client: SparkConnectClient;
  let dir: string;

  const config = (evolution: 'fail' | 'add-columns') => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-accounts" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "accounts_cdc" }
cdc {
  primary-key = ["account"]
  sequence-by = ["source_ts", "kafka_offset"]
  delete-when = "kind = 'DELETE'"
}
columns { exclude = ["kind", "raw"] }
schema-evolution = ${evolution}
target { table = "accounts", format = ${format}, catalog = "${catalog}" }
`;

  async function bronze(select: string, date: string) {
    const q = testQuery(
      `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM (${select})`,
    );
    await client.execute(
      compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/accounts_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
    );
  }

  async function run(file: string, date: string) {
    return runJob(join(dir, file), join(dir, 'platform.conf'), [
      '--set',
      `source.where="_snapshot_date = DATE'${date}'"`,
      '--run-id',
      `it-v2-${date}`,
      '--logical-date',
      date,
    ]);
  }

  const table = () =>
    (format === 'delta' ? readDeltaWithDeltaRs(`${tenant.root}/silver/accounts`) : readIcebergWithPyIceberg(`${tenant.id}_silver`, 'accounts', catalog))
      .map((r) => ({ ...r }))
      .sort((a, b) => String(a.account).localeCompare(String(b.account)));

  beforeAll(async () => {
    dir = tempFiles({
      'fail.conf': config('fail'),
      'evolve.conf': config('add-columns'),
      'platform.conf': `catalogs { spark_catalog { format = delta }, rest { format = iceberg } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
    });
    client = connect();
    await bronze(
      `SELECT * FROM VALUES
       ('a', 100, 1, 'INSERT', 10, '{}'), ('a', 100, 2, 'UPDATE', 11, '{}'), ('b', 100, 1, 'INSERT', 20, '{}'),
       ('c', 100, 1, 'INSERT', 30, '{}'), ('c', 101, 0, 'DELETE', NULL, '{}'), ('d', 100, 1, NULL, 40, '{}')
     AS t(account, source_ts, kafka_offset, kind, balance, raw)`,
      '2026-08-01',
    );
  });
  afterAll(async () => {
    await client?.releaseSession().catch(() => undefined);
    client?.close();
  });

  it('merges with a two-column sequence and delete-when, excluding columns', async () => {
    const r = await run('fail.conf', '2026-08-01');
    expect(r.code, r.stderr).toBe(0);
    expect(r.status.outputs[0]).toMatchObject({
      table: `${catalog}.${tenant.id}_silver.accounts`,
      format,
      snapshotId: expect.stringMatching(/^-?\d+$/),
      metrics: { inserted: 3, updated: 0, deleted: 0, late: 0 },
    });
    expect(table()).toEqual([
      { account: 'a', source_ts: 100, kafka_offset: 2, balance: 11 },
      { account: 'b', source_ts: 100, kafka_offset: 1, balance: 20 },
      { account: 'd', source_ts: 100, kafka_offset: 1, balance: 40 }, // a NULL kind is an upsert
    ]);
    if (format === 'delta') {
      const commit = deltaLastCommit(`${tenant.root}/silver/accounts`);
      expect(JSON.parse(String(commit.userMetadata))).toEqual({
        'lakehouse-jobs': {
          runId: 'it-v2-2026-08-01',
          attempt: expect.stringMatching(/^[0-9a-f-]{36}$/),
          job: 'cdc-silver-merge/v2/it-accounts',
          template: 'cdc-silver-merge',
          tenant: tenant.id,
          configHash: expect.stringMatching(/^[0-9a-f]{16}$/),
          logicalDate: '2026-08-01',
        },
      });
    } else {
      // The snapshot the REST catalog holds is the one the status names, stamped with the run.
      expect(icebergSnapshotSummary(`${tenant.id}_silver`, 'accounts', catalog)).toMatchObject({
        snapshot_id: r.status.outputs[0].snapshotId,
        'lakehouse-jobs.run-id': 'it-v2-2026-08-01',
        'lakehouse-jobs.job': 'cdc-silver-merge/v2/it-accounts',
        'lakehouse-jobs.template': 'cdc-silver-merge',
        'lakehouse-jobs.tenant': tenant.id,
        'lakehouse-jobs.config-hash': expect.stringMatching(/^[0-9a-f]{16}$/),
      });
    }
  });

  it('stops on a new bronze column (65) unless schema-evolution = add-columns adds it', async () => {
    await bronze(
      `SELECT * FROM VALUES ('a', 100, 3, 'UPDATE', 12, '{}', 'gold'), ('e', 102, 0, 'INSERT', 50, '{}', 'basic'), ('c', 100, 5, 'INSERT', 35, '{}', 'late')
       AS t(account, source_ts, kafka_offset, kind, balance, raw, tier)`,
      '2026-08-02',
    );
    const before = table();
    const refused = await run('fail.conf', '2026-08-02');
    expect(refused.code).toBe(65);
    expect(refused.status.error).toMatchObject({ code: 'SCHEMA_CHANGED', message: expect.stringContaining('tier string') });
    expect(table()).toEqual(before);

    const evolved = await run('evolve.conf', '2026-08-02');
    expect(evolved.code, evolved.stderr).toBe(0);
    // c's insert (100, 5) is older than its delete (101, 0): the tombstone keeps it deleted.
    expect(evolved.status.outputs[0].metrics).toEqual({ inserted: 1, updated: 1, deleted: 0, late: 1 });
    expect(table()).toEqual([
      { account: 'a', source_ts: 100, kafka_offset: 3, balance: 12, tier: 'gold' },
      { account: 'b', source_ts: 100, kafka_offset: 1, balance: 20, tier: null },
      { account: 'd', source_ts: 100, kafka_offset: 1, balance: 40, tier: null },
      { account: 'e', source_ts: 102, kafka_offset: 0, balance: 50, tier: 'basic' },
    ]);
  });
});
