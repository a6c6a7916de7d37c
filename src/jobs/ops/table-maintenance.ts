import { z } from 'zod';
import { RETENTION_FLOOR_HOURS } from '../../core/config/platform.js';
import { catalogName, columnName, name } from '../../core/config/validate.js';
import { ConfigError, type ConfigIssue } from '../../core/errors.js';
import { type Instant, addHours } from '../../core/instant.js';
import { LAYERS, type TableName, displayTable, sameLocation, tableParts } from '../../core/naming.js';
import { alias, and, cast, coalesce, col, desc, fn, gt, lit, not, or, over } from '../../spark/plan/expressions.js';
import { Query, sqlCommand } from '../../spark/plan/query.js';
import { type SqlText, sql } from '../../spark/plan/sql.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { eachTableOnce, tableCatalog } from '../tables.js';
import type { CatalogRef, Facts, JobContext, JobPlan, Step } from '../template.js';
import { type RowsStep, queryStep } from '../steps.js';

/**
 * table-maintenance: compact, rewrite manifests, expire snapshots and remove orphan files of a
 * tenant's Iceberg tables, OPTIMIZE (ZORDER BY) and VACUUM its Delta tables, by a per-table policy.
 *
 * Safety, because every maintenance action deletes or replaces files other jobs use:
 * - tables are named by layer and name only, resolved to `<catalog>.<tenant>_<layer>.<table>`, and
 *   must sit at `<storage-root>/<layer>/<table>`: a tenant can only ever maintain its own tables;
 * - nothing younger than the platform's retention floor (`maintenance.retention-floor-hours`) is
 *   deleted: a running job (a cdc-silver-merge) reads files and writes files its commit does not
 *   reference yet; expiring keeps the newest `retain-last` snapshots too;
 * - compaction and OPTIMIZE rewrite files, never rows: tombstones and every row stay as they were,
 *   and a conflicting concurrent commit makes one side fail with 75 (retry), never lose a commit;
 * - the statements are built from validated identifiers (quoted) and validated numbers only: no
 *   text from the config reaches Spark as SQL (Iceberg's procedures take literal arguments only).
 */

const TEMPLATE = 'table-maintenance';
const MAX_HOURS = 87_600;
/** Iceberg refuses `older_than` under 24 hours for orphan files (unless the server runs with spark.testing). */
const ORPHAN_MIN_HOURS = 24;
/** Delta's own VACUUM check; below it the run turns the session's check off (the floor still holds). */
const DELTA_RETENTION_CHECK_HOURS = 168;
const DELTA_RETENTION_CHECK = 'spark.databricks.delta.retentionDurationCheck.enabled';

// ---------------------------------------------------------------------------------------------
// Config schema

const sortField = z
  .union([
    columnName(),
    z
      .object({
        column: columnName().describe('the column sorted by'),
        direction: z.enum(['asc', 'desc']).default('asc').describe('asc (default) or desc'),
        nulls: z.enum(['first', 'last']).optional().describe("where NULLs sort: first or last (default: Iceberg's default for the direction)"),
      })
      .strict(),
  ])
  .transform((f) => (typeof f === 'string' ? { column: f, direction: 'asc' as const, nulls: undefined } : f));

const duplicates = (columns: string[], ctx: z.RefinementCtx, key: string) =>
  columns.forEach((c, i) => {
    if (columns.indexOf(c) !== i) ctx.addIssue({ code: 'custom', path: [key, i], message: `"${c}" appears twice` });
  });

