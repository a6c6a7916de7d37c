import { randomUUID } from 'node:crypto';
import { loadPlatform } from '../core/config/load.js';
import { localPlatformDefaults, type PlatformConfig } from '../core/config/platform.js';
import { own } from '../core/config/own.js';
import { ConfigError, DataError, ExitCode, InputMissingError, type LakehouseError, UsageError, asLakehouseError } from '../core/errors.js';
import { createLogger, type Logger } from '../core/logger.js';
import { LAYERS, NAME_PATTERN, type TableName, displayTable, layerNamespace, tableParts } from '../core/naming.js';
import { registerConnectionSecrets } from '../core/secrets.js';
import { type StatusDocument, type StatusTargets, writeStatus } from '../core/status.js';
import { tenantContext, type TenantContext } from '../core/tenant.js';
import type { SparkConnectClient } from '../spark/client.js';
import { describeRemote } from '../spark/connection.js';
import { VERSION } from '../version.js';
import { loadJob } from './load-job.js';
import { resolveRemote } from './remote.js';

/**
 * The run ledger (docs/history.md): every commit of a lakehouse-jobs run carries its run id,
 * attempt, template, job, tenant and config hash (src/runner/run.ts `commitMetadata`), so a table's
 * own history says which runs wrote it. `history` lists them; `rollback` moves each table a run
 * wrote back to the commit before the run's first one (Iceberg `rollback_to_snapshot`, Delta
 * `RESTORE`), on a session bound to the tenant like a run's: the server's policy judges each call.
 */

export interface LedgerRequest {
  command: 'history' | 'rollback';
  /** A job config: its tenant (and for rollback, the tables it writes). */
  config?: string;
  job?: string;
  envFile?: string;
  tenant?: string;
  remote?: string;
  env: Record<string, string | undefined>;
  logLevel: string;
  logSink?: (line: string) => void;
  statusFile?: string;
  targets?: Partial<StatusTargets>;
  /** This invocation's own run id (stamped on the commits a rollback makes). */
  runId?: string;
  /** history: the table, as a job config or a status document names it. */
  table?: string;
  /** rollback: the run to undo. */
  undo?: string;
  /** rollback: the tables to search, instead of those the job config writes. */
  tables?: readonly string[];
  /** The tables the job config writes (computed by the caller from validate's listing). */
  jobTables?: (config: LoadedForLedger) => string[];
  cascade?: boolean;
  dryRun?: boolean;
  /** What the caller shows instead of the document on stdout (a person's table). */
  view?: (doc: StatusDocument) => void;
}

/** What a ledger command needs of a loaded job config. */
export type LoadedForLedger = Awaited<ReturnType<typeof loadJob>>;

/** One commit of a table, as its history records it. */
export interface LedgerCommit {
  /** Iceberg snapshot id or Delta version. */
  id: string;
  parent?: string;
  at: string;
  operation: string;
  /** In the table's current state's lineage: not undone by a rollback. */
  current: boolean;
  writer: 'lakehouse-jobs' | 'other';
  runId?: string;
  attempt?: string;
  template?: string;
  job?: string;
  tenant?: string;
  configHash?: string;
  logicalDate?: string;
  /** A commit a rollback made (Delta RESTORE): the run it undid. */
  rollbackOf?: string;
  /** Incremental read positions the commit recorded, by source table. */
  read?: Record<string, string>;
  counts: Record<string, number>;
}

export interface TableRef {
  name: TableName;
  format: 'iceberg' | 'delta';
}

/** Per table, what a rollback did (or, in a dry run, would do). */
export interface RollbackTable {
  table: string;
  format: 'iceberg' | 'delta';
  /** The current commit before the rollback. */
  from?: string;
  /** The commit whose state the table returns to. */
  to?: string;
  mode: 'rollback_to_snapshot' | 'restore' | 'none';
  state: 'rolled-back' | 'would-roll-back' | 'already-rolled-back' | 'not-written' | 'blocked' | 'not-reached' | 'failed';
  /** The commits undone: the run's and, with --cascade, the later ones. */
  undoes: { id: string; runId?: string; operation: string }[];
  /** Delta: the version RESTORE committed. */
  committed?: string;
}

type Session = { client: SparkConnectClient; remote: string; serverVersion: string };

