import { join } from 'node:path';
import { Table, type Vector, vectorFromArray } from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { ConfigError, asLakehouseError } from '../../../src/core/errors.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { chosenRemote } from '../../../src/runner/remote.js';
import { resolveSecret } from '../../../src/core/config/secret-ref.js';
import { platformSchema } from '../../../src/core/config/platform.js';
import { tenantContext } from '../../../src/core/tenant.js';
import { rows } from '../../../src/spark/arrow.js';
import { endOffsets } from '../../../src/jobs/bronze/kafka-bronze-ingest.js';
import { refDataset } from '../../../src/runner/lineage/datasets.js';
import { jdbcDataset } from '../../../src/runner/lineage/naming.js';
import { tempFiles } from '../../support/files.js';

/**
 * Every name a config gives (a catalog, a JDBC connection, a Kafka cluster, a tenant, a secret, a
 * driver's protocol, a lineage namespace …) is looked up as an own key: the names every JavaScript
 * object answers to are unknown names like any other (78 at their path, with "did you mean"), never
 * a TypeError (70) or a lookup that succeeds. One test per class of lookup.
 */
const PROTOTYPE_NAMES = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'];

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc { inline-urls = allow, connections { shop { url = "jdbc:sqlite:/lake/acme/shop.db", tenants = ["acme"] } } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
kafka.clusters.main { bootstrap-servers = "127.0.0.1:9", tenants { acme { topic-prefixes = ["acme."] } } }
`;

const configs = {
  cdc: (extra = '') => `
job    { template = "cdc-silver-merge", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts" }
target { table = "orders" }
${extra}`,
  jdbc: (extra = '') => `
job    { template = "jdbc-snapshot-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders", connection = "shop" }
target { table = "orders", snapshot-date = "2026-07-05" }
${extra}`,
  kafka: (extra = '') => `
job    { template = "kafka-bronze-ingest", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { cluster = "main", topics = ["acme.orders"], value-format = raw }
target { table = "orders_events", format = iceberg }
${extra}`,
  gold: (extra = '') => `
job    { template = "gold-publish", schema-version = 1 }
tenant { id = "acme", storage-root = "file:///lake/acme" }
transform { sql = "SELECT id FROM silver.orders" }
target { table = "orders_gold", grain = ["id"], mode = merge }
${extra}`,
};

async function outcome(config: string, opts: { platform?: string | undefined; tenant?: string; set?: string[] } = {}) {
  const files: Record<string, string> = { 'job.conf': config };
  if (opts.platform !== undefined) files['platform.conf'] = opts.platform;
  const dir = tempFiles(files);
  try {
    await loadJob({
      configFile: join(dir, 'job.conf'),
      ...(opts.platform !== undefined ? { envFile: join(dir, 'platform.conf') } : {}),
      overrides: opts.set ?? [],
      env: process.env as Record<string, string>,
      runId: 'own',
      ...(opts.tenant !== undefined ? { tenant: opts.tenant } : {}),
    });
    return { code: 0, issues: [], text: '' };
  } catch (e) {
    const err = asLakehouseError(e);
    return { code: err.exitCode, issues: err instanceof ConfigError ? err.issues : [], text: `${err.name}: ${JSON.stringify(err.report())}` };
  }
}

async function unknownAt(config: string, path: string, opts: Parameters<typeof outcome>[1] = { platform }) {
  const r = await outcome(config, opts);
  expect(r.code, r.text).toBe(78);
  expect(r.issues.map((i) => i.path)).toContain(path);
  expect(r.text).not.toMatch(/TypeError|is not a function|Cannot read/);
  return r;
}

describe.each(PROTOTYPE_NAMES)('the name %s', (n) => {
  it('is an unknown catalog (target.catalog, transform.catalogs.silver)', async () => {
    await unknownAt(configs.cdc(`target.catalog = "${n}"`), 'target.catalog');
    await unknownAt(configs.gold(`transform.catalogs.silver = "${n}"`), 'transform.catalogs.silver');
    // Without a platform config too (the local defaults).
    await unknownAt(configs.cdc(`target.catalog = "${n}"`), 'target.catalog', {});
  });

  it('is an unknown JDBC connection', async () => {
    await unknownAt(configs.jdbc(`source.connection = "${n}"`), 'source.connection');
  });

  it('is an unknown Kafka cluster', async () => {
    await unknownAt(configs.kafka(`source.cluster = "${n}"`), 'source.cluster');
  });

  it('is an unknown tenant (tenant.id; --tenant is a usage error, 64)', async () => {
    await unknownAt(configs.cdc(`tenant.id = "${n}"`), 'tenant.id');
    const bound = await outcome(configs.cdc(), { platform, tenant: n });
    expect(bound.code, bound.text).toBe(64);
  });

  it("is not the driver of an inline url's protocol", async () => {
    await unknownAt(
      configs.jdbc().replace('connection = "shop"', `url = "jdbc:${n.toLowerCase()}://127.0.0.1:9/db", driver = "org.postgresql.Driver"`),
      n === 'constructor' ? 'source.driver' : 'source.url',
    );
  });

  it('is not a variable a secret reference names', () => {
    expect(() => resolveSecret({ env: n }, 'source.password', process.env as Record<string, string>)).toThrow(ConfigError);
  });

  it("is not a lineage namespace, a JDBC scheme or a tenant's own server", () => {
    const naming = { tenant: tenantContext('acme', 'file:///lake/acme'), catalogNamespaces: platformSchema.parse({}).lineage?.['catalog-namespaces'] ?? {} };
    const ds = refDataset({ kind: 'table', table: `${n}.acme_silver.t` }, naming);
    expect(ds.symlink?.namespace).toBe(n);
    expect(() => jdbcDataset(`jdbc:${n.toLowerCase()}://db.example:5432/shop`, 'orders')).not.toThrow();
    const p = platformSchema.parse({ spark: { remote: 'sc://shared:15002' }, tenants: { acme: { 'storage-roots': ['file:///lake/acme'] } } });
    expect(chosenRemote({ env: {}, platform: p, tenant: n }).text).toBe('sc://shared:15002');
  });
});

