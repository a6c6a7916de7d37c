import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempFiles } from '../support/files.js';
import { repoRoot, runCli } from '../support/stack.js';

/** The real CLI as a child process, on the commands that need no Spark. */
const env = { LAKEHOUSE_LAKE_HOME: '/srv/lake' };
const example = join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf');
const platform = join(repoRoot, 'configs/examples/platform-local.conf');

describe('lakehouse-jobs CLI without Spark', () => {
  it('lists the catalog', async () => {
    const r = await runCli(['templates']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toContainEqual(expect.objectContaining({ name: 'cdc-silver-merge', schemaVersions: [1, 2], layer: 'silver' }));
  });

  it('prints the JSON Schema that is checked in', async () => {
    const r = await runCli(['schema', 'cdc-silver-merge', '--schema-version', '1']);
    expect(r.code).toBe(0);
    const checkedIn = JSON.parse(readFileSync(join(repoRoot, 'schemas/cdc-silver-merge.v1.schema.json'), 'utf8'));
    const { $comment: _, ...rest } = checkedIn;
    expect(JSON.parse(r.stdout)).toEqual(rest);
  });

  it('validates the example with the platform config (exit 0, status on stdout)', async () => {
    const r = await runCli(['validate', '--config', example, '--env', platform], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded', exitCode: 0, command: 'validate', tenant: 'acme', job: { template: 'cdc-silver-merge', schemaVersion: 1 } });
  });

  it('prints the plans it would submit, and nothing else on stdout', async () => {
    const dir = tempFiles({});
    const r = await runCli(['plan', '--config', example, '--env', platform, '--status-file', join(dir, 's.json')], env);
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout);
    expect(plan.steps.map((s: { id: string }) => s.id)).toContain('merge');
    expect(JSON.stringify(plan)).toContain('file:///srv/lake/acme/bronze/orders_cdc');
    expect(JSON.parse(readFileSync(join(dir, 's.json'), 'utf8'))).toMatchObject({ status: 'succeeded', command: 'plan' });
  });

  it('refuses a storage root outside the tenant policy with 78 before any plan', async () => {
    const r = await runCli(['validate', '--config', example, '--env', platform, '--set', 'tenant.storage-root="file:///srv/other"'], env);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('tenant.storage-root: is outside the storage roots the platform allows tenant "acme"');
  });

  it('maps usage errors to 64 and a missing config file to 66', async () => {
    // --job and job.template disagree: a config error, not a usage error.
    expect((await runCli(['validate', '--config', example, '--job', 'no-such-job'], env)).code).toBe(78);
    const untemplated = tempFiles({ 'job.conf': readFileSync(example, 'utf8').replace('template = "cdc-silver-merge", ', '') });
    const unknown = await runCli(['validate', '--config', join(untemplated, 'job.conf'), '--env', platform, '--job', 'cdc-silver-merge-x'], env);
    expect(unknown.code).toBe(64);
    expect(unknown.stdout).toContain('did you mean \\"cdc-silver-merge\\"');
    expect((await runCli(['schema', 'no-such-job'])).code).toBe(64);
    expect((await runCli(['--config', example, '--no-such-option'], env)).code).toBe(64);
    const missing = await runCli(['validate', '--config', '/nonexistent/tenant.conf']);
    expect(missing.code).toBe(66);
    expect(JSON.parse(missing.stdout)).toMatchObject({ status: 'failed', exitCode: 66, error: { code: 'INPUT_MISSING' } });
  });

  it('reports a config that reads a forbidden environment variable (78) without its value', async () => {
    const dir = tempFiles({ 'job.conf': readFileSync(example, 'utf8') + '\ntarget.table = ${?HOME}\n' });
    const r = await runCli(['validate', '--config', join(dir, 'job.conf')], { ...env, HOME: '/home/secret-place' });
    expect(r.code).toBe(78);
    expect(r.stdout + r.stderr).not.toContain('/home/secret-place');
    expect(r.stderr).toContain('HOME');
  });
});
