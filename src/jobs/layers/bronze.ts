import { z } from 'zod';
import { ConfigError } from '../../core/errors.js';
import { type TableName, displayTable, tableParts } from '../../core/naming.js';
import { catalogName } from '../../core/config/validate.js';
import { alias, col, eq, fn, isIn, lit } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import type { Cmd } from '../../spark/plan/commands.js';
import type { JobContext, OutputReport, Step } from '../template.js';
import { createNamespaceStep, tableCatalog, bronzeTableProperties } from '../tables.js';
import { queryStep } from '../steps.js';
import { type TableShape, parsePartitionField, partitionExpr, partitionText } from '../partition-spec.js';
import { type TableShapeSpec, tableShape, tableShapeKeys } from '../table-shape.js';

/**
 * The bronze layer's contract (docs/contracts.md): what every bronze row carries and where bronze
 * lives. Writers (jdbc-snapshot-ingest) and readers (cdc-silver-merge) go through this module, so the
 * two ends of the chain cannot disagree on a format, a path or a stamp.
 *
 * Bronze is either parquet files under `<storage-root>/bronze/<table>`, partitioned by
 * `_snapshot_date`, or an Iceberg or Delta table `<catalog>.<tenant>_bronze.<table>` at that same
 * location. A table is always read as a table, never through its files: a Delta directory holds
 * files that Delta has removed, and Iceberg's data files are not laid out as Hive partitions.
 */

/** The snapshot date every bronze row carries; bronze is partitioned by it first. */
export const SNAPSHOT_DATE = '_snapshot_date';
/** The stamps every bronze row carries; none of them reaches silver. */
export const BRONZE_STAMPS = ['_lake_tenant', '_lake_source', '_lake_ingested_at', SNAPSHOT_DATE] as const;

export const BRONZE_FORMATS = ['parquet', 'iceberg', 'delta'] as const;
export type BronzeFormat = (typeof BRONZE_FORMATS)[number];

/** The config keys that choose a bronze format (a writer's `target`, a reader's `source`). */
export const bronzeFormatKeys = {
  format: z.enum(BRONZE_FORMATS).default('parquet').describe('parquet files (the v1 layout), or a bronze Iceberg or Delta table'),
  catalog: catalogName().optional().describe("For iceberg and delta: the platform's catalog (default: its default catalog)"),
};

/** parquet needs no catalog: a refinement for a section holding `bronzeFormatKeys`. */
export function checkBronzeCatalog(s: { format: BronzeFormat; catalog?: string | undefined }, ctx: z.RefinementCtx): void {
  if (s.format === 'parquet' && s.catalog !== undefined)
    ctx.addIssue({ code: 'custom', path: ['catalog'], message: 'applies to iceberg and delta tables; parquet files need no catalog' });
}

/**
 * `target.partition-by` and `target.table-properties` of a bronze writer (docs/table-shape.md,
 * "Bronze"): the keys silver and gold take, with bronze's own rule that `_snapshot_date` is always
 * the first partition field, so a stamp column cannot be named.
 */
export const bronzeShapeKeys = {
  'partition-by': tableShapeKeys['partition-by'].describe(
    'Partition fields after _snapshot_date (always first): columns, and for Iceberg tables years(c), months(c), days(c), hours(c), bucket(N, c). Parquet bronze and Delta tables take columns only. An existing table partitioned otherwise is refused (78); see docs/table-shape.md.',
  ),
  'table-properties': tableShapeKeys['table-properties'].describe(
    'Iceberg or Delta table properties from the allow-list of docs/table-shape.md (not for parquet bronze). Set when the table is created; on an existing table a differing one is set by the run (format-version: refused, 78).',
  ),
};

/** A refinement of a section holding `partition-by`: no bronze stamp in it (`_snapshot_date` always comes first). */
export function checkBronzePartitionBy(s: { 'partition-by'?: readonly string[] | undefined }, ctx: z.RefinementCtx): void {
  (s['partition-by'] ?? []).forEach((text, i) => {
    const f = parsePartitionField(text);
    if ('problem' in f || !(BRONZE_STAMPS as readonly string[]).includes(f.column.toLowerCase())) return;
    ctx.addIssue({ code: 'custom', path: ['partition-by', i], message: `"${text}" names a bronze metadata column (${SNAPSHOT_DATE} always comes first)` });
  });
}

