import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadJob } from '../../../../src/runner/load-job.js';
import { ConfigError } from '../../../../src/core/errors.js';
import { createLogger } from '../../../../src/core/logger.js';
import { jobView } from '../../../../src/app/views/job.js';
import { registerConnectionSecrets, scrub } from '../../../../src/core/secrets.js';
import { compact, writeStatus, type StatusDocument } from '../../../../src/core/status.js';
import { runJob } from '../../../../src/runner/run.js';
import { tempFiles } from '../../../support/files.js';

/**
 * Issue 7 items 4: a job config reads only the environment variables the platform config lists in
 * `config-env.allow`, never one that can hold a credential; and secret values (a remote's token, a
 * resolved password) are scrubbed by value from logs, status documents, `plan` output and errors.
 */

const job = (extra = '') => `
job    { template = "cdc-silver-merge", schema-version = 1, name = "acme-orders" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc", where = "_snapshot_date = '2026-07-05'" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "orders", catalog = "lake" }
${extra}`;
const platform = (extra = '') => `catalogs { lake { format = iceberg, default = true } }\n${extra}`;

async function load(files: Record<string, string>, env: Record<string, string>) {
  const dir = tempFiles(files);
  return loadJob({ configFile: join(dir, 'job.conf'), ...(files['platform.conf'] ? { envFile: join(dir, 'platform.conf') } : {}), env, runId: 'r' });
}
async function configError(p: Promise<unknown>): Promise<ConfigError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ConfigError);
  expect((e as ConfigError).exitCode).toBe(78);
  return e as ConfigError;
}