const ROLLBACK_MODE = { iceberg: 'rollback_to_snapshot', delta: 'restore' } as const;

/**
 * A commit that only brings back a state the table's lineage already holds (a rollback's, or any
 * Delta RESTORE: its state is the version it names): it builds nothing on the commits before it.
 */
const restores = (c: LedgerCommit): boolean => c.rollbackOf !== undefined || c.operation === 'RESTORE';

/** `history` and `rollback`: one status document and an exit code from docs/contracts.md, whatever happened. */
export async function ledgerCommand(req: LedgerRequest): Promise<number> {
  const startedAt = new Date();
  const runId = req.runId ?? `${req.command}__${startedAt.toISOString()}__${randomUUID().slice(0, 8)}`;
  for (const remote of [req.remote, req.env.SPARK_REMOTE]) registerConnectionSecrets(remote);
  const logger = createLogger(req.logLevel, { runId, command: req.command }, req.logSink);
  let session: Session | undefined;
  const doc: Partial<StatusDocument> & Record<string, unknown> = {};
  let error: LakehouseError | undefined;
  let tenantId: string | undefined;
  try {
    const scope = await ledgerScope(req, runId);
    tenantId = scope.tenant.id;
    if (req.command === 'history') {
      if (!req.table) throw new UsageError('history: name the table (lakehouse-jobs history <table>)');
      const table = resolveTable(req.table, scope.tenant, scope.platform);
      session = await open(req, scope, logger);
      const commits = await readCommits(session.client, table);
      doc.outputs = [{ table: displayTable(table.name), format: table.format, ...(commits[0] ? { snapshotId: currentOf(commits) } : {}), committed: false }];
      doc.history = { table: displayTable(table.name), format: table.format, commits };
    } else {
      if (!req.undo) throw new UsageError('rollback: --run-id <id> names the run to roll back');
      const names = req.tables?.length ? req.tables : scope.loaded && req.jobTables ? req.jobTables(scope.loaded) : [];
      if (!names.length) throw new UsageError('rollback: name the tables to search (--table, repeatable) or the job config that writes them (--config)');
      const tables = [...new Map(names.map((n) => resolveTable(n, scope.tenant, scope.platform)).map((t) => [displayTable(t.name), t])).values()];
      session = await open(req, scope, logger);
      const result = await rollback(session.client, tables, req, runId, scope.tenant.id, logger);
      doc.rollback = result.report;
      doc.outputs = result.report.tables
        .filter((t) => t.state !== 'not-written')
        .map((t) => ({
          table: t.table,
          format: t.format,
          ...((t.committed ?? (t.state === 'rolled-back' ? t.to : t.from))
            ? { snapshotId: (t.committed ?? (t.state === 'rolled-back' ? t.to : t.from))! }
            : {}),
          committed: t.committed !== undefined,
        }));
      error = result.error;
    }
  } catch (e) {
    error = asLakehouseError(e);
  } finally {
    if (session) {
      await session.client.releaseSession().catch(() => undefined);
      session.client.close();
    }
  }
  if (error) logger.error({ error: { type: error.name, code: error.code, exitCode: error.exitCode } }, error.message);
  const finishedAt = new Date();
  const exitCode = error ? error.exitCode : ExitCode.succeeded;
  const status: StatusDocument = {
    schema: 'lakehouse-jobs/status/v1',
    status: error ? 'failed' : 'succeeded',
    exitCode,
    command: req.command,
    job: {},
    ...(tenantId ? { tenant: tenantId } : {}),
    runId,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - startedAt.getTime(),
    ...(session ? { spark: { remote: session.remote, sessionId: session.client.sessionId, serverVersion: session.serverVersion, operationIds: [] } } : {}),
    outputs: doc.outputs ?? [],
    metrics: { rowsRead: 0, rowsWritten: 0 },
    ...(doc.history ? { history: doc.history } : {}),
    ...(doc.rollback ? { rollback: doc.rollback } : {}),
    ...(error ? { error: error.report() } : {}),
  } as StatusDocument;
  writeStatus(status, {
    ...(req.statusFile ? { statusFile: req.statusFile } : {}),
    ...req.targets,
    ...(req.view ? { stdout: () => req.view!(status) } : {}),
  });
  logger.info({ status: status.status, exitCode }, `finished: ${status.status}`);
  return exitCode;
}

