import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadPlatform } from '../../../../src/core/config/load.js';
import type { ConfigIssue } from '../../../../src/core/errors.js';
import { tempFiles } from '../../../support/files.js';

/** Catalog types of the platform config (docs/catalogs.md): settings per type, secrets as references. */
async function load(catalogs: string): Promise<{ issues: ConfigIssue[]; catalogs: Record<string, unknown> }> {
  const dir = tempFiles({ 'platform.conf': `catalogs { ${catalogs} }` });
  const issues: ConfigIssue[] = [];
  const platform = await loadPlatform(join(dir, 'platform.conf'), {}, issues);
  return { issues, catalogs: platform.catalogs };
}

describe('platform catalogs: types and their settings', () => {
  it('accepts each Iceberg catalog type with its settings, and an untyped catalog the server alone defines', async () => {
    const { issues, catalogs } = await load(`
      rest { format = iceberg, type = rest, uri = "https://catalog.example.com/api/catalog", warehouse = "analytics",
             oauth2 { client-id = "jobs", client-secret = { env = CATALOG_SECRET }, scope = "PRINCIPAL_ROLE:ALL" } }
      bearer { format = iceberg, type = rest, uri = "http://127.0.0.1:18181/", token = { file = "/var/run/secrets/catalog-token" } }
      lake { format = iceberg, default = true, type = jdbc, uri = "jdbc:postgresql://db:5432/iceberg", warehouse = "s3a://lake/warehouse",
             user = "iceberg", password = { env = ICEBERG_DB_PASSWORD } }
      files { format = iceberg, type = hadoop, warehouse = "file:///var/lake/warehouse" }
      hms { format = iceberg, type = hive, uri = "thrift://metastore-1:9083,thrift://metastore-2:9083" }
      spark_catalog { format = delta }
      old { format = iceberg }`);
    expect(issues).toEqual([]);
    expect(catalogs.rest).toEqual({
      format: 'iceberg',
      default: false,
      type: 'rest',
      uri: 'https://catalog.example.com/api/catalog',
      warehouse: 'analytics',
      oauth2: { 'client-id': 'jobs', 'client-secret': { env: 'CATALOG_SECRET' }, scope: 'PRINCIPAL_ROLE:ALL' },
    });
    expect(catalogs.old).toEqual({ format: 'iceberg', default: false });
  });

  it.each([
    ['rest { format = iceberg, type = rest }', 'catalogs.rest.uri', 'is required for a rest catalog'],
    ['rest { format = iceberg, type = rest, uri = "ftp://catalog/" }', 'catalogs.rest.uri', 'an http:// or https:// URL'],
    ['rest { format = iceberg, type = rest, uri = "https://jobs:hunter2@catalog/" }', 'catalogs.rest.uri', 'must not carry credentials'],
    [
      'rest { format = iceberg, type = rest, uri = "http://c/", oauth2 { client-id = a, client-secret = "hunter2" } }',
      'catalogs.rest.oauth2.client-secret',
      '',
    ],
    [
      'rest { format = iceberg, type = rest, uri = "http://c/", token = { env = T }, oauth2 { client-id = a, client-secret = { env = S } } }',
      'catalogs.rest.token',
      'oauth2 or token, not both',
    ],
    ['rest { format = iceberg, type = rest, uri = "http://c/", password = { env = P } }', 'catalogs.rest.password', 'is not a setting of a rest catalog'],
    [
      'lake { format = iceberg, type = jdbc, uri = "jdbc:postgresql://db/iceberg?password=hunter2", warehouse = "s3a://lake/wh" }',
      'catalogs.lake.uri',
      'must not carry a password',
    ],
    ['lake { format = iceberg, type = jdbc, uri = "postgresql://db/iceberg", warehouse = "s3a://lake/wh" }', 'catalogs.lake.uri', 'a jdbc: URL'],
    ['lake { format = iceberg, type = jdbc, uri = "jdbc:sqlite:/var/lake/catalog.db" }', 'catalogs.lake.warehouse', 'is required for a jdbc catalog'],
    ['files { format = iceberg, type = hadoop, warehouse = "s3a://lake/../other" }', 'catalogs.files.warehouse', ''],
    ['hms { format = iceberg, type = hive, uri = "http://metastore:9083" }', 'catalogs.hms.uri', 'thrift://host:port'],
    ['dl { format = delta, type = rest, uri = "http://c/" }', 'catalogs.dl.type', 'catalog types are Iceberg'],
    ['old { format = iceberg, uri = "http://c/" }', 'catalogs.old.uri', 'needs a catalog type'],
    ['u { format = iceberg, type = unity, uri = "http://c/" }', 'catalogs.u.type', ''],
  ])('refuses %s at its path', async (conf, path, message) => {
    const { issues } = await load(conf);
    // Each issue also says where the value was written (`at`: platform.conf:line:col).
    expect(issues).toContainEqual({
      path: `(platform) ${path}`,
      message: expect.stringContaining(message),
      at: expect.stringMatching(/platform\.conf:\d+:\d+$/),
    });
  });

  it('never echoes a secret written inline where a reference belongs', async () => {
    const { issues } = await load('rest { format = iceberg, type = rest, uri = "http://c/", oauth2 { client-id = a, client-secret = "hunter2-secret" } }');
    expect(issues.length).toBeGreaterThan(0);
    expect(JSON.stringify(issues)).not.toContain('hunter2-secret');
  });
});