const compact = z
  .object({
    strategy: z.enum(['binpack', 'sort', 'zorder']).default('binpack').describe('binpack (default), sort (Iceberg: by sort-by) or zorder (by zorder-by)'),
    'sort-by': z
      .array(sortField)
      .min(1)
      .optional()
      .describe('Iceberg sort strategy: columns, each a name or { column, direction = asc|desc, nulls = first|last }'),
    'zorder-by': z.array(columnName()).min(1).optional().describe('zorder strategy: the columns (Delta OPTIMIZE ZORDER BY, Iceberg zorder)'),
    'target-file-size-mb': z.number().int().min(1).max(16_384).optional().describe('Iceberg: the size of the files written'),
    'min-input-files': z.number().int().min(1).max(100_000).optional().describe('Iceberg: rewrite a group only when it has at least this many files'),
    'rewrite-all': z.boolean().optional().describe('Iceberg: rewrite every file, whatever its size'),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.strategy === 'sort' && !c['sort-by']) ctx.addIssue({ code: 'custom', path: ['sort-by'], message: 'is required with strategy = sort' });
    if (c.strategy === 'zorder' && !c['zorder-by']) ctx.addIssue({ code: 'custom', path: ['zorder-by'], message: 'is required with strategy = zorder' });
    if (c.strategy !== 'sort' && c['sort-by']) ctx.addIssue({ code: 'custom', path: ['sort-by'], message: `needs strategy = sort (it is ${c.strategy})` });
    if (c.strategy !== 'zorder' && c['zorder-by'])
      ctx.addIssue({ code: 'custom', path: ['zorder-by'], message: `needs strategy = zorder (it is ${c.strategy})` });
    duplicates(
      (c['sort-by'] ?? []).map((f) => f.column),
      ctx,
      'sort-by',
    );
    duplicates(c['zorder-by'] ?? [], ctx, 'zorder-by');
  });

const hours = (min: number, why: string) =>
  z.number().int().min(min, `must be at least ${min} hours (${why})`).max(MAX_HOURS, `must be at most ${MAX_HOURS} hours`);

const tableSpec = z
  .object({
    layer: z.enum(LAYERS).describe("the table's layer: the table is <catalog>.<tenant>_<layer>.<table> at <storage-root>/<layer>/<table>"),
    table: name().describe("the table's name in that layer"),
    catalog: catalogName().optional().describe("the platform's catalog (default: its default catalog)"),
    format: z.enum(['iceberg', 'delta']).optional().describe("checked against the catalog's format"),
    compact: compact.optional().describe('Iceberg rewrite_data_files, Delta OPTIMIZE'),
    'rewrite-manifests': z.boolean().default(false).describe('Iceberg rewrite_manifests'),
    'expire-snapshots': z
      .object({
        'older-than-hours': hours(0, 'a duration').describe(
          "expire snapshots older than this many hours (at least the platform's retention floor, maintenance.retention-floor-hours)",
        ),
        'retain-last': z.number().int().min(1).max(10_000).default(5).describe('the newest snapshots always kept, however old'),
      })
      .strict()
      .optional()
      .describe('Iceberg expire_snapshots: snapshots older than this (and not among the last retain-last) and the files only they reference'),
    'remove-orphan-files': z
      .object({
        'older-than-hours': hours(ORPHAN_MIN_HOURS, "Iceberg's own limit: a younger file may belong to a commit in progress").describe(
          `remove unreferenced files older than this many hours (at least ${ORPHAN_MIN_HOURS} and the platform's retention floor)`,
        ),
      })
      .strict()
      .optional()
      .describe('Iceberg remove_orphan_files: files under the table location no snapshot references, older than this'),
    vacuum: z
      .object({
        'retain-hours': hours(0, 'a duration').describe(
          "VACUUM files removed longer ago than this many hours (at least the platform's retention floor, maintenance.retention-floor-hours)",
        ),
      })
      .strict()
      .optional()
      .describe('Delta VACUUM: files the table no longer references, removed longer ago than this'),
  })
  .strict()
  .refine(
    (t) => t.compact || t['rewrite-manifests'] || t['expire-snapshots'] || t['remove-orphan-files'] || t.vacuum,
    'names no maintenance action (compact, rewrite-manifests, expire-snapshots, remove-orphan-files, vacuum)',
  );