/**
 * The shape a bronze write lays its data out in: `_snapshot_date` first, then the configured fields.
 * Parquet bronze is folders, `_snapshot_date=<date>/<column>=<value>/`: it takes columns only (a
 * transform has no folder Spark's file writer makes) and no properties (there is no table to hold
 * them), 78 at their paths. A table takes the silver and gold rules (tableShape).
 */
export function bronzeShape(ref: BronzeRef, spec: TableShapeSpec, section = 'target'): TableShape {
  const first = { field: { kind: 'identity', column: SNAPSHOT_DATE } as const, path: `${section}.table` };
  if (ref.kind === 'table') {
    const shape = tableShape(spec, ref.format, [], section);
    return Object.freeze({ ...shape, partitionBy: Object.freeze([first, ...shape.partitionBy]) });
  }
  const issues: { path: string; message: string }[] = [];
  const fields = (spec['partition-by'] ?? []).map((text, i) => {
    const field = parsePartitionField(text);
    if ('problem' in field) throw new Error(`unchecked partition field ${text}`); // the schema refused it
    if (field.kind !== 'identity')
      issues.push({
        path: `${section}.partition-by[${i}]`,
        message: `${partitionText(field)} is a partition transform, and parquet bronze is laid out in folders per value of a column (${SNAPSHOT_DATE}=<date>/<column>=<value>/): partition by a column, or write a table (format = iceberg takes transforms)`,
      });
    return { field, path: `${section}.partition-by[${i}]` };
  });
  for (const key of Object.keys(spec['table-properties'] ?? {}))
    issues.push({
      path: `${section}.table-properties.${key}`,
      message: 'is a table property, and parquet bronze is files with no table to hold it: write a table (format = iceberg or delta) to set properties',
    });
  if (issues.length) throw new ConfigError(issues);
  return Object.freeze({
    partitionBy: Object.freeze([first, ...fields]),
    partitionByConfigured: spec['partition-by'] !== undefined,
    properties: Object.freeze({}),
    propertiesPath: `${section}.table-properties`,
  });
}

export type BronzeRef =
  | { readonly kind: 'files'; readonly format: 'parquet'; readonly location: string; readonly name: string; readonly configPath: string }
  | { readonly kind: 'table'; readonly format: 'iceberg' | 'delta'; readonly location: string; readonly name: string; readonly table: TableName };

/**
 * Where a tenant's bronze table lives, in the given format. `section` is the config section that
 * chose it (`target` for a writer, `source` for a reader): errors name its keys.
 */
export function bronzeRef(ctx: JobContext, spec: { table: string; format: BronzeFormat; catalog?: string | undefined }, section: string): BronzeRef {
  const location = ctx.tenant.location('bronze', spec.table);
  if (spec.format === 'parquet') return { kind: 'files', format: 'parquet', location, name: location, configPath: `${section}.table` };
  const catalog = tableCatalog(ctx, spec.catalog, spec.format, section);
  const table = ctx.tenant.table(catalog.name, 'bronze', spec.table);
  return { kind: 'table', format: spec.format, location, name: displayTable(table), table };
}

/** What the status says a run wrote: the table, or for files the path (there is no table to name). */
export function bronzeOutput(ref: BronzeRef): OutputReport {
  return ref.kind === 'table'
    ? { table: ref.name, format: ref.format, location: ref.location }
    : { path: ref.location, format: 'parquet', location: ref.location };
}

/**
 * Bronze keeps text as text: JDBC drivers report varchar lengths (SQLite even 0) that Delta would
 * enforce as constraints on every write, and that would follow the columns into silver.
 */
export const BRONZE_SESSION_CONF: Readonly<Record<string, string>> = { 'spark.sql.legacy.charVarcharAsString': 'true' };

/** The source's rows with the bronze stamps. */
export function stampBronze(rows: Query, s: { tenant: string; origin: string; snapshotDate: string }): Query {
  return rows.withColumns([
    ['_lake_tenant', lit(s.tenant)],
    ['_lake_source', lit(s.origin)],
    ['_lake_ingested_at', fn('current_timestamp')],
    [SNAPSHOT_DATE, lit({ date: s.snapshotDate })],
  ]);
}

