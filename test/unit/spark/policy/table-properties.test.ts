import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ALLOWED_PROPERTIES } from '../../../../src/jobs/partition-spec.js';
import { READ_MARKER_PROPERTY } from '../../../../src/jobs/incremental.js';
import { tableProperties } from '../../../../src/jobs/tables.js';
import { LEDGER_ICEBERG_PROPERTIES } from '../../../../src/runner/job-runs.js';

/**
 * The server's list of the table properties a bound session may set (spark-plugins,
 * TableProperties.java) is the runner's: the tenant's allow-list and the properties the runner sets
 * itself. A key added on one side only fails here, not on a tenant's run.
 */
const java = readFileSync(fileURLToPath(new URL('../../../../spark-plugins/src/main/java/lakehouse/jobs/spark/TableProperties.java', import.meta.url)), 'utf8');
const block = /ALLOWED = Set\.of\(([\s\S]*?)\);/.exec(java)?.[1] ?? '';
const serverKeys = [...block.replace(/\/\/.*$/gm, '').matchAll(/"([^"]+)"/g)].map((m) => m[1]!);

describe('the table properties the server allows', () => {
  it('are the tenant’s allow-list and the runner’s own, no more, no fewer', () => {
    const runner = new Set([
      ...Object.keys(ALLOWED_PROPERTIES.iceberg),
      ...Object.keys(ALLOWED_PROPERTIES.delta),
      ...Object.keys(tableProperties('iceberg', 'file:///x')),
      ...Object.keys(tableProperties('delta', 'file:///x')),
      READ_MARKER_PROPERTY,
      ...Object.keys(LEDGER_ICEBERG_PROPERTIES),
    ]);
    expect(serverKeys.length).toBeGreaterThan(10);
    expect(new Set(serverKeys).size).toBe(serverKeys.length);
    expect([...serverKeys].sort()).toEqual([...runner].sort());
  });

  it('never include a property that places a table’s files', () => {
    for (const k of ['write.data.path', 'write.metadata.path', 'write.object-storage.path', 'write.folder-storage.path', 'owner', 'provider'])
      expect(serverKeys).not.toContain(k);
  });
});