type TableSpec = z.infer<typeof tableSpec>;

const v1 = defineVersion(1, {
  sections: {
    'dry-run': z
      .boolean()
      .default(false)
      .describe('measure and list what would be done (orphan files, files VACUUM would delete, snapshots past the retention) and change nothing'),
    tables: z.array(tableSpec).min(1).max(50).describe('the tables to maintain, 1 to 50, each with its own policy; a table at most once'),
  },
  refine: (c, ctx) => eachTableOnce(c.tables, ctx, 'maintains'),
});

export type TableMaintenanceSpec = SpecOf<typeof v1.sections>;

// ---------------------------------------------------------------------------------------------
// The plan

interface Target {
  readonly path: string;
  readonly id: string;
  readonly spec: TableSpec;
  readonly catalog: CatalogRef;
  readonly table: TableName;
  readonly location: string;
}

/**
 * The table argument of an Iceberg procedure: `namespace`.`table` as a string, resolved inside the
 * procedure's catalog. What the procedure does to the table is the caller's `access`.
 */
function procedureTable(t: TableName, access: 'reads' | 'writes'): SqlText {
  return sql.touching(sql.quoted(sql`${sql.qualified([t.namespace, t.table])}`), { [access]: [tableParts(t)] });
}

/** `CALL <catalog>.system.<name>(table => …, <args>)`. */
function procedure(t: TableName, name: string, args: SqlText[], access: 'reads' | 'writes' = 'writes'): SqlText {
  return sql`CALL ${sql.qualified([t.catalog, 'system', name])}(${sql.join([sql`table => ${procedureTable(t, access)}`, ...args], sql`, `)})`;
}

/** The instant `hours` before the run's clock (Iceberg's procedures take literal arguments only). */
const cutoff = (now: Instant, hours: number): Instant => addHours(now, -hours);

/** Format checks and the retention floor: what only the platform and the catalog tell. */
function policyIssues(t: Target, floor: number): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const s = t.spec;
  const issue = (key: string, message: string) => issues.push({ path: `${t.path}.${key}`, message });
  const retention = (key: string, value: number) => {
    if (value < floor)
      issue(
        key,
        `is ${value} hours, below the platform's retention floor of ${floor} hours (maintenance.retention-floor-hours): files and snapshots that young may still be used by running jobs`,
      );
  };
  if (t.catalog.format === 'iceberg') {
    if (s.vacuum) issue('vacuum', 'is for Delta tables; an Iceberg table uses expire-snapshots and remove-orphan-files');
  } else {
    const only = 'is for Iceberg tables; a Delta table uses compact (OPTIMIZE) and vacuum';
    if (s['rewrite-manifests']) issue('rewrite-manifests', only);
    if (s['expire-snapshots']) issue('expire-snapshots', only);
    if (s['remove-orphan-files']) issue('remove-orphan-files', only);
    if (s.compact?.strategy === 'sort') issue('compact.strategy', 'sort is for Iceberg tables; Delta OPTIMIZE compacts (binpack) or clusters by zorder');
    for (const key of ['target-file-size-mb', 'min-input-files', 'rewrite-all'] as const)
      if (s.compact?.[key] !== undefined)
        issue(`compact.${key}`, "is for Iceberg tables; Delta's OPTIMIZE takes its file sizes from the platform's session settings");
  }
  if (s['expire-snapshots']) retention('expire-snapshots.older-than-hours', s['expire-snapshots']['older-than-hours']);
  if (s['remove-orphan-files']) retention('remove-orphan-files.older-than-hours', s['remove-orphan-files']['older-than-hours']);
  if (s.vacuum) retention('vacuum.retain-hours', s.vacuum['retain-hours']);
  return issues;
}