/**
 * The steps that replace one snapshot date of bronze with `stamped` (rows carrying the stamps), laid
 * out in `shape` (bronzeShape): a rerun of the date leaves no duplicates and other dates untouched.
 */
export function writeBronze(
  ref: BronzeRef,
  stamped: Query,
  w: { snapshotDate: string; shape: TableShape; origin: string; configPath: string; untrusted?: readonly string[] },
): Step[] {
  const date = lit({ date: w.snapshotDate });
  // Steps whose plan carries the tenant's logic (e.g. source.where) are checked by the tenant policy.
  const untrusted = w.untrusted?.length ? { untrusted: w.untrusted } : {};
  if (ref.kind === 'files') {
    const columns = w.shape.partitionBy.map((f) => f.field.column).filter((c) => c !== SNAPSHOT_DATE);
    const write: Step = {
      kind: 'command',
      id: 'write-snapshot',
      ...untrusted,
      title: `Write the ${w.snapshotDate} snapshot of ${w.origin} to ${ref.location}`,
      command: columns.length
        ? // The date's folder replaced whole, its column folders in it: a dynamic overwrite would
          // replace only the (date, value) folders this write produces, and leave a value the source
          // no longer has in the date. The date comes back as a column from its folder's name.
          stamped.drop(SNAPSHOT_DATE).writeFiles(`${ref.location}/${SNAPSHOT_DATE}=${w.snapshotDate}`, 'parquet', {
            mode: 'overwrite',
            partitionBy: columns,
            options: { partitionOverwriteMode: 'static' },
          })
        : // Overwrite with dynamic partition overwrite replaces only the partitions this write
          // produces (this snapshot date), so a rerun leaves no duplicates and other dates untouched.
          stamped.writeFiles(ref.location, 'parquet', {
            mode: 'overwrite',
            partitionBy: [SNAPSHOT_DATE],
            options: { partitionOverwriteMode: 'dynamic' },
          }),
    };
    return [filesOnly(ref), write];
  }
  const parts = tableParts(ref.table);
  return [
    createNamespaceStep(ref.table),
    {
      kind: 'ensureTable',
      id: 'create-table',
      ...untrusted,
      title: `Create ${ref.name} at ${ref.location} if missing`,
      table: ref.table,
      location: ref.location,
      configPath: w.configPath,
      create: createBronzeTable(ref, stamped, w.shape),
      shape: w.shape,
    },
    {
      kind: 'command',
      id: 'write-snapshot',
      ...untrusted,
      title: `Replace the ${w.snapshotDate} snapshot of ${w.origin} in ${ref.name}`,
      // One atomic commit that replaces exactly this snapshot date: no duplicates on a rerun.
      command: stamped.writeTo(parts, 'overwrite', { overwriteCondition: eq(col(SNAPSHOT_DATE), date) }),
    },
  ];
}

/**
 * The create of a bronze table from `rows`' columns (no rows): partitioned by `shape` (its first
 * field `_snapshot_date`), bronze's default properties under the configured ones, at the layout's location.
 */
export function createBronzeTable(ref: Extract<BronzeRef, { kind: 'table' }>, rows: Query, shape: TableShape): Cmd {
  return rows.limit(0).writeTo(tableParts(ref.table), 'create', {
    provider: ref.format,
    partitionBy: shape.partitionBy.map((f) => partitionExpr(f.field)),
    properties: { ...bronzeTableProperties(ref.format, ref.location), ...shape.properties, location: ref.location },
  });
}

export interface BronzeRead {
  /** Bronze rows (stamps included) of the selected snapshot dates, or of all of them. */
  readonly rows: Query;
  /** Steps to run before reading: a selected date that bronze does not hold skips the run (99). */
  readonly checks: Step[];
}

/**
 * Read bronze, optionally only some snapshot dates. Files: exactly the partitions
 * `<location>/_snapshot_date=<date>` are listed and read, so a bad file in another date's partition
 * cannot affect the run. Tables: read through the catalog with a literal filter on `_snapshot_date`
 * (the table format prunes its partitions).
 */
