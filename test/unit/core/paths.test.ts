import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { normaliseStorageUri, sameLocation, storageUriProblem } from '../../../src/core/naming.js';
import { isUnderRoot, tenantContext } from '../../../src/core/tenant.js';
import { tempFiles } from '../../support/files.js';

/** Literal paths only: storage URIs Hadoop would expand, unescape or climb out of are refused. */

const HOSTILE: [string, RegExp][] = [
  ['s3a://lake/acme/{x,../beta}', /glob or escape/],
  ['s3a://lake/acme/{beta}', /glob or escape/],
  ['s3a://lake/acme/*', /glob or escape/],
  ['s3a://lake/acm?', /glob or escape/],
  ['s3a://lake/[a-z]cme', /glob or escape/],
  ['s3a://lake/acme\\..\\beta', /glob or escape/],
  ['s3a://lake/acme/%2e%2e/beta', /percent-encoding/],
  ['s3a://lake/acme%2Fbeta', /percent-encoding/],
  ['s3a://lake/acme\uff0f..\uff0fbeta', /plain ASCII/], // fullwidth solidus
  ['s3a://lake/acme\u2024\u2024', /plain ASCII/], // one dot leader, twice
  ['s3a://lake/acme/../beta', /"\.\." segments/],
  ['s3a://lake/acme/./x', /"\." segments/],
  ['s3a://lake/acme//beta', /empty segments/],
  ['s3a://lake/acme.', /invalid segment "acme\."/],
  ['s3a://lake/..hidden', /invalid segment/],
  ['s3a://lake/...', /invalid segment/],
  ['s3a://lake/acme beta', /whitespace/],
  ['s3a://lake/acme\tbeta', /whitespace or control/],
  ['s3a://lake/acme\u0000', /control/],
  ["s3a://lake/acme'", /invalid segment/],
  ['s3a://lake/a:b', /invalid segment/],
  ['s3a://lake/a#b', /invalid segment/],
  ['s3a://lake/a!b', /invalid segment/],
  ['s3a://la{ke,x}/acme', /glob or escape/],
  ['s3a://la ke/acme', /whitespace/],
  ['s3a://lake,x/acme', /invalid authority/],
  ['s3a:///acme', /bucket or host/],
  ['file://', /needs a path/],
  ['lake/acme', /absolute URI/],
  ['/lake/acme', /absolute URI/],
  ['s3a:/lake/acme', /absolute URI/],
  [`s3a://lake/${'a'.repeat(1100)}`, /at most 1024/],
];

describe('literal storage URIs', () => {
  it.each(HOSTILE)('refuses %j', (uri, reason) => {
    expect(storageUriProblem(uri)).toMatch(reason);
    expect(normaliseStorageUri(uri)).toBeUndefined();
    expect(isUnderRoot(uri, ['s3a://lake/acme'])).toBe(false);
  });

  it.each([
    ['s3a://lake/acme', 's3a://lake/acme'],
    ['S3A://Lake/Acme/', 's3a://lake/Acme'],
    ['s3a://lake', 's3a://lake'],
    ['file:///var/lake/acme/', 'file:///var/lake/acme'],
    ['file:/var/lake/acme', 'file:///var/lake/acme'], // how Spark reports locations
    ['file:///', 'file:///'],
    ['abfss://data@account.dfs.core.windows.net/acme', 'abfss://data@account.dfs.core.windows.net/acme'],
    ['hdfs://NameNode:8020/lake/acme', 'hdfs://namenode:8020/lake/acme'],
    ['gs://my_bucket/a-b/c.d/e=1/f+g/h@i/j~k', 'gs://my_bucket/a-b/c.d/e=1/f+g/h@i/j~k'],
    ['file:///home/ann/.cache/lake/acme', 'file:///home/ann/.cache/lake/acme'], // a hidden folder: one leading dot
  ])('accepts %j as %j', (uri, normal) => {
    expect(storageUriProblem(uri)).toBeUndefined();
    expect(normaliseStorageUri(uri)).toBe(normal);
  });

  it('compares locations in either file: spelling, others only literally', () => {
    expect(sameLocation('file:/lake/acme/silver/orders', 'file:///lake/acme/silver/orders/')).toBe(true);
    expect(sameLocation('S3A://LAKE/acme/silver/orders', 's3a://lake/acme/silver/orders')).toBe(true);
    expect(sameLocation('s3a://lake/acme/silver/orders', 's3a://lake/acme/silver/Orders')).toBe(false);
    expect(sameLocation('file:/old/lake/acme/silver/orders', 'file:///lake/acme/silver/orders')).toBe(false);
    expect(sameLocation('s3a://lake/acme/silver/a b', 's3a://lake/acme/silver/a b')).toBe(true);
    expect(sameLocation('s3a://lake/acme/silver/a%20b', 's3a://lake/acme/silver/a b')).toBe(false);
  });
});