interface Scope {
  platform: PlatformConfig;
  tenant: TenantContext;
  loaded?: LoadedForLedger;
}

/**
 * Whose tables: the job config's tenant (bound by --tenant where given), or --tenant alone with a
 * platform config that gives it a storage root.
 */
async function ledgerScope(req: LedgerRequest, runId: string): Promise<Scope> {
  if (req.config) {
    const loaded = await loadJob({
      configFile: req.config,
      ...(req.envFile ? { envFile: req.envFile } : {}),
      ...(req.tenant !== undefined ? { tenant: req.tenant } : {}),
      ...(req.job ? { job: req.job } : {}),
      overrides: [],
      env: req.env,
      runId,
    });
    return { platform: loaded.platform, tenant: loaded.tenant, loaded };
  }
  const issues: Parameters<typeof loadPlatform>[2] = [];
  const platform = req.envFile ? await loadPlatform(req.envFile, req.env, issues, []) : localPlatformDefaults;
  if (issues.length) throw new ConfigError(issues);
  const id = req.tenant;
  if (id === undefined) throw new UsageError(`${req.command}: name the tenant (--tenant <id>) or a job config of it (--config <file>)`);
  if (!NAME_PATTERN.test(id)) throw new UsageError(`--tenant ${JSON.stringify(id)} is not a tenant id (${NAME_PATTERN.source})`);
  const root = platform.tenants ? own(platform.tenants, id)?.['storage-roots'][0] : undefined;
  if (root === undefined)
    throw new UsageError(
      `--tenant ${id}: the platform config lists no storage root of that tenant; pass --env <platform.conf> that does, or --config <its job config>`,
    );
  return { platform, tenant: tenantContext(id, root) };
}

/**
 * A table as a job config names it (`<layer>.<table>`, in the platform's default catalog) or as a
 * status document does (`<catalog>.<namespace>.<table>`), resolved by the tenancy rules: a table of
 * another tenant's namespace is refused (78, TENANT_POLICY) before anything is sent.
 */
export function resolveTable(text: string, tenant: TenantContext, platform: PlatformConfig): TableRef {
  const parts = text.split('.');
  const catalogs = Object.entries(platform.catalogs);
  let catalog: string | undefined;
  let namespace: string;
  let table: string;
  if (parts.length === 3) [catalog, namespace, table] = parts as [string, string, string];
  else if (parts.length === 2) {
    const [first, second] = parts as [string, string];
    catalog = catalogs.find(([, c]) => c.default)?.[0] ?? (catalogs.length === 1 ? catalogs[0]![0] : undefined);
    namespace = (LAYERS as readonly string[]).includes(first) ? layerNamespace(tenant.id, first as (typeof LAYERS)[number]) : first;
    table = second;
    if (catalog === undefined) throw new UsageError(`table ${text}: the platform config has no default catalog; name it as <catalog>.<namespace>.<table>`);
  } else throw new UsageError(`table ${JSON.stringify(text)}: name it as <layer>.<table> (silver.orders) or <catalog>.<namespace>.<table>`);
  const c = own(platform.catalogs, catalog);
  if (!c) throw new UsageError(`table ${text}: ${catalog} is not a catalog of the platform config (${catalogs.map(([n]) => n).join(', ')})`);
  if (!NAME_PATTERN.test(table) || !NAME_PATTERN.test(namespace)) throw new UsageError(`table ${JSON.stringify(text)} is not a table name`);
  const mine = LAYERS.map((l) => layerNamespace(tenant.id, l));
  if (!mine.includes(namespace))
    throw new ConfigError(`table ${text} is not in one of tenant ${tenant.id}'s namespaces (${mine.join(', ')}): another tenant's tables are out of reach`, {
      code: 'TENANT_POLICY',
    });
  return { name: { catalog, namespace, table }, format: c.format === 'delta' ? 'delta' : 'iceberg' };
}

