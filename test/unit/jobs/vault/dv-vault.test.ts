import { execFileSync } from 'node:child_process';
import { formatPlan } from '../../../../src/app/plan-view.js';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/core/errors.js';
import type { Step } from '../../../../src/jobs/template.js';
import { loadJob } from '../../../../src/runner/load-job.js';
import { col, fn, lit } from '../../../../src/spark/plan/expressions.js';
import { DELIMITER, HASH_ALGORITHMS, NULL_TOKEN, type HashAlgorithm, hashOf, hashdiffColumns, keyPart, zeroKey } from '../../../../src/jobs/vault/hashing.js';
import { tempFiles } from '../../../support/files.js';

const repo = fileURLToPath(new URL('../../../../', import.meta.url));

/** The documented hash (docs/templates/dv-hub.md, "Hash keys"), written again from the page. */
function referenceKey(algorithm: HashAlgorithm, values: (string | null)[]): string {
  const part = (v: string | null) => {
    const t = v === null ? '' : v.replace(/^ +| +$/g, '').toUpperCase();
    return t === '' ? '^^' : t;
  };
  return createHash(algorithm === 'sha256' ? 'sha256' : algorithm)
    .update(Buffer.from(values.map(part).join('||'), 'utf8'))
    .digest('hex')
    .toUpperCase();
}

const platform = `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
tenants { acme { storage-roots = ["file:///lake/acme"] } }
`;
const head = (t: string) => `job { template = "${t}", schema-version = 1 }\ntenant { id = "acme", storage-root = "file:///lake/acme" }\n`;
const hub = `${head('dv-hub')}
sources = [
  { table = "orders", record-source = "shop.orders", business-key = ["customer"], where = "status <> 'X'" }
  { table = "customers", layer = silver, format = iceberg, record-source = "crm" , business-key = ["name"] }
]
hub { hash-key = "hk_customer", business-key = ["customer"] }
ghost-record = true
target { table = "hub_customer" }`;
const link = `${head('dv-link')}
source { table = "orders", format = iceberg, catalog = "lake", snapshot-date = "2026-07-05", record-source = "shop.orders" }
link { hash-key = "lhk", hubs = [ { hash-key = "hk_order", business-key = ["id"] }, { hash-key = "hk_customer", business-key = ["customer"] } ] }
target { table = "link_order_customer", format = delta, catalog = "spark_catalog" }`;
const sat = `${head('dv-satellite')}
source { table = "orders", record-source = "shop.orders" }
satellite { parent-hash-key = "hk_order", business-key = ["id"], payload = ["status", "amount"], order-by = ["ts"], hash-algorithm = sha256 }
target { table = "sat_order" }`;

async function load(config: string, set: string[] = [], logicalDate: string | null = '2026-07-05') {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': platform });
  return loadJob({
    configFile: join(dir, 'job.conf'),
    envFile: join(dir, 'platform.conf'),
    overrides: set,
    env: {},
    runId: 'r',
    ...(logicalDate ? { logicalDate } : {}),
  });
}
/** `--set` cannot address a list element: a source's key is changed in the text. */
const inSource = (i: number, key: string, value: string) => (config: string) => {
  const lines = config.split('\n');
  const at = lines.findIndex((l) => l.includes('record-source')) + i;
  lines[at] = lines[at]!.replace(/ }\s*$/, `, ${key} = ${value} }`);
  return lines.join('\n');
};
async function issues(config: string, set: string[] = []) {
  const err = await load(config, set).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
}