describe('names from data and from the platform config', () => {
  it('a Kafka tenant without a grant, named like a prototype property, is granted nothing (no TypeError)', async () => {
    const noTenants = platform.replace('tenants { acme { storage-roots = ["file:///lake/acme"] } }', '');
    const r = await outcome(configs.kafka().replace('id = "acme"', 'id = "constructor"').replace('"acme.orders"', '"constructor.orders"'), {
      platform: noTenants,
    });
    expect(r.code, r.text).toBe(78);
    expect(r.issues.map((i) => i.path)).toContain('source.topics[0]');
  });

  it('a key named __proto__ in the platform config or a job config is refused where it is written', async () => {
    const bad = await outcome(configs.cdc(), { platform: `${platform}\ncatalogs { "__proto__" { format = delta } }` });
    expect(bad.code).toBe(78);
    expect(bad.issues.map((i) => i.path)).toContain('(platform) catalogs.__proto__');
    const job = await outcome(configs.cdc().replace('target { table = "orders" }', 'target { table = "orders", "__proto__" { catalog = "x" } }'), { platform });
    expect(job.code).toBe(78);
    expect(job.issues.map((i) => i.path)).toContain('target.__proto__');
  });

  it('the platform config looks names up without prototypes', () => {
    const p = platformSchema.parse({ catalogs: { lake: { format: 'iceberg' } } });
    for (const n of PROTOTYPE_NAMES) {
      expect((p.catalogs as Record<string, unknown>)[n]).toBeUndefined();
      expect((p.jdbc.connections as Record<string, unknown>)[n]).toBeUndefined();
      expect((p.kafka.clusters as Record<string, unknown>)[n]).toBeUndefined();
    }
  });

  it('a column or struct field named __proto__ is a field of the row, not its prototype', () => {
    const columns = Object.create(null) as Record<string, Vector>;
    columns['__proto__'] = vectorFromArray(['x']) as Vector;
    columns['constructor'] = vectorFromArray(['y']) as Vector;
    const table = new Table(columns);
    const [row] = rows(table);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.getOwnPropertyNames(row)).toEqual(expect.arrayContaining(['__proto__', 'constructor']));
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toBe('x');
  });

  it('a Kafka topic named __proto__ is a topic of the end offsets', () => {
    const offsets = endOffsets([
      { batchId: 0, numInputRows: 1, sources: [{ description: 'k', numInputRows: 1, endOffset: JSON.parse('{"__proto__": {"0": 7}}') }] },
    ]);
    expect(Object.getOwnPropertyDescriptor(offsets, '__proto__')?.value).toEqual({ 0: 7 });
    expect(({} as Record<string, unknown>)['0']).toBeUndefined();
  });
});

describe('a value of the wrong type names the type it must be, never "is required"', () => {
  it.each([
    ['a list for a string', 'target.table = ["orders"]', 'target.table', 'must be a string, not a list'],
    ['a number for a list', 'cdc.primary-key = 5', 'cdc.primary-key', 'must be a list, not a number'],
    ['a string for an object', 'target = "orders"', 'target', 'must be an object, not a string'],
    ['null for a string', 'target.table = null', 'target.table', 'must be a string, not null'],
  ])('%s', async (_, line, path, message) => {
    const r = await outcome(configs.cdc(line), { platform });
    expect(r.code).toBe(78);
    expect(r.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path, message })]));
  });

  it('a missing key is still "is required"', async () => {
    const r = await outcome(configs.cdc().replace('target { table = "orders" }', ''), { platform });
    expect(r.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'target', message: 'is required' })]));
  });

  it('a wrong type in the platform config is named the same way', async () => {
    const r = await outcome(configs.cdc(), { platform: `${platform}\nmaintenance.retention-floor-hours = "a week"` });
    expect(r.issues).toEqual([expect.objectContaining({ path: '(platform) maintenance.retention-floor-hours', message: 'must be a number, not a string' })]);
  });
});