async function open(req: LedgerRequest, scope: Scope, logger: Logger): Promise<Session> {
  const [{ SparkConnectClient }, { bindTenant }] = await Promise.all([import('../spark/client.js'), import('./tenant-logic.js')]);
  const spec = await resolveRemote({ ...(req.remote ? { option: req.remote } : {}), env: req.env, platform: scope.platform, tenant: scope.tenant.id }, logger);
  const client = SparkConnectClient.connect(spec, { userAgent: `lakehouse-jobs/${VERSION}`, logger });
  const serverVersion = await client.analyze.sparkVersion();
  // As a run's: the server judges every statement against the tenant's namespaces and roots.
  await bindTenant(client, scope.platform, scope.tenant);
  const settings: Record<string, string> = {};
  for (const [name, c] of Object.entries(scope.platform.catalogs)) if (c.format === 'iceberg') settings[`spark.sql.catalog.${name}.cache-enabled`] = 'false';
  if (Object.keys(settings).length) await client.config.set(settings);
  return { client, remote: describeRemote(spec), serverVersion };
}

// ---- reading a table's commits ----

async function rowsOf(client: SparkConnectClient, query: import('../spark/plan/query.js').Query): Promise<Record<string, unknown>[]> {
  const [{ compileRelationPlan }, { rows }, { tenantPolicyError }] = await Promise.all([
    import('../spark/plan/compile.js'),
    import('../spark/arrow.js'),
    import('../spark/policy/index.js'),
  ]);
  try {
    const { table } = await client.execute(compileRelationPlan(query.rel, { reveal: false, bound: new Map() }));
    return table ? rows(table) : [];
  } catch (e) {
    throw tenantPolicyError(e) ?? e;
  }
}

/** The table's commits, newest first, each marked whether the current state is built on it. */
export async function readCommits(client: SparkConnectClient, t: TableRef): Promise<LedgerCommit[]> {
  const [{ Query }, { sql }, { errorClassOf }, ex] = await Promise.all([
    import('../spark/plan/query.js'),
    import('../spark/plan/sql.js'),
    import('../spark/errors.js'),
    import('../spark/plan/expressions.js'),
  ]);
  const parts = tableParts(t.name);
  try {
    if (t.format === 'iceberg') {
      const snapshots = await rowsOf(
        client,
        Query.sql(
          sql`SELECT CAST(snapshot_id AS STRING) AS id, CAST(parent_id AS STRING) AS parent, CAST(unix_millis(committed_at) AS STRING) AS at, operation, to_json(summary) AS summary FROM ${sql.table([...parts, 'snapshots'])}`,
        ),
      );
      const [head] = await rowsOf(client, Query.sql(sql`SELECT CAST(snapshot_id AS STRING) AS head FROM ${sql.table([...parts, 'refs'])} WHERE name = 'main'`));
      const byId = new Map(snapshots.map((s) => [String(s.id), s]));
      const live = new Set<string>();
      for (let at = head?.head == null ? undefined : String(head.head); at !== undefined && !live.has(at);) {
        live.add(at);
        const p = byId.get(at)?.parent;
        at = p == null ? undefined : String(p);
      }
      return snapshots
        .map((s) => {
          const summary = JSON.parse(String(s.summary ?? '{}')) as Record<string, string>;
          const stamp: Record<string, string> = {};
          for (const [k, v] of Object.entries(summary)) if (k.startsWith('lakehouse-jobs.')) stamp[k.slice('lakehouse-jobs.'.length)] = v;
          const counts: Record<string, number> = {};
          for (const [k, name] of [
            ['added-records', 'addedRecords'],
            ['deleted-records', 'deletedRecords'],
            ['total-records', 'totalRecords'],
            ['added-data-files', 'addedDataFiles'],
            ['deleted-data-files', 'deletedDataFiles'],
            ['added-position-deletes', 'addedPositionDeletes'],
            ['added-equality-deletes', 'addedEqualityDeletes'],
          ] as const)
            if (summary[k] !== undefined) counts[name] = Number(summary[k]);
          return commitOf(
            String(s.id),
            s.parent == null ? undefined : String(s.parent),
            Number(s.at),
            String(s.operation),
            live.has(String(s.id)),
            stamp,
            counts,
          );
        })
        .sort((a, b) => b.at.localeCompare(a.at) || (BigInt(b.id) > BigInt(a.id) ? 1 : -1));
    }
    const { alias, col, fn } = ex;
    const history = await rowsOf(
      client,
      Query.sql(sql`DESCRIBE HISTORY ${sql.table(parts)}`).select(
        col('version'),
        alias(fn('unix_millis', col('timestamp')), 'at'),
        col('operation'),
        alias(fn('to_json', col('operationParameters')), 'params'),
        alias(fn('to_json', col('operationMetrics')), 'metrics'),
        col('userMetadata'),
      ),
    );
    const versions = history.map((h) => {
      const params = JSON.parse(String(h.params ?? '{}')) as Record<string, string>;
      return { v: Number(h.version), h, params };
    });
    const live = deltaLineage(versions.map((x) => ({ version: x.v, operation: String(x.h.operation), restoredTo: Number(x.params.version) })));
    const liveList = [...live].sort((a, b) => a - b);
    return versions
      .map(({ v, h }) => {
        let stamp: Record<string, string> = {};
        try {
          const m = JSON.parse(String(h.userMetadata ?? '')) as Record<string, Record<string, unknown>>;
          const lj = m['lakehouse-jobs'];
          if (lj && typeof lj === 'object') stamp = Object.fromEntries(Object.entries(lj).map(([k, x]) => [kebab(k), String(x)]));
        } catch {
          // userMetadata of another writer: not ours.
        }
        const counts: Record<string, number> = {};
        for (const [k, x] of Object.entries(JSON.parse(String(h.metrics ?? '{}')) as Record<string, string>)) if (/^-?\d+$/.test(x)) counts[k] = Number(x);
        const i = liveList.indexOf(v);
        const parent = live.has(v) ? (i > 0 ? String(liveList[i - 1]) : undefined) : v > 0 ? String(v - 1) : undefined;
        return commitOf(String(v), parent, Number(h.at), String(h.operation), live.has(v), stamp, counts);
      })
      .sort((a, b) => Number(b.id) - Number(a.id));
  } catch (e) {
    if (errorClassOf(e)?.startsWith('TABLE_OR_VIEW_NOT_FOUND')) throw new InputMissingError(`${displayTable(t.name)} does not exist`);
    throw e;
  }
}