describe('tenant paths', () => {
  it('normalises the root once and builds literal paths below it', () => {
    const t = tenantContext('acme', 'FILE:/lake/acme/');
    expect(t.storageRoot).toBe('file:///lake/acme');
    expect(t.location('bronze', 'orders_cdc')).toBe('file:///lake/acme/bronze/orders_cdc');
    expect(t.location('bronze', 'orders_cdc', '_snapshot_date=2026-07-05')).toBe('file:///lake/acme/bronze/orders_cdc/_snapshot_date=2026-07-05');
    expect(tenantContext('acme', 'file:///').location('silver', 'x')).toBe('file:///silver/x');
  });

  it('refuses a non-literal root with its config path', () => {
    expect(() => tenantContext('acme', 's3a://lake/acme/{x,../beta}')).toThrow(ConfigError);
    try {
      tenantContext('acme', 's3a://lake/acme/*');
    } catch (e) {
      expect((e as ConfigError).issues).toEqual([{ path: 'tenant.storage-root', message: expect.stringMatching(/glob/) }]);
      expect((e as ConfigError).exitCode).toBe(78);
    }
    expect.assertions(3);
  });

  it.each([
    ['{x,..}', []],
    ['..', []],
    ['orders', ['..', 'beta']],
    ['orders', ['*']],
    ['orders', ['']],
    ['orders', ['a/b']],
    ['', []],
    ['orders', ['%2e%2e']],
  ])('refuses to build a path from table %j and segments %j (defence in depth)', (table, segments) => {
    const t = tenantContext('acme', 's3a://lake/acme');
    expect(() => t.location('bronze', table, ...segments)).toThrow(/not a literal path under s3a:\/\/lake\/acme/);
  });

  it('checks roots segment by segment, normalised', () => {
    const roots = ['s3a://lake/acme'];
    expect(isUnderRoot('s3a://lake/acme/', roots)).toBe(true);
    expect(isUnderRoot('S3A://LAKE/acme/x', roots)).toBe(true);
    expect(isUnderRoot('s3a://lake/acme2', roots)).toBe(false);
    expect(isUnderRoot('s3a://lake/ACME', roots)).toBe(false);
    expect(isUnderRoot('file:/lake/acme/x', ['file:///lake/acme'])).toBe(true);
    expect(isUnderRoot('file:///lake/x', ['file:///'])).toBe(true);
    expect(isUnderRoot('s3a://lake/acme/x', ['s3a://lake/{acme,beta}'])).toBe(false);
  });
});

const job = (root: string) => `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "acme", storage-root = ${JSON.stringify(root)} }
source { table = "orders_cdc" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "orders", catalog = "lake" }
`;

async function issuesOf(config: string, platform?: string) {
  const dir = tempFiles({ 'job.conf': config, ...(platform ? { 'platform.conf': platform } : {}) });
  const err = await loadJob({
    configFile: join(dir, 'job.conf'),
    ...(platform ? { envFile: join(dir, 'platform.conf') } : {}),
    overrides: [],
    env: {},
    runId: 'test-run',
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).exitCode).toBe(78);
  return (err as ConfigError).issues;
}

describe('storage roots in configs', () => {
  it.each(HOSTILE.filter(([uri]) => !uri.includes('\u0000')))('refuses tenant.storage-root %j (78, with its path)', async (uri, reason) => {
    const issues = await issuesOf(job(uri));
    expect(issues).toContainEqual({ path: 'tenant.storage-root', message: expect.stringMatching(reason) });
  });

  it('refuses the glob escape even when the platform allows the tenant its real root', async () => {
    const platform = 'catalogs { lake { format = iceberg, default = true } }\ntenants { acme { storage-roots = ["s3a://lake/acme"] } }';
    const issues = await issuesOf(job('s3a://lake/acme/{x,../beta}'), platform);
    expect(issues).toContainEqual({ path: 'tenant.storage-root', message: expect.stringMatching(/glob/) });
  });

  it.each([
    ['s3a://lake/*', /glob/],
    ['s3a://lake/acme/..', /"\.\." segments/],
    ['s3a://lake/%61cme', /percent/],
    ['s3a://lake//acme', /empty segments/],
  ])('refuses the platform root %j for a tenant', async (root, reason) => {
    const platform = `catalogs { lake { format = iceberg, default = true } }\ntenants { acme { storage-roots = ["s3a://lake/acme", ${JSON.stringify(root)}] } }`;
    const issues = await issuesOf(job('s3a://lake/acme'), platform);
    expect(issues).toContainEqual({ path: '(platform) tenants.acme.storage-roots[1]', message: expect.stringMatching(reason) });
  });
});
