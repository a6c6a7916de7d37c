import { join } from 'node:path';
import { loadJob } from '../../../src/runner/load-job.js';
import { asLakehouseError } from '../../../src/core/errors.js';
import { createLogger } from '../../../src/core/logger.js';
import { executePlan } from '../../../src/runner/executor.js';
import { commitMetadata } from '../../../src/runner/run.js';
import type { Step } from '../../../src/jobs/template.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { readDeltaWithDeltaRs, readIcebergWithPyIceberg, releaseSession, runSession } from '../../support/stack.js';
import { testQuery, testCommand } from '../../support/sql.js';

/** Helpers of the scd2-dim-load integration tests: a tenant's silver source, loads run in process, read-back by a second engine. */

export type Format = 'iceberg' | 'delta';
export const catalogOf = (format: Format) => (format === 'iceberg' ? 'lake' : 'spark_catalog');

export const platformConf = (tenant: { id: string; root: string }) =>
  `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`;

/** Replace the tenant's silver table `name` with the rows of `select` (a Spark SQL query). */
export async function silverTable(
  client: SparkConnectClient,
  tenant: { id: string; root: string },
  format: Format,
  name: string,
  select: string,
): Promise<void> {
  const parts = [catalogOf(format), `${tenant.id}_silver`, name];
  await client.execute(compileCommandPlan(testCommand(`CREATE NAMESPACE IF NOT EXISTS ${parts[0]}.${parts[1]}`), { reveal: true }));
  const props: Record<string, string> =
    format === 'iceberg' ? { location: `${tenant.root}/silver/${name}`, 'format-version': '2' } : { location: `${tenant.root}/silver/${name}` };
  await client.execute(compileCommandPlan(testQuery(select).writeTo(parts, 'create_or_replace', { provider: format, properties: props }), { reveal: true }));
}

export interface LoadResult {
  code: number;
  message?: string;
  outputs: Record<string, unknown>[];
}

/** Run one load in process (plan, a session bound to the tenant, executor), as the runner does. */
export async function load(
  client: SparkConnectClient,
  tenant: { id: string; root: string },
  config: string,
  opts: { set?: string[]; runId?: string; logicalDate?: string; beforeStep?: (step: Step) => Promise<void> } = {},
): Promise<LoadResult> {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': platformConf(tenant) });
  let session: SparkConnectClient | undefined;
  try {
    const runId = opts.runId ?? 'it-scd2';
    const job = await loadJob({
      configFile: join(dir, 'job.conf'),
      envFile: join(dir, 'platform.conf'),
      overrides: opts.set ?? [],
      env: {},
      runId,
      ...(opts.logicalDate ? { logicalDate: opts.logicalDate } : {}),
    });
    session = await runSession(job.platform, job.tenant);
    const r = await executePlan(job.plan, {
      session,
      logger: createLogger((process.env.SCD2_LOG as 'info' | undefined) ?? 'warn'),
      tags: ['it-scd2'],
      signal: new AbortController().signal,
      // The run's commit stamps, as a real run passes them (a CDC merge into Iceberg stamps its batch's fingerprint).
      stamps: (extra) => commitMetadata(job, runId, opts.logicalDate, extra),
      ...(opts.beforeStep ? { beforeStep: opts.beforeStep } : {}),
    });
    return { code: r.skipped ? 99 : 0, outputs: r.outputs as unknown as Record<string, unknown>[] };
  } catch (e) {
    const err = asLakehouseError(e);
    return { code: err.exitCode, message: err.message, outputs: [] };
  } finally {
    await releaseSession(session);
  }
}

/** The dimension's rows as a second engine reads them (PyIceberg or delta-rs), sorted by key and start. */
export function readDimension(tenant: { id: string; root: string }, format: Format, table: string): Record<string, unknown>[] {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_gold`, table) : readDeltaWithDeltaRs(`${tenant.root}/gold/${table}`);
  return rows.sort((a, b) => String(a.id).localeCompare(String(b.id)) || String(a._scd_effective_from).localeCompare(String(b._scd_effective_from)));
}