function plan(ctx: JobContext, spec: TableMaintenanceSpec): JobPlan {
  const floor = ctx.retentionFloorHours ?? RETENTION_FLOOR_HOURS;
  const dryRun = spec['dry-run'];
  // The cut-offs are fixed from the run's clock: `plan` shows the very timestamps a run sends.
  const now = ctx.clock;
  const issues: ConfigIssue[] = [];
  const targets: Target[] = [];
  spec.tables.forEach((s, i) => {
    const path = `tables[${i}]`;
    let catalog: CatalogRef;
    try {
      catalog = tableCatalog(ctx, s.catalog, s.format, path);
    } catch (e) {
      if (e instanceof ConfigError) return void issues.push(...e.issues);
      throw e;
    }
    const t: Target = {
      path,
      id: `${i}`,
      spec: s,
      catalog,
      table: ctx.tenant.table(catalog.name, s.layer, s.table),
      location: ctx.tenant.location(s.layer, s.table),
    };
    issues.push(...policyIssues(t, floor));
    targets.push(t);
  });
  if (issues.length) throw new ConfigError(issues);

  // Every table is inspected and measured before any is changed: a refusal leaves all of them as they were.
  const before = targets.map((t) => measureStep(t, 'before', now));
  const steps: Step[] = [
    ...targets.map(inspectStep),
    ...targets.flatMap((t) => (t.catalog.format === 'iceberg' && t.spec['expire-snapshots'] ? [foreignFilesStep(t)] : [])),
    ...before,
    ...targets.flatMap((t) => (t.catalog.format === 'iceberg' ? icebergActions(t, now, dryRun) : deltaActions(t, dryRun))),
    ...(dryRun ? [] : targets.map((t, i) => measureStep(t, 'after', now, before[i]))),
  ];
  const vacuumBelowCheck = targets.some((t) => t.spec.vacuum && t.spec.vacuum['retain-hours'] < DELTA_RETENTION_CHECK_HOURS);
  // The platform's floor is the check that holds; Delta's fixed 7-day check would refuse a shorter retention the platform allows.
  return { steps, ...(vacuumBelowCheck ? { sessionConf: { [DELTA_RETENTION_CHECK]: 'false' } } : {}) };
}

/**
 * The table exists, at the tenant's layout location, in the expected format, with the columns the
 * compaction sorts by: otherwise the run stops (78 at the table's config path) before anything is
 * changed. A table that does not exist stops it with 66.
 */
function inspectStep(t: Target): Step {
  const name = displayTable(t.table);
  return queryStep({
    id: `inspect-${t.id}`,
    title: `Check that ${name} is the tenant's ${t.catalog.format} table at ${t.location}`,
    query: Query.sql(sql`DESCRIBE TABLE EXTENDED ${sql.table(tableParts(t.table))}`),
    columns: ['col_name', 'data_type', 'comment'],
    interpret: (rows) => {
      const value = (key: string) => rows.find((r) => r.col_name === key)?.data_type;
      const location = value('Location');
      if (typeof location !== 'string' || !sameLocation(location, t.location))
        return {
          fail: new ConfigError([
            {
              path: `${t.path}.table`,
              message: `table ${name} is at ${typeof location === 'string' && location ? location : 'a location Spark does not report'}, not at ${t.location} where the tenant's storage layout puts it; nothing was changed`,
            },
          ]),
        };
      const provider = String(value('Provider') ?? '').toLowerCase();
      if (provider !== t.catalog.format)
        return {
          fail: new ConfigError([
            { path: `${t.path}.table`, message: `table ${name} is a ${provider || 'non-catalog'} table, not ${t.catalog.format}; nothing was changed` },
          ]),
        };
      const end = rows.findIndex((r) => r.col_name === '' || String(r.col_name).startsWith('#'));
      const columns = new Set((end < 0 ? rows : rows.slice(0, end)).map((r) => String(r.col_name).toLowerCase()));
      const c = t.spec.compact;
      const unknown: ConfigIssue[] = [
        ...(c?.['sort-by'] ?? []).flatMap((f, j) =>
          columns.has(f.column.toLowerCase()) ? [] : [{ path: `${t.path}.compact.sort-by[${j}]`, message: `${name} has no column "${f.column}"` }],
        ),
        ...(c?.['zorder-by'] ?? []).flatMap((f, j) =>
          columns.has(f.toLowerCase()) ? [] : [{ path: `${t.path}.compact.zorder-by[${j}]`, message: `${name} has no column "${f}"` }],
        ),
      ];
      return unknown.length ? { fail: new ConfigError(unknown) } : {};
    },
  });
}