describe('hash keys (hashing.ts)', () => {
  it('are the documented function: trim, upper-case, NULL or empty as ^^, joined by ||, upper-case hex', () => {
    expect(NULL_TOKEN).toBe('^^');
    expect(DELIMITER).toBe('||');
    expect(keyPart(col('c'))).toEqual(
      fn('coalesce', fn('nullif', fn('upper', fn('trim', { kind: 'cast', expr: col('c'), type: 'string' })), lit('')), lit('^^')),
    );
    const input = fn('concat_ws', lit('||'), keyPart(col('a')), keyPart(col('b')));
    expect(hashOf([col('a'), col('b')], 'md5')).toEqual(fn('upper', fn('md5', input)));
    expect(hashOf([col('a'), col('b')], 'sha1')).toEqual(fn('upper', fn('sha1', input)));
    expect(hashOf([col('a'), col('b')], 'sha256')).toEqual(fn('upper', fn('sha2', input, lit(256))));
  });

  it('agree between this reference and the Python one (test/support/dv_keys.py) for every algorithm', () => {
    const cases: [HashAlgorithm, (string | null)[]][] = HASH_ALGORITHMS.flatMap((a) => [
      [a, [' alice ']],
      [a, ['1', 'Bob']],
      [a, [null, '']],
      [a, ['straße', 'Ünïcode']],
      [a, ['a||b']],
    ]);
    const python = execFileSync('python3', [join(repo, 'test/support/dv_keys.py'), JSON.stringify(cases)])
      .toString()
      .trim()
      .split('\n');
    expect(python).toEqual(cases.map(([a, v]) => referenceKey(a, v)));
    // Known values: MD5('ALICE'), and the zero keys' lengths.
    expect(referenceKey('md5', [' alice '])).toBe(createHash('md5').update('ALICE').digest('hex').toUpperCase());
    expect([zeroKey('md5').length, zeroKey('sha1').length, zeroKey('sha256').length]).toEqual([32, 40, 64]);
  });

  it('take a hashdiff over the payload sorted by name, whatever order the config lists it in', () => {
    expect(hashdiffColumns(['status', 'amount', 'Zeta'])).toEqual(['Zeta', 'amount', 'status']);
  });

  it('read the load date from --logical-date: a date or a timestamp with an offset, nothing else (64)', async () => {
    const at = (d: string) => load(hub, [], d).then((j) => formatPlan(j.plan));
    expect(await at('2026-07-05')).toContain("TIMESTAMP '2026-07-05T00:00:00.000Z' AS load_date");
    expect(await at('2026-07-05T10:00:00+02:00')).toContain("TIMESTAMP '2026-07-05T08:00:00.000Z' AS load_date");
    for (const bad of ['2026-02-30', '2026-07-05T10:00:00', 'yesterday', '2026-7-5'])
      await expect(load(hub, [], bad), bad).rejects.toMatchObject({ exitCode: 64 });
  });
});

describe('dv-hub', () => {
  it('plans the load date check, one insert per source in order, the ghost record; only steps with source logic are judged', async () => {
    const job = await load(hub);
    // The sources' logic is judged (check-batch-<i>, reading no row) before anything is created.
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'probe-files-only-sources-0',
      'check-source-columns-sources-0',
      'check-source-columns-sources-1',
      'check-batch-0',
      'check-batch-1',
      'create-namespace',
      'create-table',
      'check-schema',
      'measure',
      'find-ghost',
      'insert-ghost',
      'insert-0',
      'insert-1',
      'read-snapshot',
    ]);
    const untrusted = job.plan.steps.filter((s) => s.untrusted).map((s) => s.id);
    expect(untrusted).toEqual([
      'check-batch-0',
      'check-batch-1',
      'create-table',
      'check-schema',
      'measure',
      'find-ghost',
      'insert-ghost',
      'insert-0',
      'insert-1',
    ]);
    expect(job.plan.steps.find((s) => s.id === 'measure')!.untrusted).toEqual(['sources[0].where']);
  });

  it("refuses a business key column a source does not have: 78 at the path that names it, with the source's own closest column", async () => {
    const job = await load(hub);
    const check = (i: number) => job.plan.steps.find((s) => s.id === `check-source-columns-sources-${i}`) as Extract<Step, { kind: 'checkColumns' }>;
    const columns = (...names: string[]) => names.map((name) => ({ name, type: 'string' }));
    // Each source's columns, before its where: a misspelt key is named at its path, not a 65 with Spark's plan.
    expect(check(0).untrusted).toBeUndefined();
    expect(check(0).interpret(columns('CUSTOMER', 'status'))).toEqual({});
    expect((check(0).interpret(columns('customr', 'status')).fail as ConfigError).issues).toEqual([
      { path: 'sources[0].business-key[0]', message: 'column "customer" is not a column of file:///lake/acme/bronze/orders; did you mean "customr"?' },
    ]);
    expect((check(1).interpret(columns('id', 'full_name')).fail as ConfigError).issues).toEqual([
      { path: 'sources[1].business-key[0]', message: 'column "name" is not a column of lake.acme_silver.customers' },
    ]);
  });

  it('without --logical-date still validates and plans, but the first step stops a run (64)', async () => {
    const job = await load(hub, [], null);
    const first = job.plan.steps[0]!;
    expect(first.id).toBe('check-load-date');
    if (first.kind !== 'probePaths') throw new Error('expected a probe');
    const effect = first.interpret([]);
    expect(effect.fail?.exitCode).toBe(64);
    expect(effect.fail?.message).toContain('--logical-date');
  });

  it.each([
    ['a business key of another length', inSource(0, 'business-key', '["a", "b"]'), 'sources[0].business-key: has 2 column(s); hub.business-key has 1'],
    ['parquet in silver', inSource(1, 'format', 'parquet'), 'sources[1].format: silver tables are iceberg or delta'],
    ['a snapshot date in silver', inSource(1, 'snapshot-date', '"2026-07-05"'), 'sources[1].snapshot-date: applies to bronze'],
    ['a catalog for parquet', inSource(0, 'catalog', 'lake'), 'sources[0].catalog: applies to iceberg and delta'],
    ['a record source with quotes', inSource(0, 'record-source', `"x' OR '1"`), 'sources[0].record-source: a record source is'],
    ['a where outside the grammar', inSource(0, 'where', '"(SELECT 1) = 1"'), 'sources[0].where: at position'],
  ])('refuses a source with %s (78, with its path)', async (_, edit, message) => {
    expect((await issues(edit(hub))).join('\n')).toContain(message);
  });

  it.each([
    ['the hash key among the business key', ['hub.hash-key=customer'], 'hub.business-key[0]: "customer" is also hub.hash-key'],
    ['a reserved column', ['hub.business-key=["load_date"]'], 'hub.business-key[0]: "load_date" is a column the template writes or uses itself'],
    ['an internal column as the hash key', ['hub.hash-key=__lake_rn'], 'hub.hash-key: "__lake_rn" is a column the template writes or uses itself'],
    ['a duplicated business key column', ['hub.business-key=["a","A"]'], 'hub.business-key[1]: "A" appears twice'],
    ['no source', ['sources=[]'], 'sources: needs at least one source'],
    ['an unknown algorithm', ['hub.hash-algorithm=crc32'], 'hub.hash-algorithm:'],
    ['a table name that is not a name', ['target.table="a`b"'], 'target.table:'],
  ])('refuses %s (78, with its path)', async (_, set, message) => {
    expect((await issues(hub, set)).join('\n')).toContain(message);
  });

  it('refuses a catalog of the other format at target.format', async () => {
    expect(await issues(hub, ['target.format=delta'])).toEqual(['target.format: is delta, but catalog "lake" holds iceberg tables']);
  });
});