describe('config environment: only what the platform lists', () => {
  it('resolves a variable the platform config allows', async () => {
    const loaded = await load(
      { 'job.conf': job('tenant.storage-root = "file://"${LAKE}"/acme"'), 'platform.conf': platform('config-env { allow = ["LAKE"] }') },
      { LAKE: '/srv/lake' },
    );
    expect(loaded.config.tenant['storage-root']).toBe('file:///srv/lake/acme');
  });

  it('refuses a variable the platform does not list, and every variable without --env, with a hint', async () => {
    const text = job('target.table = ${?REGION}');
    const listed = await configError(load({ 'job.conf': text, 'platform.conf': platform('config-env { allow = ["OTHER"] }') }, { REGION: 'eu-private' }));
    expect(listed.issues).toEqual([
      {
        path: 'target.table',
        message: expect.stringMatching(
          /reads environment variable REGION, which configs may not read \(job configs read only the variables listed in the platform config's config-env.allow\)$/,
        ),
      },
    ]);
    const none = await configError(load({ 'job.conf': job('target.table = ${?LAKEHOUSE_LAKE_HOME}') }, { LAKEHOUSE_LAKE_HOME: '/srv/lake' }));
    expect(none.issues[0]!.message).toContain('without a platform config (--env), job configs read no environment variables');
    expect(listed.message + none.message).not.toMatch(/eu-private|\/srv\/lake/);
  });

  it('refuses SPARK_REMOTE and credential names in config-env.allow at the platform path (78)', async () => {
    const allow = ['REGION', 'SPARK_REMOTE', 'DB_PASSWORD', 'SPARK_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'GCP_CREDENTIALS', 'my-var'];
    const e = await configError(load({ 'job.conf': job(), 'platform.conf': platform(`config-env { allow = ${JSON.stringify(allow)} }`) }, {}));
    expect(e.issues.map((i) => i.path)).toEqual([1, 2, 3, 4, 5, 6].map((i) => `(platform) config-env.allow[${i}]`));
    expect(e.issues[0]!.message).toContain('can hold a credential');
    expect(e.issues[5]!.message).toContain('an environment variable name');
  });

  it('lets the trusted platform config read variables', async () => {
    const ok = await load({ 'job.conf': job(), 'platform.conf': platform('tenants { acme { storage-roots = ["file://"${ROOT}] } }') }, { ROOT: '/lake' });
    expect(ok.platform.tenants?.acme?.['storage-roots']).toEqual(['file:///lake']);
  });

  // A job config never reads SPARK_REMOTE (so `plan` cannot print its token), even when the platform
  // lists other variables; the trusted platform config may read variables, but not credential names.
  it.each([
    {
      reader: 'a job config',
      files: { 'job.conf': job('target.table = ${SPARK_REMOTE}'), 'platform.conf': platform('config-env { allow = ["REGION"] }') },
      path: 'target.table',
    },
    {
      reader: 'the platform config',
      files: { 'job.conf': job(), 'platform.conf': platform('spark.remote = ${SPARK_REMOTE}') },
      path: '(platform) spark.remote',
    },
  ])('refuses $reader reading SPARK_REMOTE (78), without its token in the message', async ({ files, path }) => {
    const token = 'tok-remote-7f3a9c';
    const e = await configError(load(files, { SPARK_REMOTE: `sc://spark:15002/;token=${token}` }));
    expect(e.issues[0]).toMatchObject({ path, message: expect.stringContaining('a name for credentials') });
    expect(e.message).not.toContain(token);
  });

  it('keeps 64-bit integers exact up to the schema, which refuses them where it wants a number (78, not 70)', async () => {
    const version = await configError(load({ 'job.conf': job().replace('schema-version = 1', 'schema-version = 9223372036854775807') }, {}));
    expect(version.issues).toEqual([{ path: 'job.schema-version', message: expect.stringContaining('9223372036854775807 is not supported') }]);
    const retention = await configError(
      load(
        {
          'job.conf': job()
            .replace('schema-version = 1', 'schema-version = 2')
            .replace(/op-column.*/, 'tombstone-retention-days = 9007199254740993 }'),
        },
        {},
      ),
    );
    expect(retention.issues.map((i) => i.path)).toContain('cdc.tombstone-retention-days');
  });
});

/** A failed run's status document whose error message is `message` (as a server's might carry a secret). */
function failedStatus(message: string): StatusDocument {
  return {
    schema: 'lakehouse-jobs/status/v1',
    status: 'failed',
    exitCode: 77,
    command: 'run',
    job: {},
    runId: 'r',
    startedAt: '',
    finishedAt: '',
    durationMs: 0,
    outputs: [],
    metrics: { rowsRead: 0, rowsWritten: 0 },
    error: { code: 'X', category: 'spark', message, retryable: false },
  } as StatusDocument;
}

describe('secrets scrubbed by value', () => {
  afterEach(() => vi.restoreAllMocks());

  it('scrubs a remote token in its raw, percent-encoded and JSON-escaped forms, longest first', () => {
    registerConnectionSecrets('sc://h:1/;token=tok%2Fa"b-9f8e7d;use_ssl=true');
    expect(scrub('x tok/a"b-9f8e7d y')).toBe('x [redacted] y');
    expect(scrub('x tok%2Fa"b-9f8e7d y')).toBe('x [redacted] y');
    expect(scrub(JSON.stringify({ m: 'tok/a"b-9f8e7d' }))).toBe('{"m":"[redacted]"}');
    expect(scrub('tok')).toBe('tok'); // a fragment is left alone
  });

  it('keeps a token that appears in a config value or an error out of logs, status and plan output', async () => {
    const token = 'tok-plan-5e4d3c2b';
    const dir = tempFiles({ 'job.conf': job(`source.where = "note = '${token}'"`) });
    const stdout: string[] = [];
    const stderr: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (stderr.push(String(chunk)), true));
    const statusFile = join(dir, 'status.json');
    const code = await runJob({
      command: 'plan',
      config: join(dir, 'job.conf'),
      set: [],
      logLevel: 'info',
      env: { SPARK_REMOTE: `sc://spark:15002/;token=${token}` },
      statusFile,
      targets: { stdout: (t) => stdout.push(t) },
      view: jobView({ config: join(dir, 'job.conf'), stdout: (t) => stdout.push(t), stderr: (t) => stderr.push(t) }),
    });
    expect(code).toBe(0);
    expect(stdout.join('')).toContain('[redacted]');
    expect(stdout.join('') + stderr.join('') + readFileSync(statusFile, 'utf8')).not.toContain(token);

    // An error message carrying the value (as a server's might): scrubbed in the log line and the status.
    const lines: string[] = [];
    createLogger('info', {}, (l) => lines.push(l)).error({ detail: `denied for ${token}` }, `server said ${token}`);
    expect(lines.join('')).not.toContain(token);
    const out: string[] = [];
    const doc = failedStatus(`PERMISSION_DENIED ${token}`);
    writeStatus(doc, { stdout: (t) => out.push(t) });
    expect(out.join('')).toContain('PERMISSION_DENIED [redacted]');
  });

  it('scrubs the termination message before cutting it, so no half of a secret survives the cut', () => {
    const token = 'tok-cut-0123456789abcdef';
    registerConnectionSecrets(`sc://h/;token=${token}`);
    const message = `${'x'.repeat(990)}${token} tail`;
    const doc = failedStatus(message);
    const text = compact(doc);
    expect(text).not.toContain('tok-cut-01');
    expect(text).toContain('[redacted]');
  });
});