/**
 * The prefixes of the paths under a table's location, as Iceberg may have recorded them: Hadoop
 * writes a local path as `file:/x`, configs and our layout as `file:///x`; `s3://` and `s3a://` are
 * one bucket (both S3A), and a root written one way may have files recorded the other way.
 */
export function locationPrefixes(location: string): string[] {
  const base = location.replace(/\/+$/, '');
  const local = /^file:\/\/\/(.*)$/.exec(base) ?? /^file:\/(?!\/)(.*)$/.exec(base);
  if (local) return [`file:///${local[1]}/`, `file:/${local[1]}/`];
  const s3 = /^s3a?:\/\/(.*)$/i.exec(base);
  return s3 ? [`s3a://${s3[1]}/`, `s3://${s3[1]}/`] : [`${base}/`];
}

/**
 * Before expire_snapshots: every file the table's snapshots reference (data and delete files of
 * every snapshot, their manifests and manifest lists) lies under the table's own location.
 * expire_snapshots deletes whatever only expired snapshots reference, wherever it lies, and a table
 * can reference files it does not own: iceberg-zero-copy-append adopts a source's files (another
 * of the tenant's tables, or a table of a namespace the platform grants it for reading) at their
 * paths. Once a later write replaced those rows, expiring would delete the source's live files: a
 * read grant would have become the power to destroy the shared table. Files committed after this
 * check are in snapshots younger than the cut-off, which expire_snapshots keeps.
 */
function foreignFilesStep(t: Target): Step {
  const name = displayTable(t.table);
  const parts = tableParts(t.table);
  const prefixes = locationPrefixes(t.location);
  const outside = (column: string, as: string) => alias(fn('count_if', not(or(...prefixes.map((p) => fn('startswith', col(column), lit(p)))))), as);
  const query = Query.table([...parts, 'all_files'])
    .aggregate([], [outside('file_path', 'files')])
    .join(Query.table([...parts, 'all_manifests']).aggregate([], [outside('path', 'manifests')]), lit(true), 'inner')
    .join(Query.table([...parts, 'snapshots']).aggregate([], [outside('manifest_list', 'lists')]), lit(true), 'inner');
  return queryStep({
    id: `foreign-files-${t.id}`,
    title: `Check that every file ${name}'s snapshots reference lies under ${t.location} (expire_snapshots deletes what only expired snapshots reference, wherever it lies)`,
    query,
    columns: ['files', 'manifests', 'lists'],
    interpret: ([r]) => {
      const n = Number(r?.files ?? 0) + Number(r?.manifests ?? 0) + Number(r?.lists ?? 0);
      if (n === 0) return {};
      // No path is named: it would be another table's, perhaps another tenant's.
      return {
        fail: new ConfigError([
          {
            path: `${t.path}.expire-snapshots`,
            message: `${name} references ${n} file(s) outside its location ${t.location} (files appended by reference, e.g. by iceberg-zero-copy-append, belong to the table they came from): expiring its snapshots would delete them from under that table, so this table's snapshots are not expired by a job; nothing was changed`,
          },
        ]),
      };
    },
  });
}

/**
 * Files and bytes of the table's current state (and its snapshots), from the table's metadata, and
 * its current commit (Iceberg: the snapshot `main` points at; Delta: the latest version). After the
 * actions, the table was `committed` to when its current commit moved or snapshots were expired:
 * a rerun with nothing to compact, rewrite, expire or vacuum reports `committed: false`.
 */
