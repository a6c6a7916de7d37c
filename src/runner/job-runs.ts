import type { LedgerConfig, PlatformConfig } from '../core/config/platform.js';
import { limitsSchema } from '../core/config/platform.js';
import { ExitCode, TransientError, asLakehouseError } from '../core/errors.js';
import { instantOfMillis } from '../core/instant.js';
import type { Logger } from '../core/logger.js';
import { type TableName, displayTable, tableParts } from '../core/naming.js';
import { type LedgerReport, type StatusDocument, statusLine } from '../core/status.js';
import { isUnderRoot } from '../core/tenant.js';
import type { Step } from '../jobs/template.js';
import { createNamespaceStep, tableProperties } from '../jobs/tables.js';
import { type Expr, alias, and, cast, col, eq, eqNullSafe, fn, lit } from '../spark/plan/expressions.js';
import { Query } from '../spark/plan/query.js';
import type { ConnectionSpec } from '../spark/connection.js';
import type { TenantBinding } from '../spark/policy/binding.js';
import { VERSION } from '../version.js';

/**
 * The run ledger's table (docs/history.md, "The job_runs table"): where the platform config has
 * `ledger`, every run that reached Spark appends its status document as one row, like dbt's
 * run_results and Lakeflow's event log. The append runs on a session of its own, bound to the
 * platform's ledger identity (the ledger's namespace and location, nothing else); the run's own
 * session stays bound to its tenant, which can neither read nor write the ledger.
 */

/** The binding's name for the ledger's session: no tenant id can be it (`[a-z][a-z0-9_]*`). */
export const LEDGER_IDENTITY = 'lakehouse-jobs:ledger';

/** How long the append may take in all (connecting, creating the table on first use, retrying a conflict). */
const LEDGER_TIMEOUT_MS = 120_000;
/** Attempts of the MERGE when another run's append committed first (it is idempotent: sending it again is safe). */
const CONFLICT_ATTEMPTS = 4;

/** The ledger's own Iceberg property, beside the templates' (the server's list holds it: TableProperties.java). */
export const LEDGER_ICEBERG_PROPERTIES: Readonly<Record<string, string>> = Object.freeze({ 'write.merge.isolation-level': 'snapshot' });

export const OUTPUTS_TYPE = 'array<struct<table:string,path:string,format:string,committed:boolean,snapshot_id:string>>';

export function ledgerTable(ledger: LedgerConfig): TableName {
  const [namespace, table] = ledger.table.split('.') as [string, string];
  return { catalog: ledger.catalog, namespace, table };
}

/** What the ledger's session may touch: its namespace and location only, no Kafka, the platform's limits. */
export function ledgerBinding(ledger: LedgerConfig): TenantBinding {
  const t = ledgerTable(ledger);
  return Object.freeze({
    tenant: LEDGER_IDENTITY,
    readNamespaces: Object.freeze([`${t.catalog}.${t.namespace}`]),
    writeNamespaces: Object.freeze([`${t.catalog}.${t.namespace}`]),
    readRoots: Object.freeze([ledger.location]),
    writeRoots: Object.freeze([ledger.location]),
    kafka: Object.freeze([]),
    limits: Object.freeze(limitsSchema.parse(undefined)),
  });
}

/** What a row says beyond the document itself: the attempt's nonce and the config's hash (commit stamps). */
export interface RunFacts {
  attempt: string | undefined;
  configHash: string;
}

/**
 * The row of one run, from its status document as the status file has it (scrubbed), so no column
 * can hold what the document does not show.
 */