/**
 * The versions a Delta table's current state is built on: walking back from the latest, a RESTORE
 * to version k continues at k (the versions in between are undone), any other commit at the one
 * before it.
 */
export function deltaLineage(versions: readonly { version: number; operation: string; restoredTo?: number }[]): Set<number> {
  const byVersion = new Map(versions.map((x) => [x.version, x]));
  const live = new Set<number>();
  for (let v = Math.max(-1, ...versions.map((x) => x.version)); v >= 0;) {
    live.add(v);
    const x = byVersion.get(v);
    const to = x?.operation === 'RESTORE' ? x.restoredTo : undefined;
    v = to !== undefined && Number.isInteger(to) && to < v ? to : v - 1;
  }
  return live;
}

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

function commitOf(
  id: string,
  parent: string | undefined,
  atMs: number,
  operation: string,
  current: boolean,
  stamp: Record<string, string>,
  counts: Record<string, number>,
): LedgerCommit {
  const read: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamp)) if (k.startsWith('read.')) read[k.slice(5)] = v;
  const s = (k: string) => (stamp[k] === undefined || stamp[k] === '' ? undefined : stamp[k]);
  const runId = s('run-id');
  return {
    id,
    ...(parent !== undefined ? { parent } : {}),
    at: new Date(atMs).toISOString(),
    operation,
    current,
    writer: runId ? 'lakehouse-jobs' : 'other',
    ...(runId ? { runId } : {}),
    ...(s('attempt') ? { attempt: s('attempt')! } : {}),
    ...(s('template') ? { template: s('template')! } : {}),
    ...(s('job') ? { job: s('job')! } : {}),
    ...(s('tenant') ? { tenant: s('tenant')! } : {}),
    ...(s('config-hash') ? { configHash: s('config-hash')! } : {}),
    ...(s('logical-date') ? { logicalDate: s('logical-date')! } : {}),
    ...(s('rollback-of') ? { rollbackOf: s('rollback-of')! } : {}),
    ...(Object.keys(read).length ? { read } : {}),
    counts,
  };
}

/** The table's current commit: the newest in its current lineage. */
const currentOf = (commits: readonly LedgerCommit[]): string | undefined => commits.find((c) => c.current)?.id;

// ---- rollback ----