function measureStep(t: Target, when: 'before' | 'after', now: Instant, before?: RowsStep<string>): RowsStep<string> & Step {
  const name = displayTable(t.table);
  const parts = tableParts(t.table);
  let query: Query;
  if (t.catalog.format === 'iceberg') {
    const files = Query.table([...parts, 'files']).aggregate(
      [],
      [alias(fn('count', lit(1)), 'files'), alias(coalesce(fn('sum', col('file_size_in_bytes')), lit(0)), 'bytes')],
    );
    const expire = t.spec['expire-snapshots'];
    // What expire_snapshots would remove: older than the cut-off and not among the newest retain-last.
    const expirable = expire
      ? fn(
          'count_if',
          and(gt(col('__rn'), lit(expire['retain-last'])), fn('<', col('committed_at'), lit({ timestamp: cutoff(now, expire['older-than-hours']) }))),
        )
      : lit(0);
    const snapshots = Query.table([...parts, 'snapshots'])
      .withColumns([['__rn', over(fn('row_number'), [], [desc(col('committed_at'))])]])
      .aggregate([], [alias(fn('count', lit(1)), 'snapshots'), alias(expirable, 'expirable')]);
    const current = Query.table([...parts, 'refs'])
      .filter(fn('=', col('name'), lit('main')))
      .aggregate([], [alias(cast(fn('max', col('snapshot_id')), 'string'), 'current')]);
    query = files.join(snapshots, lit(true), 'inner').join(current, lit(true), 'inner');
  } else {
    const current = Query.sql(sql`DESCRIBE HISTORY ${sql.table(parts)} LIMIT 1`).select(alias(cast(col('version'), 'string'), 'current'));
    query = Query.sql(sql`DESCRIBE DETAIL ${sql.table(parts)}`)
      .select(alias(col('numFiles'), 'files'), alias(col('sizeInBytes'), 'bytes'))
      .join(current, lit(true), 'inner');
  }
  const iceberg = t.catalog.format === 'iceberg';
  return queryStep({
    id: `measure-${when}-${t.id}`,
    title: `Measure ${name}'s files and bytes ${when} maintenance`,
    query,
    columns: iceberg ? (['files', 'bytes', 'snapshots', 'expirable', 'current'] as const) : (['files', 'bytes', 'current'] as const),
    interpret: ([r], facts) => {
      const metrics: Record<string, number> = { [`files${cap(when)}`]: Number(r?.files ?? 0), [`bytes${cap(when)}`]: Number(r?.bytes ?? 0) };
      if (iceberg) metrics[`snapshots${cap(when)}`] = Number(r?.snapshots ?? 0);
      if (when === 'before' && t.spec['expire-snapshots']) metrics.snapshotsExpirable = Number(r?.expirable ?? 0);
      const [b] = (before && facts?.rows(before)) || [];
      // Without the measurement before (not run), a change is not ruled out.
      const committed = when === 'after' && (b === undefined || b.current !== r?.current || (iceberg && Number(r?.snapshots ?? 0) < Number(b.snapshots ?? 0)));
      return { output: { table: name, format: t.catalog.format, location: t.location, committed, metrics } };
    },
  });
}

const cap = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** Count the rows a read-only statement lists (an orphan dry run, VACUUM DRY RUN) into a metric. */
function listingStep(t: Target, id: string, title: string, statement: SqlText, metric: string) {
  return queryStep({
    id,
    title,
    query: Query.sql(statement).aggregate([], [alias(fn('count', lit(1)), 'n')]),
    columns: ['n'],
    interpret: ([r]) => ({ output: { table: displayTable(t.table), format: t.catalog.format, metrics: { [metric]: Number(r?.n ?? 0) } } }),
  });
}

