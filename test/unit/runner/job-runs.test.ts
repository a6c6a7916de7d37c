import { describe, expect, it } from 'vitest';
import { platformSchema } from '../../../src/core/config/platform.js';
import { registerSecretValue } from '../../../src/core/secrets.js';
import type { StatusDocument } from '../../../src/core/status.js';
import { appendStep, createSteps, ledgerBinding, ledgerRow, ledgerTable } from '../../../src/runner/job-runs.js';
import { tenantBinding } from '../../../src/spark/policy/binding.js';
import { tenantContext } from '../../../src/core/tenant.js';

const catalogs = { lake: { format: 'iceberg', default: true }, spark_catalog: { format: 'delta' } };
const tenants = { acme: { 'storage-roots': ['s3://lake/acme'], 'read-roots': ['s3://shared/ref'], 'read-namespaces': ['lake.shared'] } };
const ledger = { catalog: 'lake', location: 's3://platform/ledger/job_runs' };
const issues = (p: unknown) => {
  const r = platformSchema.safeParse(p);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('the platform config key `ledger`', () => {
  it('is off by default and names platform.job_runs when on', () => {
    expect(platformSchema.parse({ catalogs }).ledger).toBeUndefined();
    expect(platformSchema.parse({ catalogs, tenants, ledger }).ledger).toEqual({ ...ledger, table: 'platform.job_runs' });
  });

  it("refuses a catalog the platform lacks, a tenant's layer namespace, and unknown keys", () => {
    expect(issues({ catalogs, ledger: { ...ledger, catalog: 'nope' } })).toEqual([expect.stringMatching(/^ledger\.catalog: "nope" is not a catalog/)]);
    expect(issues({ catalogs, ledger: { ...ledger, table: 'acme_silver.job_runs' } })).toEqual([expect.stringMatching(/^ledger\.table: .*layer namespace/)]);
    expect(issues({ catalogs, ledger: { ...ledger, table: 'job_runs' } })).toEqual([expect.stringMatching(/^ledger\.table: namespace\.table/)]);
    expect(issues({ catalogs, ledger: { ...ledger, enabled: true } })).toEqual([expect.stringMatching(/^ledger: .*enabled/)]);
    expect(issues({ catalogs, ledger: { catalog: 'lake' } })).toEqual([expect.stringMatching(/^ledger\.location: /)]);
  });

  it("refuses a location a tenant's roots reach, and a read grant of the ledger's namespace", () => {
    for (const location of ['s3://lake/acme/ledger', 's3://lake', 's3://shared/ref/x'])
      expect(issues({ catalogs, tenants, ledger: { ...ledger, location } })).toEqual([expect.stringMatching(/^ledger\.location: overlaps .* tenant acme/)]);
    expect(issues({ catalogs, tenants: { acme: { ...tenants.acme, 'read-namespaces': ['lake.platform'] } }, ledger })).toEqual([
      expect.stringMatching(/^tenants\.acme\.read-namespaces: grants lake\.platform/),
    ]);
  });
});

const doc: StatusDocument = {
  schema: 'lakehouse-jobs/status/v1',
  status: 'failed',
  exitCode: 65,
  command: 'run',
  job: { template: 'gold-publish', schemaVersion: 1, name: "it's" },
  tenant: 'acme',
  runId: 'scheduled__2026-07-05',
  startedAt: '2026-07-05T23:59:59.123Z',
  finishedAt: '2026-07-06T00:00:01.000Z',
  durationMs: 1877,
  outputs: [{ table: 'lake.acme_gold.t', format: 'iceberg', committed: false, snapshotId: '42' }],
  metrics: { rowsRead: 3, rowsWritten: 0 },
  error: { code: 'EXPECTATION_FAILED', category: 'data', message: 'token s3cr3t-value-1 leaked', retryable: false },
};

describe('the row of a run', () => {
  it('holds the document as the status file has it, scrubbed, and the columns from it', () => {
    registerSecretValue('s3cr3t-value-1');
    const text = JSON.stringify(ledgerRow(doc, { attempt: 'n-1', configHash: 'abc' }).rel, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    expect(text).not.toContain('s3cr3t-value-1');
    expect(text).toContain('[redacted]');
    // Values are literals (data), never SQL text: a quote in a job's name is just a character.
    expect(text).not.toMatch(/"kind":"sql"/);
    for (const v of ['scheduled__2026-07-05', 'n-1', 'abc', "gold-publish/v1/it's", 'EXPECTATION_FAILED', '2026-07-05'])
      expect(text).toContain(JSON.stringify(v));
  });

  it('is appended by a MERGE on its day, run id and attempt that only inserts', () => {
    const t = ledgerTable({ ...ledger, table: 'platform.job_runs' });
    const step = appendStep(t, ledgerRow(doc, { attempt: 'n-1', configHash: 'abc' }), '2026-07-05');
    expect(step.kind).toBe('command');
    const cmd = step.kind === 'command' ? step.command : undefined;
    expect(cmd).toMatchObject({ kind: 'merge', target: ['lake', 'platform', 'job_runs'], whenMatched: [], whenNotMatched: [{ action: 'insertAll' }] });
    expect(JSON.stringify(cmd && 'on' in cmd ? cmd.on : undefined)).toContain('"date":"2026-07-05"');
  });

  it('creates the table partitioned by day, Iceberg with snapshot isolation for its MERGEs', () => {
    const t = { ...ledger, table: 'platform.job_runs' };
    const [ns, create] = createSteps(t, 'iceberg', ledgerRow(doc, { attempt: undefined, configHash: 'abc' }));
    expect(ns).toMatchObject({ kind: 'command', ifNotExists: true });
    expect(create).toMatchObject({ kind: 'ensureTable', location: ledger.location, configPath: 'ledger.table' });
    const cmd = create!.kind === 'ensureTable' ? create!.create : undefined;
    expect(cmd).toMatchObject({ kind: 'writeV2', provider: 'iceberg', properties: { location: ledger.location, 'write.merge.isolation-level': 'snapshot' } });
    const delta = createSteps(t, 'delta', ledgerRow(doc, { attempt: undefined, configHash: 'abc' }))[1]!;
    expect(delta.kind === 'ensureTable' && delta.create.kind === 'writeV2' ? delta.create.properties : undefined).toEqual({ location: ledger.location });
  });
});

describe("the ledger's session", () => {
  it("is bound to the ledger's namespace and location only, under a name no tenant can have", () => {
    const b = ledgerBinding({ ...ledger, table: 'platform.job_runs' });
    expect(b).toMatchObject({
      readNamespaces: ['lake.platform'],
      writeNamespaces: ['lake.platform'],
      readRoots: [ledger.location],
      writeRoots: [ledger.location],
      kafka: [],
    });
    expect(b.tenant).not.toMatch(/^[a-z][a-z0-9_]*$/);
  });

  it("is out of a tenant's binding: no namespace or root of the tenant reaches it", () => {
    const p = platformSchema.parse({ catalogs, tenants, ledger });
    const t = tenantBinding(p, tenantContext('acme', 's3://lake/acme'));
    expect([...t.readNamespaces, ...t.writeNamespaces].map((n) => n.toLowerCase())).not.toContain('lake.platform');
    expect([...t.readRoots, ...t.writeRoots].some((r) => ledger.location.startsWith(r))).toBe(false);
  });
});