interface Planned {
  ref: TableRef;
  row: RollbackTable;
  /** The newest commit of the undone runs: tables are restored newest first. */
  newest: string;
}

export interface RollbackReport {
  runId: string;
  cascade: boolean;
  dryRun: boolean;
  /** Every run undone: the one asked for and, with --cascade, those built on it. */
  runs: string[];
  tables: RollbackTable[];
  /** Commits after the run's that block it (without --cascade). */
  blockedBy: { table: string; id: string; runId?: string; operation: string; at: string }[];
}

/**
 * Plan over every table first (what each run wrote, what later commits build on it; with
 * --cascade, the runs behind those too, in every table), then restore table by table, the one
 * written last first. There is no transaction across tables: a failure stops there and reports
 * each table's state; the same command again finds the tables already restored and does the rest.
 */
async function rollback(
  client: SparkConnectClient,
  tables: TableRef[],
  req: LedgerRequest,
  runId: string,
  tenant: string,
  logger: Logger,
): Promise<{ report: RollbackReport; error?: LakehouseError }> {
  const undo = req.undo!;
  const commits = new Map<string, LedgerCommit[]>();
  for (const t of tables) {
    try {
      commits.set(displayTable(t.name), await readCommits(client, t));
    } catch (e) {
      // A table the job would write that does not exist yet: nothing of the run's in it.
      if (e instanceof InputMissingError) commits.set(displayTable(t.name), []);
      else throw e;
    }
  }
  const planned = planRollback(tables, commits, { undo, cascade: req.cascade === true, dryRun: req.dryRun === true });
  const { report, touched } = planned;
  if (planned.error || req.dryRun) return planned.error ? { report, error: planned.error } : { report };
  const [{ compileCommandPlan }, { sqlCommand }, { sql }, { tenantPolicyError }] = await Promise.all([
    import('../spark/plan/compile.js'),
    import('../spark/plan/query.js'),
    import('../spark/plan/sql.js'),
    import('../spark/policy/index.js'),
  ]);
  // The commits a rollback makes (Delta RESTORE) carry its own run id and the run it undid.
  await client.config.set({
    'spark.databricks.delta.commitInfo.userMetadata': JSON.stringify({ 'lakehouse-jobs': { runId, command: 'rollback', rollbackOf: undo, tenant } }),
  });
  for (const p of touched) {
    if (p.row.state === 'already-rolled-back') continue;
    const parts = tableParts(p.ref.name);
    const text =
      p.ref.format === 'iceberg'
        ? sql`CALL ${sql.qualified([p.ref.name.catalog, 'system', 'rollback_to_snapshot'])}(table => ${sql.touching(sql.quoted(sql`${sql.qualified([p.ref.name.namespace, p.ref.name.table])}`), { writes: [parts] })}, snapshot_id => ${sql.value(BigInt(p.row.to!))})`
        : sql`RESTORE TABLE ${sql.target(parts)} TO VERSION AS OF ${sql.value(Number(p.row.to))}`;
    try {
      await client.execute(compileCommandPlan(sqlCommand(text), { reveal: false }));
      p.row.state = 'rolled-back';
      if (p.ref.format === 'delta') p.row.committed = currentOf(await readCommits(client, p.ref));
      logger.info({ table: p.row.table, from: p.row.from, to: p.row.to, mode: p.row.mode }, `rolled back ${p.row.table}`);
    } catch (e) {
      p.row.state = 'failed';
      const cause = tenantPolicyError(e) ?? asLakehouseError(e);
      const error = Object.assign(cause, {
        message: `rolling back ${p.row.table} to ${p.row.to} failed (${cause.message}); ${touched.filter((x) => x.row.state === 'rolled-back').length} table(s) before it were rolled back, the rest not: run the same rollback again to finish`,
      });
      return { report, error };
    }
  }
  return { report };
}

/**
 * What a rollback of `undo` would do to each table, from the tables' commits alone: the state to
 * return to, what blocks it, or why nothing can be done. No I/O: the command and its unit tests
 * share it.
 */
