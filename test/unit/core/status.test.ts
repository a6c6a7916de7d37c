import { mkdtempSync, readFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compact, TERMINATION_LOG, terminationTargets, type StatusDocument, writeStatus } from '../../../src/core/status.js';
import { Secret } from '../../../src/core/secrets.js';
import { ConfigError } from '../../../src/core/errors.js';

function doc(overrides: Partial<StatusDocument> = {}): StatusDocument {
  return {
    schema: 'lakehouse-jobs/status/v1',
    status: 'failed',
    exitCode: 78,
    command: 'run',
    job: { template: 'cdc-silver-merge', schemaVersion: 1, name: 'acme-orders' },
    tenant: 'acme',
    runId: 'scheduled__2026-07-05',
    startedAt: '2026-07-05T00:00:00.000Z',
    finishedAt: '2026-07-05T00:00:01.000Z',
    durationMs: 1000,
    outputs: [],
    metrics: { rowsRead: 0, rowsWritten: 0 },
    ...overrides,
  };
}

describe('status writer', () => {
  it('writes stdout, the status file, XCom when its directory exists, and the termination log', () => {
    const dir = mkdtempSync(join(tmpdir(), 'status-'));
    mkdirSync(join(dir, 'xcom'));
    let out = '';
    const d = doc({ error: new ConfigError([{ path: 'cdc.primary-key', message: 'is required' }]).report() });
    writeStatus(d, {
      statusFile: join(dir, 'out', 'status.json'),
      xcomDir: join(dir, 'xcom'),
      terminationLog: join(dir, 'termination-log'),
      stdout: (t) => (out += t),
    });
    expect(JSON.parse(out)).toEqual(d);
    expect(JSON.parse(readFileSync(join(dir, 'out', 'status.json'), 'utf8'))).toEqual(d);
    expect(JSON.parse(readFileSync(join(dir, 'xcom', 'return.json'), 'utf8'))).toEqual(d);
    const term = JSON.parse(readFileSync(join(dir, 'termination-log'), 'utf8'));
    expect(term).toMatchObject({ status: 'failed', exitCode: 78, error: { code: 'CONFIG_INVALID', path: 'cdc.primary-key' } });
    // No XCom directory: nothing written there.
    writeStatus(d, { xcomDir: join(dir, 'missing'), stdout: () => undefined });
    expect(existsSync(join(dir, 'missing'))).toBe(false);
  });

  it('writes the default termination message file only where it already exists (Kubernetes creates it)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'status-'));
    const missing = join(dir, 'termination-log');
    writeStatus(doc(), { terminationLogIfExists: missing, stdout: () => undefined });
    expect(existsSync(missing)).toBe(false);

    writeFileSync(missing, 'old');
    writeStatus(doc(), { terminationLogIfExists: missing, stdout: () => undefined });
    expect(JSON.parse(readFileSync(missing, 'utf8'))).toMatchObject({ status: 'failed', exitCode: 78 });

    // A directory of that name is not a termination message file.
    const asDir = join(dir, 'a-directory');
    mkdirSync(asDir);
    expect(() => writeStatus(doc(), { terminationLogIfExists: asDir, stdout: () => undefined })).not.toThrow();
  });

  it('always writes an explicitly requested termination message file, creating it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'status-'));
    const path = join(dir, 'term');
    writeStatus(doc(), { ...terminationTargets(path), stdout: () => undefined });
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ status: 'failed' });
  });

  it('uses /dev/termination-log by default, only if it exists', () => {
    expect(terminationTargets(undefined)).toEqual({ terminationLogIfExists: TERMINATION_LOG });
    expect(TERMINATION_LOG).toBe('/dev/termination-log');
    expect(terminationTargets('/x/term')).toEqual({ terminationLog: '/x/term' });
  });

  it('lists the completed steps of a failed run in the termination message', () => {
    const failed = doc({ completedSteps: ['check-batch', 'record-tombstones'], failedStep: 'merge' });
    expect(JSON.parse(compact(failed))).toMatchObject({ completedSteps: ['check-batch', 'record-tombstones'] });
    expect(JSON.parse(compact({ ...failed, status: 'succeeded', exitCode: 0 }))).not.toHaveProperty('completedSteps');
  });

  it('keeps the termination message within 4096 bytes', () => {
    const outputs = Array.from({ length: 200 }, (_, i) => ({
      table: `lake.acme_silver.table_${i}`,
      format: 'iceberg',
      snapshotId: String(1e15 + i),
      metrics: { inserted: i },
    }));
    expect(Buffer.byteLength(compact(doc({ outputs, status: 'succeeded', exitCode: 0 })))).toBeLessThanOrEqual(4096);
  });

  it('never prints a secret that reached a message', () => {
    const s = new Secret('hunter2-very-secret');
    let out = '';
    writeStatus(doc({ error: { code: 'X', category: 'spark', message: `login failed for password=${s.reveal()}`, retryable: false } }), {
      stdout: (t) => (out += t),
    });
    expect(out).not.toContain('hunter2-very-secret');
    expect(out).toContain('[redacted]');
    expect(JSON.stringify({ s })).toBe('{"s":"[redacted]"}');
  });
});