function icebergActions(t: Target, now: Instant, dryRun: boolean): Step[] {
  const s = t.spec;
  const name = displayTable(t.table);
  const steps: Step[] = [];
  const command = (id: string, title: string, statement: SqlText, when?: (f: Facts) => boolean): void => {
    if (!dryRun) steps.push({ kind: 'command', id: `${id}-${t.id}`, title, command: sqlCommand(statement), ...(when ? { when } : {}) });
  };
  if (s.compact) {
    const c = s.compact;
    const args = [sql`strategy => ${sql.value(c.strategy === 'binpack' ? 'binpack' : 'sort')}`];
    if (c.strategy === 'sort') args.push(sql`sort_order => ${sql.quoted(sql.join((c['sort-by'] ?? []).map(sortTerm), sql`, `))}`);
    if (c.strategy === 'zorder')
      args.push(
        sql`sort_order => ${sql.quoted(
          sql`zorder(${sql.join(
            (c['zorder-by'] ?? []).map((z) => sql.id(z)),
            sql`, `,
          )})`,
        )}`,
      );
    const options: [string, string][] = [];
    if (c['target-file-size-mb'] !== undefined) options.push(['target-file-size-bytes', String(c['target-file-size-mb'] * 1024 * 1024)]);
    if (c['min-input-files'] !== undefined) options.push(['min-input-files', String(c['min-input-files'])]);
    if (c['rewrite-all'] !== undefined) options.push(['rewrite-all', String(c['rewrite-all'])]);
    if (options.length)
      args.push(
        sql`options => map(${sql.join(
          options.flatMap(([k, v]) => [sql.value(k), sql.value(v)]),
          sql`, `,
        )})`,
      );
    command('compact', `Compact ${name}'s data files (rewrite_data_files, ${c.strategy})`, procedure(t.table, 'rewrite_data_files', args));
  }
  if (s['rewrite-manifests']) command('rewrite-manifests', `Rewrite ${name}'s manifests`, procedure(t.table, 'rewrite_manifests', []));
  const expire = s['expire-snapshots'];
  if (expire) {
    const h = expire['older-than-hours'];
    command(
      'expire-snapshots',
      `Expire ${name}'s snapshots older than ${h} hours, keeping the newest ${expire['retain-last']}`,
      procedure(t.table, 'expire_snapshots', [
        sql`older_than => ${sql.value({ timestamp: cutoff(now, h) })}`,
        sql`retain_last => ${sql.value(expire['retain-last'])}`,
      ]),
    );
  }
  const orphans = s['remove-orphan-files'];
  if (orphans) {
    const olderThan = sql`older_than => ${sql.value({ timestamp: cutoff(now, orphans['older-than-hours']) })}`;
    const find = listingStep(
      t,
      `find-orphans-${t.id}`,
      `List ${name}'s orphan files older than ${orphans['older-than-hours']} hours (a dry run)`,
      procedure(t.table, 'remove_orphan_files', [olderThan, sql`dry_run => true`], 'reads'),
      'orphanFiles',
    );
    steps.push(find);
    command(
      'remove-orphans',
      `Remove ${name}'s orphan files older than ${orphans['older-than-hours']} hours`,
      procedure(t.table, 'remove_orphan_files', [olderThan]),
      (f) => f.count(find.col('n')) > 0,
    );
  }
  return steps;
}

function sortTerm(f: { column: string; direction: 'asc' | 'desc'; nulls?: 'first' | 'last' | undefined }): SqlText {
  const direction = f.direction === 'desc' ? sql`DESC` : sql`ASC`;
  const nulls = f.nulls === undefined ? sql`` : f.nulls === 'first' ? sql` NULLS FIRST` : sql` NULLS LAST`;
  return sql`${sql.id(f.column)} ${direction}${nulls}`;
}

/** Commits that change no file of the table: they do not count as something written since a ZORDER. */
const NO_DATA_COMMITS = new Set(['VACUUM START', 'VACUUM END']);