export function planRollback(
  tables: readonly TableRef[],
  commits: ReadonlyMap<string, readonly LedgerCommit[]>,
  opts: { undo: string; cascade: boolean; dryRun: boolean },
): { report: RollbackReport; touched: Planned[]; error?: LakehouseError } {
  const undo = opts.undo;
  const runs = new Set([undo]);
  const chain = (name: string) => [...commits.get(name)!].filter((c) => c.current).reverse();
  const firstOf = (name: string) => chain(name).findIndex((c) => c.runId !== undefined && runs.has(c.runId));
  const laterOf = (name: string) => {
    const i = firstOf(name);
    return i < 0
      ? []
      : chain(name)
          .slice(i)
          .filter((c) => !(c.runId !== undefined && runs.has(c.runId)) && !restores(c));
  };
  // With --cascade, a run that committed on top of an undone one is undone too, in every table.
  for (let grew = opts.cascade === true; grew;) {
    grew = false;
    for (const t of tables)
      for (const c of laterOf(displayTable(t.name)))
        if (c.runId !== undefined && !runs.has(c.runId)) {
          runs.add(c.runId);
          grew = true;
        }
  }
  const blockedBy: RollbackReport['blockedBy'] = [];
  const planned: Planned[] = [];
  let created: string | undefined;
  for (const t of tables) {
    const name = displayTable(t.name);
    const all = commits.get(name)!;
    const live = chain(name);
    const i = firstOf(name);
    const from = currentOf(all);
    const base: RollbackTable = { table: name, format: t.format, ...(from ? { from } : {}), mode: 'none', state: 'not-written', undoes: [] };
    if (i < 0) {
      const undone = all.some((c) => c.runId !== undefined && runs.has(c.runId));
      planned.push({ ref: t, row: { ...base, state: undone ? 'already-rolled-back' : 'not-written' }, newest: '' });
      continue;
    }
    const later = laterOf(name);
    if (!opts.cascade)
      for (const c of later) blockedBy.push({ table: name, id: c.id, ...(c.runId ? { runId: c.runId } : {}), operation: c.operation, at: c.at });
    const target = i > 0 ? live[i - 1]! : undefined;
    if (!target) created ??= name;
    const undoes = live.slice(i).filter((c) => !restores(c));
    planned.push({
      ref: t,
      row: {
        ...base,
        ...(target ? { to: target.id } : {}),
        mode: ROLLBACK_MODE[t.format],
        state: later.length && !opts.cascade ? 'blocked' : opts.dryRun ? 'would-roll-back' : 'not-reached',
        undoes: undoes.map((c) => ({ id: c.id, ...(c.runId ? { runId: c.runId } : {}), operation: c.operation })),
      },
      newest: live
        .filter((c) => c.runId !== undefined && runs.has(c.runId))
        .map((c) => c.at)
        .sort()
        .at(-1)!,
    });
  }
  const report: RollbackReport = { runId: undo, cascade: opts.cascade === true, dryRun: opts.dryRun === true, runs: [...runs], tables: [], blockedBy };
  // Newest-written first: the table carrying a CDC merge's read position goes back before its tombstones.
  planned.sort((a, b) => b.newest.localeCompare(a.newest));
  report.tables = planned.map((p) => p.row);
  const touched = planned.filter((p) => p.row.state !== 'not-written');
  if (!touched.length)
    return {
      report,
      touched,
      error: new InputMissingError(
        `no commit of run ${undo} in ${tables.map((t) => displayTable(t.name)).join(', ')}: nothing that run wrote is there (history <table> lists the runs that wrote a table)`,
      ),
    };
  if (blockedBy.length) {
    const by = [...new Set(blockedBy.map((b) => `${b.table} ${b.runId ? `run ${b.runId}` : `a commit not made by lakehouse-jobs (${b.operation} ${b.id})`}`))];
    return {
      report,
      touched,
      error: new DataError(`run ${undo} cannot be rolled back alone: later commits build on it: ${by.join('; ')}`, {
        code: 'ROLLBACK_BLOCKED',
        hint: 'roll back those runs first, or pass --cascade to roll them back too',
      }),
    };
  }
  if (created)
    return {
      report,
      touched,
      error: new DataError(`run ${undo}'s first commit to ${created} is the table's first: there is no earlier state to go back to; nothing was rolled back`, {
        code: 'ROLLBACK_NO_EARLIER_STATE',
        hint: `drop ${created} to undo its creation, or roll back a later run`,
      }),
    };
  return { report, touched };
}
