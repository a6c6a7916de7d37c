import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempFiles } from '../support/files.js';
import { repoRoot, runCli } from '../support/stack.js';

/** The real CLI as a child process, on the commands that need no Spark. */
const env = { LAKEHOUSE_LAKE_HOME: '/srv/lake' };
const example = join(repoRoot, 'configs/examples/cdc-silver-merge.v1.conf');
const escapeRegExp = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
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
    expect(JSON.parse(r.stdout)).toMatchObject({
      status: 'succeeded',
      exitCode: 0,
      command: 'validate',
      tenant: 'acme',
      job: { template: 'cdc-silver-merge', schemaVersion: 1 },
    });
  });

  it('prints the plans it would submit as readable operator trees, and nothing else on stdout', async () => {
    const dir = tempFiles({});
    const r = await runCli(['plan', '--config', example, '--env', platform, '--status-file', join(dir, 's.json')], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^cdc-silver-merge v1, tenant acme: \d+ steps\n/);
    expect(r.stdout).toMatch(/\n\[\d+\/\d+\] merge: /);
    expect(r.stdout).toContain('MergeInto lake.acme_silver.orders ON (orders.id <=> __source.id)');
    expect(r.stdout).toContain("Filter (_snapshot_date = '2026-07-05')");
    expect(r.stdout).toContain('Read parquet file:///srv/lake/acme/bronze/orders_cdc');
    // A person reads it: a few kilobytes, not the protobuf's hundred.
    expect(r.stdout.length).toBeLessThan(20_000);
    expect(JSON.parse(readFileSync(join(dir, 's.json'), 'utf8'))).toMatchObject({ status: 'succeeded', command: 'plan' });
  });

  it('keeps the protobuf plans with plan --format json', async () => {
    const r = await runCli(['plan', '--format', 'json', '--config', example, '--env', platform], env);
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout);
    expect(plan.steps.map((s: { id: string }) => s.id)).toContain('merge');
    expect(plan.steps.find((s: { id: string }) => s.id === 'merge').plan.command).toBeDefined();
    expect(JSON.stringify(plan)).toContain('file:///srv/lake/acme/bronze/orders_cdc');
    const bad = await runCli(['plan', '--format', 'yaml', '--config', example], env);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('Argument: format, Given: "yaml", Choices: "text", "json"');
  });

  it('validate says which tables and paths a run would read and write', async () => {
    const r = await runCli(['validate', '--config', example, '--env', platform], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`${example}: valid (cdc-silver-merge v1, `);
    expect(r.stderr).toContain('  reads  path  file:///srv/lake/acme/bronze/orders_cdc (parquet)');
    expect(r.stderr).toContain('  writes table lake.acme_silver.orders (iceberg) at file:///srv/lake/acme/silver/orders');
    expect(r.stderr).toContain('  writes table lake.acme_silver.orders__cdc_tombstones (iceberg) at file:///srv/lake/acme/silver/orders__cdc_tombstones');
  });

  it("names the platform config's file for its problems, not the job config's", async () => {
    const dir = tempFiles({ 'platform.conf': readFileSync(platform, 'utf8') + '\njdbc { inline-urls = sometimes }\n' });
    const r = await runCli(['validate', '--config', example, '--env', join(dir, 'platform.conf')], env);
    expect(r.code).toBe(78);
    // The line the bad value was written on, in the platform config's own file.
    const line =
      readFileSync(join(dir, 'platform.conf'), 'utf8')
        .split('\n')
        .findIndex((l) => l.includes('inline-urls = sometimes')) + 1;
    expect(r.stderr).toContain(`${join(dir, 'platform.conf')}:${line}:8: jdbc.inline-urls: must be one of "deny", "allow"`);
    expect(r.stderr).not.toContain(`${example}: (platform)`);
  });

  it("names the platform config's file for its syntax and substitution problems too, under a platform path", async () => {
    const dir = tempFiles({ 'platform.conf': readFileSync(platform, 'utf8') + '\nspark.remote = ${SPARK_REMOTE}\n', 'broken.conf': 'spark { remote = \n' });
    const refused = await runCli(['validate', '--config', example, '--env', join(dir, 'platform.conf')], {
      ...env,
      SPARK_REMOTE: 'sc://h:15002/;token=tok-cli-4242',
    });
    expect(refused.code).toBe(78);
    expect(refused.stderr).toMatch(new RegExp(`^${escapeRegExp(join(dir, 'platform.conf'))}:\\d+:\\d+: spark.remote: .*a name for credentials`, 'm'));
    expect(JSON.parse(refused.stdout).error).toMatchObject({ code: 'CONFIG_INVALID', path: '(platform) spark.remote' });
    expect(refused.stdout + refused.stderr).not.toContain('tok-cli-4242');
    const broken = await runCli(['validate', '--config', example, '--env', join(dir, 'broken.conf')], env);
    expect(broken.code).toBe(78);
    expect(broken.stderr).toContain(join(dir, 'broken.conf'));
    expect(broken.stderr).not.toContain(`${example}:`);
  });

  it('reports a misspelled required key once, with its hint', async () => {
    const dir = tempFiles({ 'job.conf': readFileSync(example, 'utf8').replace('primary-key', 'primery-key') });
    const r = await runCli(['validate', '--config', join(dir, 'job.conf'), '--env', platform], env);
    expect(r.code).toBe(78);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith(join(dir, 'job.conf')));
    // A schema problem points at its line and column, as a syntax error does.
    const text = readFileSync(join(dir, 'job.conf'), 'utf8').split('\n');
    const line = text.findIndex((l) => l.includes('primery-key'));
    const at = `${join(dir, 'job.conf')}:${line + 1}:${text[line]!.indexOf('primery-key') + 1}`;
    expect(lines).toEqual([`${at}: cdc.primery-key: unknown key; did you mean "primary-key"?`]);
  });

  it('says where a HOCON problem was written once: file:line:col, then its key when it has one', async () => {
    const dir = tempFiles({
      'top.conf': 'include "/etc/hostname"\n',
      'nested.conf': 'job {\n  name = ${nope}\n}\n',
      'open.conf': 'a = {\n',
    });
    const lines = async (name: string) => {
      const r = await runCli(['validate', '--config', join(dir, name)], env);
      expect(r.code).toBe(78);
      return r.stderr.split('\n').filter((l) => l.includes(name));
    };
    const top = join(dir, 'top.conf');
    expect(await lines('top.conf')).toEqual([
      `${top}:1:1: include "/etc/hostname" refused: absolute paths cannot be included; use a path relative to this file`,
    ]);
    expect(await lines('nested.conf')).toEqual([`${join(dir, 'nested.conf')}:2:10: job.name: \${nope} is not defined in the config`]);
    expect(await lines('open.conf')).toEqual([`${join(dir, 'open.conf')}:2:1: a: "{" is never closed`]);
  });

  it('a typo in job.template is a config error (78) with a hint; in --job a usage error (64)', async () => {
    const dir = tempFiles({ 'job.conf': readFileSync(example, 'utf8').replace('"cdc-silver-merge"', '"cdc-silver-merg"') });
    const r = await runCli(['validate', '--config', join(dir, 'job.conf'), '--env', platform], env);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('job.template: unknown template "cdc-silver-merg"; did you mean "cdc-silver-merge"?');
    const mismatch = await runCli(['validate', '--config', example, '--env', platform, '--job', 'cdc-silver-merg'], env);
    expect(mismatch.code).toBe(78);
    expect(mismatch.stderr).toContain('job.template: is "cdc-silver-merge" but --job says "cdc-silver-merg"; did you mean --job cdc-silver-merge?');
  });

  it('has help per command, a version, and a hint for a misspelled command', async () => {
    const help = await runCli(['plan', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^lakehouse-jobs plan /);
    expect(help.stdout).toContain('--format');
    expect(help.stdout).toContain('LAKEHOUSE_<OPTION>');
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    for (const c of ['run', 'validate', 'plan', 'ping', 'templates', 'schema']) expect(top.stdout).toContain(`lakehouse-jobs ${c} `);
    expect((await runCli(['--version'])).stdout).toMatch(/^\d+\.\d+\.\d+/);
    const typo = await runCli(['valdate', '--config', example]);
    expect(typo.code).toBe(64);
    expect(typo.stderr).toContain('Did you mean validate?');
  });

  it('reads options from LAKEHOUSE_* variables when the command line does not give them', async () => {
    const r = await runCli(['validate'], { ...env, LAKEHOUSE_CONFIG: example, LAKEHOUSE_ENV: platform });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded', tenant: 'acme' });
    // The command line wins over the environment.
    const missing = await runCli(['validate', '--config', '/nonexistent/tenant.conf'], { ...env, LAKEHOUSE_CONFIG: example });
    expect(missing.code).toBe(66);
  });

  it('a failed ping answers on stdout too, with the remote of the platform config and no token', async () => {
    const dir = tempFiles({ 'platform.conf': 'spark { remote = "sc://127.0.0.1:9/;token=ping-secret-123" }\n' });
    const r = await runCli(['ping', '--env', join(dir, 'platform.conf'), '--timeout', '1', '--log-level', 'silent'], { SPARK_REMOTE: '' });
    expect(r.code).toBe(69);
    const answer = JSON.parse(r.stdout);
    expect(answer).toMatchObject({ ok: false, exitCode: 69, remote: expect.stringContaining('127.0.0.1:9'), error: { code: expect.any(String) } });
    expect(r.stdout + r.stderr).not.toContain('ping-secret-123');
  });

  it('ping still validates a platform config in full: a malformed one is 78 with its path, before any connection', async () => {
    const dir = tempFiles({ 'platform.conf': 'spark { remote = "sc://127.0.0.1:9", bogus = 1 }\ncatalogs { lake { format = parquet } }\n' });
    const r = await runCli(['ping', '--env', join(dir, 'platform.conf'), '--timeout', '1', '--log-level', 'silent'], { SPARK_REMOTE: '' });
    expect(r.code).toBe(78);
    const answer = JSON.parse(r.stdout);
    expect(answer).toMatchObject({ ok: false, exitCode: 78 });
    expect(JSON.stringify(answer.error)).toContain('spark.bogus');
    expect(JSON.stringify(answer.error)).toContain('catalogs.lake.format');
  });

  it("binds a run to the orchestrator's tenant (--tenant, LAKEHOUSE_TENANT): a config for another tenant is 78 at tenant.id", async () => {
    const dir = tempFiles({
      'platform.conf': `${readFileSync(platform, 'utf8')}\ntenants.globex { storage-roots = ["file:///srv/lake/globex"] }\ntenant-binding = required\n`,
    });
    const shared = join(dir, 'platform.conf');
    const bound = await runCli(['validate', '--config', example, '--env', shared, '--tenant', 'acme'], env);
    expect(bound.code, bound.stderr).toBe(0);
    const claimed = await runCli(['validate', '--config', example, '--env', shared], { ...env, LAKEHOUSE_TENANT: 'globex' });
    expect(claimed.code).toBe(78);
    expect(claimed.stderr).toContain('tenant.id: is "acme", but the orchestrator runs this job for tenant "globex"');
    expect(JSON.parse(claimed.stdout)).toMatchObject({ exitCode: 78, error: { code: 'CONFIG_INVALID', path: 'tenant.id' } });
    const unbound = await runCli(['validate', '--config', example, '--env', shared], env);
    expect(unbound.code).toBe(64);
    expect(unbound.stderr).toContain('--tenant');
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
    expect((await runCli(['ping', '--timeout', 'soon'])).code).toBe(64);
    expect((await runCli(['schema'])).code).toBe(64);
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