describe('dv-link', () => {
  it('hashes every parent and the link from the parents’ business keys in order; reads the bronze table', async () => {
    const job = await load(link);
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'probe-partitions-source',
      'check-source-columns-source',
      'create-namespace',
      'create-table',
      'check-schema',
      'measure',
      'insert',
      'read-version',
    ]);
    expect(job.plan.steps.some((s) => s.untrusted)).toBe(false);
  });

  it.each([
    ['a single hub', ['link.hubs=[{hash-key=hk_order, business-key=[id]}]'], 'link.hubs: a link relates at least two hub keys'],
    [
      'a parent hash key equal to the link key',
      ['link.hubs=[{hash-key=hk_order, business-key=[id]}, {hash-key=LHK, business-key=[customer]}]'],
      'link.hubs[1].hash-key: "LHK" is also link.hash-key',
    ],
  ])('refuses %s (78, with its path)', async (_, set, message) => {
    expect((await issues(link, set)).join('\n')).toContain(message);
  });
});

describe('dv-satellite', () => {
  it('checks the batch before creating anything and inserts on (hash key, load_date, load_seq)', async () => {
    const job = await load(sat);
    expect(job.plan.steps.map((s) => s.id)).toEqual([
      'probe-files-only-source',
      'check-source-columns-source',
      'check-batch',
      'create-namespace',
      'create-table',
      'check-schema',
      'measure',
      'insert',
      'read-snapshot',
    ]);
  });

  it.each([
    [
      'a payload column the template writes',
      ['satellite.payload=["hashdiff"]'],
      'satellite.payload[0]: "hashdiff" is a column the template writes or uses itself',
    ],
    [
      'load_seq as the parent key',
      ['satellite.parent-hash-key=load_seq'],
      'satellite.parent-hash-key: "load_seq" is a column the template writes or uses itself',
    ],
    [
      'a payload column named like the plan’s own',
      ['satellite.payload=["status", "__Lake_Prev"]'],
      'satellite.payload[1]: "__Lake_Prev" is a column the template writes or uses itself',
    ],
    ['an empty payload', ['satellite.payload=[]'], 'satellite.payload: needs at least one payload column'],
    ['an unknown key', ['satellite.order=["ts"]'], 'satellite.order'],
  ])('refuses %s (78, with its path)', async (_, set, message) => {
    expect((await issues(sat, set)).join('\n')).toContain(message);
  });
});