export function ledgerRow(doc: StatusDocument, facts: RunFacts): Query {
  const d = JSON.parse(statusLine(doc)) as StatusDocument;
  const str = (v: string | undefined | null): Expr => cast(lit(v ?? null), 'string');
  const long = (v: number | undefined): Expr => cast(lit(v ?? null), 'bigint');
  const at = (iso: string): Expr => lit({ timestamp: instantOfMillis(Date.parse(iso)) });
  const job = d.job.template ? `${d.job.template}/v${d.job.schemaVersion ?? '?'}${d.job.name ? `/${d.job.name}` : ''}` : undefined;
  const outputs = d.outputs.map((o) =>
    fn(
      'named_struct',
      ...[
        ['table', str(o.table)],
        ['path', str(o.path)],
        ['format', str(o.format)],
        ['committed', cast(lit(o.committed ?? null), 'boolean')],
        ['snapshot_id', str(o.snapshotId)],
      ].flatMap(([name, value]) => [lit(name as string), value as Expr]),
    ),
  );
  const columns: [string, Expr][] = [
    ['run_id', str(d.runId)],
    ['attempt', str(facts.attempt)],
    ['job', str(job)],
    ['template', str(d.job.template)],
    ['schema_version', cast(lit(d.job.schemaVersion ?? null), 'int')],
    ['job_name', str(d.job.name)],
    ['tenant', str(d.tenant)],
    ['config_hash', str(facts.configHash)],
    ['command', str(d.command)],
    ['logical_date', str(d.logicalDate)],
    ['run_date', lit({ date: d.startedAt.slice(0, 10) })],
    ['started_at', at(d.startedAt)],
    ['ended_at', at(d.finishedAt)],
    ['duration_ms', long(d.durationMs)],
    ['exit_code', cast(lit(d.exitCode), 'int')],
    ['status', str(d.status)],
    ['error_code', str(d.error?.code)],
    ['rows_read', long(d.metrics.rowsRead)],
    ['rows_written', long(d.metrics.rowsWritten)],
    ['outputs', cast(fn('array', ...outputs), OUTPUTS_TYPE)],
    ['status_document', str(statusLine(doc))],
    ['runner_version', str(VERSION)],
  ];
  return Query.range(0n, 1n, 1n, 1).select(...columns.map(([name, e]) => alias(e, name)));
}

/**
 * MERGE the row unless the ledger holds its (run id, attempt): a repeated append adds nothing. The
 * attempt's day is a literal of the condition, so the MERGE reads that day's partition only, not the
 * whole ledger.
 */
export function appendStep(table: TableName, row: Query, runDate: string): Step {
  const source = 'run';
  const key = (c: string) => eqNullSafe(col(table.table, c), col(source, c));
  const day = eq(col(table.table, 'run_date'), lit({ date: runDate }));
  return {
    kind: 'command',
    id: 'ledger-append',
    title: `Append the run to ${displayTable(table)}`,
    command: row.as(source).mergeInto(tableParts(table), and(day, key('run_id'), key('attempt')), { whenNotMatched: [{ action: 'insertAll' }] }),
  };
}

/**
 * The table on first use, as every template creates one (a race of two first runs ends with both on
 * the winner's table). Iceberg's MERGE checks by default that no file was added under its condition
 * meanwhile, which every other run's append does: `snapshot` isolation checks only deletes, and the
 * ledger is only appended to.
 */
export function createSteps(ledger: LedgerConfig, format: 'iceberg' | 'delta', row: Query): Step[] {
  const table = ledgerTable(ledger);
  // Partitioned by the day a run started: the append and a query of recent days read those days only.
  const properties = { ...tableProperties(format, ledger.location), ...(format === 'iceberg' ? LEDGER_ICEBERG_PROPERTIES : {}) };
  return [
    createNamespaceStep(table),
    {
      kind: 'ensureTable',
      id: 'ledger-create',
      title: `Create ${displayTable(table)} at ${ledger.location} if missing`,
      table,
      location: ledger.location,
      configPath: 'ledger.table',
      create: row.limit(0).writeTo(tableParts(table), 'create', { provider: format, properties, partitionBy: [col('run_date')] }),
    },
  ];
}

export interface AppendRequest {
  spec: ConnectionSpec;
  platform: PlatformConfig;
  ledger: LedgerConfig;
  doc: StatusDocument;
  facts: RunFacts;
  /** The run's tenant roots: a ledger under one of them would be the tenant's to read (refused). */
  tenantRoots: readonly string[];
  /** Settings of the ledger's session: the run's commit stamps, fresh Iceberg reads. */
  settings: Record<string, string>;
  tag: string;
  logger: Logger;
}