/**
 * Whether Delta's latest commit that changed files (DESCRIBE HISTORY, newest first; VACUUM's own
 * commits skipped) is an OPTIMIZE ZORDER BY exactly these columns.
 */
export function sameZorder(history: readonly { operation?: unknown; zorder_by?: unknown }[] | undefined, columns: readonly string[]): boolean {
  const last = history?.find((c) => !NO_DATA_COMMITS.has(String(c.operation)));
  if (last?.operation !== 'OPTIMIZE' || typeof last.zorder_by !== 'string') return false;
  try {
    const by: unknown = JSON.parse(last.zorder_by);
    return Array.isArray(by) && by.length === columns.length && by.every((c, i) => String(c).toLowerCase() === columns[i]!.toLowerCase());
  } catch {
    return false;
  }
}

function deltaActions(t: Target, dryRun: boolean): Step[] {
  const s = t.spec;
  const name = displayTable(t.table);
  const parts = tableParts(t.table);
  const steps: Step[] = [];
  if (s.compact && !dryRun) {
    const zorder =
      s.compact.strategy === 'zorder'
        ? sql` ZORDER BY (${sql.join(
            (s.compact['zorder-by'] ?? []).map((z) => sql.id(z)),
            sql`, `,
          )})`
        : undefined;
    // Delta's ZORDER rewrites every file of the table, one file included, on every run: when the
    // latest commit is already a ZORDER by the same columns, nothing was written since, and it is skipped.
    const last =
      zorder &&
      queryStep({
        id: `last-commits-${t.id}`,
        title: `Read ${name}'s latest commits (a ZORDER by the same columns with nothing written after it is not repeated)`,
        query: Query.sql(sql`DESCRIBE HISTORY ${sql.table(parts)} LIMIT 20`).select(
          alias(col('operation'), 'operation'),
          alias(fn('element_at', col('operationParameters'), lit('zOrderBy')), 'zorder_by'),
        ),
        columns: ['operation', 'zorder_by'],
        interpret: () => ({}),
      });
    if (last) steps.push(last);
    steps.push({
      kind: 'command',
      id: `optimize-${t.id}`,
      title: `OPTIMIZE ${name}${zorder ? ` (zorder)` : ''}`,
      command: sqlCommand(sql`OPTIMIZE ${sql.target(parts)}${zorder ?? sql``}`),
      ...(last ? { when: (f: Facts) => !sameZorder(f.rows(last), s.compact!['zorder-by'] ?? []) } : {}),
    });
  }
  if (s.vacuum) {
    const h = Math.trunc(s.vacuum['retain-hours']);
    const find = listingStep(
      t,
      `find-vacuum-${t.id}`,
      `List the files VACUUM would delete from ${name} (retaining ${h} hours)`,
      sql`VACUUM ${sql.table(parts)} RETAIN ${sql.value(h)} HOURS DRY RUN`,
      'vacuumFiles',
    );
    steps.push(find);
    if (!dryRun)
      steps.push({
        kind: 'command',
        id: `vacuum-${t.id}`,
        title: `VACUUM ${name}, retaining ${h} hours`,
        when: (f) => f.count(find.col('n')) > 0,
        command: sqlCommand(sql`VACUUM ${sql.target(parts)} RETAIN ${sql.value(h)} HOURS`),
      });
  }
  return steps;
}

export const tableMaintenance = defineTemplate({
  name: TEMPLATE,
  layer: 'ops',
  summary:
    "Maintain a tenant's tables by a per-table policy: Iceberg rewrite_data_files (binpack, sort, zorder), rewrite_manifests, expire_snapshots and remove_orphan_files; Delta OPTIMIZE (ZORDER BY) and VACUUM; retention never below the platform's floor; files and bytes before and after; a dry run.",
  stability: 'beta',
  newest: v1,
  plan,
});
