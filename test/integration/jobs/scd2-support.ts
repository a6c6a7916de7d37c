import { join } from 'node:path';
import type { Step } from '../../../src/jobs/template.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { runInProcess } from '../../support/in-process.js';
import { readDeltaWithDeltaRs, readIcebergWithPyIceberg } from '../../support/stack.js';
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

/** Run one load in process (the shared in-process runner: a session bound to the tenant, its settings, stamps and tags). */
export async function load(
  _client: SparkConnectClient,
  tenant: { id: string; root: string },
  config: string,
  opts: { set?: string[]; runId?: string; logicalDate?: string; beforeStep?: (step: Step) => Promise<void> } = {},
): Promise<LoadResult> {
  const dir = tempFiles({ 'job.conf': config, 'platform.conf': platformConf(tenant) });
  const o = await runInProcess(
    {
      configFile: join(dir, 'job.conf'),
      envFile: join(dir, 'platform.conf'),
      overrides: opts.set ?? [],
      env: {},
      runId: opts.runId ?? 'it-scd2',
      ...(opts.logicalDate ? { logicalDate: opts.logicalDate } : {}),
    },
    opts.beforeStep,
  );
  if (o.error) return { code: o.code, message: o.error.message, outputs: [] };
  return { code: o.report.skipped !== undefined ? 99 : 0, outputs: o.report.outputs as unknown as Record<string, unknown>[] };
}

/** The dimension's rows as a second engine reads them (PyIceberg or delta-rs), sorted by key and start. */
export function readDimension(tenant: { id: string; root: string }, format: Format, table: string): Record<string, unknown>[] {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_gold`, table) : readDeltaWithDeltaRs(`${tenant.root}/gold/${table}`);
  return rows.sort((a, b) => String(a.id).localeCompare(String(b.id)) || String(a._scd_effective_from).localeCompare(String(b._scd_effective_from)));
}