/**
 * Append the run's document; never throws. A failure is the report's `error` and a warning in the
 * log: the run's exit code and status file stay what the run made them.
 */
export async function appendToLedger(req: AppendRequest): Promise<LedgerReport> {
  const table = ledgerTable(req.ledger);
  const report: LedgerReport = { table: displayTable(table), written: false };
  const catalog = Object.hasOwn(req.platform.catalogs, req.ledger.catalog) ? req.platform.catalogs[req.ledger.catalog] : undefined;
  if (!catalog) return failed(report, req.logger, 'LEDGER_INVALID', `ledger.catalog: "${req.ledger.catalog}" is not a catalog of the platform config`);
  // A platform config without `tenants` takes the job config's storage root: checked here, per run.
  if (req.tenantRoots.some((root) => isUnderRoot(req.ledger.location, [root]) || isUnderRoot(root, [req.ledger.location])))
    return failed(
      report,
      req.logger,
      'LEDGER_INVALID',
      `ledger.location overlaps the tenant's storage roots: the ledger is not written where a tenant can read it`,
    );
  try {
    await append(req, table, catalog.format);
    req.logger.info({ table: report.table }, 'run appended to the ledger');
    return { ...report, written: true };
  } catch (e) {
    const error = asLakehouseError(e);
    return failed(report, req.logger, error.code, error.message.split('\n')[0]!);
  }
}

/** The append itself, on a session of its own: throws what failed. */
async function append(req: AppendRequest, table: TableName, format: 'iceberg' | 'delta'): Promise<void> {
  const [{ SparkConnectClient }, { executePlan }, { compileBindTenantCommand }] = await Promise.all([
    import('../spark/client.js'),
    import('./executor.js'),
    import('../spark/plan/compile.js'),
  ]);
  // A session id the remote may name is the run's: the ledger's session is another.
  const { sessionId: _run, ...spec } = req.spec as ConnectionSpec & { sessionId?: string };
  // Past its time the append gives up as what it is, a timeout (the executor calls every abort a cancellation).
  const timeout = new TransientError(`the append took longer than ${LEDGER_TIMEOUT_MS / 1000} s`, { code: 'LEDGER_TIMEOUT' });
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(timeout), LEDGER_TIMEOUT_MS);
  const signal = deadline.signal;
  const client = SparkConnectClient.connect(spec as ConnectionSpec, {
    userAgent: `lakehouse-jobs/${VERSION}`,
    logger: req.logger,
    signal,
    retryBudgetMs: 20_000,
  });
  const row = ledgerRow(req.doc, req.facts);
  const runDate = req.doc.startedAt.slice(0, 10);
  const logger = req.logger.child({ ledger: displayTable(table) });
  const run = (steps: Step[]) => executePlan({ steps }, { session: client, logger, signal, tags: [req.tag], catalogs: [req.ledger.catalog] });
  try {
    await client.execute(compileBindTenantCommand(ledgerBinding(req.ledger)));
    await client.config.set(req.settings);
    let created = false;
    for (let attempt = 1; ; attempt++) {
      try {
        // Once the table exists, this is the one operation a run adds: the MERGE.
        await run([appendStep(table, row, runDate)]);
        return;
      } catch (e) {
        const error = asLakehouseError(e);
        if (error.code === 'INPUT_MISSING' && !created) {
          await run(createSteps(req.ledger, format, row));
          created = true;
        } else if (error.exitCode === ExitCode.transient && attempt < CONFLICT_ATTEMPTS)
          logger.info({ attempt, code: error.code }, 'the ledger append conflicted with another run: sending it again');
        else throw e;
      }
    }
  } catch (e) {
    throw signal.aborted ? timeout : e;
  } finally {
    clearTimeout(timer);
    try {
      await client.releaseSession();
    } catch {
      // The server ends an idle session by itself; the append's outcome is what counts.
    } finally {
      client.close();
    }
  }
}

function failed(report: LedgerReport, logger: Logger, code: string, message: string): LedgerReport {
  logger.warn({ table: report.table, code }, `the run ledger was not written: ${message}`);
  return { ...report, written: false, error: { code, message } };
}
