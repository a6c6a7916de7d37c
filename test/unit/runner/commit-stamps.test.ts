import { describe, expect, it } from 'vitest';
import { commitMetadata, configHashOf } from '../../../src/runner/run.js';
import type { LoadedJob } from '../../../src/runner/load-job.js';

/** Every commit of a run is stamped with who wrote it: the same facts for Iceberg and Delta. */
describe('commit stamps', () => {
  const loaded = (config: Record<string, unknown>) =>
    ({
      template: { name: 'gold-publish' },
      version: { version: 1 },
      config,
      tenant: { id: 'acme' },
      context: { attempt: 'nonce-1' },
    }) as unknown as LoadedJob;

  it('carries run id, attempt, job, template, tenant and config hash in both formats', () => {
    const config = { job: { name: 'daily' }, target: { table: 't' } };
    const m = commitMetadata(loaded(config), 'run-1', '2026-07-05');
    const p = 'spark.sql.iceberg.snapshot-property.lakehouse-jobs.';
    expect(m).toMatchObject({
      [`${p}run-id`]: 'run-1',
      [`${p}attempt`]: 'nonce-1',
      [`${p}job`]: 'gold-publish/v1/daily',
      [`${p}template`]: 'gold-publish',
      [`${p}tenant`]: 'acme',
      [`${p}config-hash`]: configHashOf(config),
      [`${p}logical-date`]: '2026-07-05',
    });
    expect(JSON.parse(m['spark.databricks.delta.commitInfo.userMetadata']!)).toEqual({
      'lakehouse-jobs': {
        runId: 'run-1',
        attempt: 'nonce-1',
        job: 'gold-publish/v1/daily',
        template: 'gold-publish',
        tenant: 'acme',
        configHash: configHashOf(config),
        logicalDate: '2026-07-05',
      },
    });
  });

  it('hashes a config alike whatever the order of its keys, and a different config differently', () => {
    const a = configHashOf({ a: 1, b: { c: [1, 2n], d: 'x' } });
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(configHashOf({ b: { d: 'x', c: [1, 2n] }, a: 1 })).toBe(a);
    expect(configHashOf({ a: 1, b: { c: [2, 1n], d: 'x' } })).not.toBe(a);
  });
});
