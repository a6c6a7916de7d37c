import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { tempFiles } from '../../support/files.js';
import { freshTenant, remote, runCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark');

/** A token in SPARK_REMOTE (Airflow's form) is used but never printed: not in logs, status or errors. */
describe('secrets', () => {
  it('never prints the Spark Connect token, on success or failure, even at debug level', async () => {
    const token = `tok-${Math.random().toString(36).slice(2)}-do-not-print`;
    const tenant = freshTenant();
    const dir = tempFiles({
      'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "missing_table" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "t", catalog = "lake" }
`,
    });
    const withToken = `${remote()}/;token=${token};use_ssl=False;user_id=airflow`;
    const ping = await runCli(['ping', '--log-level', 'debug'], { SPARK_REMOTE: withToken });
    expect(ping.code, ping.stderr).toBe(0);
    expect(JSON.parse(ping.stdout).remote).toMatch(/token redacted/);

    // The bronze path does not exist: Spark fails with PATH_NOT_FOUND (66), and the error travels.
    const run = await runCli(['--config', join(dir, 'job.conf'), '--log-level', 'debug'], { SPARK_REMOTE: withToken });
    expect(run.code).toBe(66);
    const status = JSON.parse(run.stdout);
    expect(status.spark.remote).toMatch(/token redacted/);
    expect(status.error).toMatchObject({ category: 'input', sparkErrorClass: 'PATH_NOT_FOUND' });
    for (const text of [ping.stdout, ping.stderr, run.stdout, run.stderr]) expect(text).not.toContain(token);
  });
});