export function readBronze(ref: BronzeRef, snapshotDates?: readonly string[]): BronzeRead {
  if (ref.kind === 'files') {
    if (!snapshotDates) {
      // mergeSchema: partitions written before and after a source schema change must all show
      // their columns; without it Spark takes one file's schema and new columns silently vanish.
      return { rows: Query.read('parquet', { paths: [ref.location], options: { mergeSchema: 'true' } }), checks: [filesOnly(ref)] };
    }
    const partitions = snapshotDates.map((d) => `${ref.location}/${SNAPSHOT_DATE}=${d}`);
    return {
      // basePath at the bronze dir, so _snapshot_date stays a column.
      rows: Query.read('parquet', { paths: partitions, options: { mergeSchema: 'true', basePath: ref.location } }),
      checks: [
        filesOnly(ref),
        {
          kind: 'probePaths',
          id: 'probe-partitions',
          title: `Check that the bronze partitions of ${snapshotDates.join(', ')} exist in ${ref.location}`,
          paths: partitions,
          interpret: (missing) =>
            missing.length === 0
              ? {}
              : {
                  skip: noSnapshot(
                    snapshotDates.filter((_, i) => missing.includes(partitions[i]!)),
                    ref,
                  ),
                },
        },
      ],
    };
  }
  const table = Query.table(tableParts(ref.table));
  if (!snapshotDates) return { rows: table, checks: [] };
  const selected = table.filter(
    isIn(
      col(SNAPSHOT_DATE),
      snapshotDates.map((d) => lit({ date: d })),
    ),
  );
  return {
    rows: selected,
    checks: [
      queryStep({
        id: 'probe-partitions',
        title: `Check that ${ref.name} holds the snapshot dates ${snapshotDates.join(', ')}`,
        query: selected.aggregate([col(SNAPSHOT_DATE)], [alias(fn('count', lit(1)), 'rows')]).select(alias(fn('string', col(SNAPSHOT_DATE)), 'date')),
        columns: ['date'],
        interpret: (rows) => {
          const present = new Set(rows.map((r) => String(r.date)));
          const missing = snapshotDates.filter((d) => !present.has(d));
          return missing.length === 0 ? {} : { skip: noSnapshot(missing, ref) };
        },
      }),
    ],
  };
}

/**
 * Parquet bronze shares its location with the bronze table of the same name in any format
 * (`<storage-root>/bronze/<table>`), so a tenant that moves a table from files to a table format, or
 * names two jobs' tables alike, can point both at one directory. Files there are then not what a
 * parquet reader takes them for: a Delta table's directory holds the files Delta has removed (read
 * as rows, they bring deleted and replaced rows back), and an Iceberg table's, files its snapshots
 * may no longer reference; a parquet writer's dynamic overwrite deletes a date's folder, live table
 * files included. So bronze is read or written as files only where no table keeps its log
 * (`_delta_log`) or metadata (`metadata`); otherwise 78 (TABLE_LOCATION_TAKEN), before anything is
 * read or written. The reverse, a table created over parquet files, is refused when the table is
 * created (src/runner/table-guards.ts: a new table starts at an empty location).
 */
function filesOnly(ref: Extract<BronzeRef, { kind: 'files' }>): Step {
  const marks = [`${ref.location}/_delta_log`, `${ref.location}/metadata`];
  return {
    kind: 'probePaths',
    id: 'probe-files-only',
    title: `Check that no Delta or Iceberg table is at ${ref.location}`,
    paths: marks,
    interpret: (missing) => {
      const table = marks.find((m) => !missing.includes(m));
      if (table === undefined) return {};
      const format = table.endsWith('/_delta_log') ? 'a Delta table (_delta_log)' : 'an Iceberg table (metadata)';
      return {
        fail: new ConfigError(
          [
            {
              path: ref.configPath,
              message: `bronze parquet files cannot be read or written at ${ref.location}: ${format} is there, whose files are not rows as they lie (a table keeps files it has removed, and a parquet write would delete its live ones); nothing was read or written (read it with format = ${table.endsWith('/_delta_log') ? 'delta' : 'iceberg'}, or name the bronze table differently)`,
            },
          ],
          { code: 'TABLE_LOCATION_TAKEN' },
        ),
      };
    },
  };
}

function noSnapshot(dates: readonly string[], ref: BronzeRef): string {
  return `no bronze partition for source.snapshot-date ${dates.join(', ')} in ${ref.name}`;
}
