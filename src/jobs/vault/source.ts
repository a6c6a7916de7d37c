import { z } from 'zod';
import { type TableName, displayTable, tableParts } from '../../core/naming.js';
import { catalogName, expression, isoDate, name } from '../../core/config/validate.js';
import type { ConfigExpression } from '../../core/expression/index.js';
import { configExpr } from '../../spark/plan/config-expression.js';
import { Query } from '../../spark/plan/query.js';
import type { JobContext, Step } from '../template.js';
import { withId } from '../steps.js';
import { BRONZE_FORMATS, bronzeRef, readBronze } from '../layers/bronze.js';
import { type SilverRef, silverRef } from '../layers/silver.js';
import { type RequiredColumn, checkSourceColumns } from '../source-columns.js';
import { type IncrementalRead, checkSourceRead, incrementalRead, sourceRead } from '../incremental.js';

/**
 * Where a raw vault template reads: a table of the tenant's bronze layer (what jdbc-snapshot-ingest
 * writes: parquet files, or an Iceberg or Delta table) or of its silver layer (an Iceberg or Delta
 * table), read through the layer modules, optionally filtered by a config expression. Each source
 * names the `record-source` its rows are stamped with.
 */

/** A record source: free text for people (a system and table, e.g. "shop.orders"), stored as a literal. */
const recordSource = () =>
  z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9 _.:/@-]{0,127}$/, 'a record source is 1-128 letters, digits, spaces and _ . : / @ -, starting with a letter or digit')
    .describe('The record_source the rows are stamped with, e.g. "shop.orders"');

/** What a source section holds in any layer and format combination the layers allow. */
function checkSource(s: SourceSpec, ctx: z.RefinementCtx): void {
  if (s.layer === 'silver' && s.format === 'parquet')
    ctx.addIssue({ code: 'custom', path: ['format'], message: 'silver tables are iceberg or delta; parquet files are bronze only' });
  if (s.layer === 'silver' && s['snapshot-date'] !== undefined)
    ctx.addIssue({ code: 'custom', path: ['snapshot-date'], message: 'applies to bronze; silver has no snapshot partitions (filter with where)' });
  if (s.layer === 'bronze' && (s.format ?? 'parquet') === 'parquet' && s.catalog !== undefined)
    ctx.addIssue({ code: 'custom', path: ['catalog'], message: 'applies to iceberg and delta tables; parquet files need no catalog' });
  checkSourceRead(s, ctx, 'read');
}

/** A source section; `what` is its config path in messages, `extra` the template's own keys. */
export const sourceSection = <E extends z.ZodRawShape>(what: string, extra: E) =>
  z
    .object({
      ...extra,
      table: name().describe('The source table in the tenant layer'),
      layer: z.enum(['bronze', 'silver']).default('bronze').describe('bronze (default) or silver'),
      format: z.enum(BRONZE_FORMATS).optional().describe("bronze: parquet (default), iceberg or delta; silver: iceberg or delta (default: the catalog's)"),
      catalog: catalogName().optional().describe("For iceberg and delta: the platform's catalog (default: its default catalog)"),
      'snapshot-date': z
        .union([isoDate(), z.array(isoDate()).min(1)])
        .transform((v) => (Array.isArray(v) ? v : [v]))
        .refine((dates) => new Set(dates).size === dates.length, 'lists a date twice')
        .optional()
        .describe('bronze only: the snapshot date(s) to read, e.g. --set source.snapshot-date={{ ds }}; a date bronze does not hold skips the run (99)'),
      where: expression(`${what}.where`).optional().describe('A filter on the source rows (docs/expressions.md)'),
      'record-source': recordSource(),
      read: sourceRead,
    })
    .strict()
    .superRefine((s, ctx) => checkSource(s as SourceSpec, ctx))
    .describe("A table of the tenant's bronze or silver layer to read, optionally filtered, and the record source its rows are stamped with.");

export interface SourceSpec {
  table: string;
  layer: 'bronze' | 'silver';
  format?: (typeof BRONZE_FORMATS)[number] | undefined;
  catalog?: string | undefined;
  'snapshot-date'?: string[] | undefined;
  where?: ConfigExpression | undefined;
  'record-source': string;
  read?: 'full' | 'incremental' | undefined;
}

export interface VaultSource {
  /** The source's rows (filtered by `where`). */
  readonly rows: Query;
  /** Steps before reading: a selected snapshot date bronze does not hold skips the run (99). */
  readonly checks: Step[];
  /** The table or path, for titles and messages. */
  readonly name: string;
  /** The config paths whose logic reading this source carries (its `where`). */
  readonly untrusted: string[];
  /** `read`: the source's commits since the position the vault table recorded. */
  readonly incremental?: IncrementalRead | undefined;
}

/**
 * Read one source; `path` is its config path (`source`, `sources[1]`), which errors name. `required`
 * are the source columns the config names (business keys, payload, order): a check of the source's
 * columns, before anything is written, refuses a missing one at its path (78, "did you mean").
 */
export function readSource(ctx: JobContext, s: SourceSpec, path: string, required: readonly RequiredColumn[] = [], target?: SilverRef): VaultSource {
  let rows: Query;
  let checks: Step[] = [];
  let label: string;
  let table: { table: TableName; format: 'iceberg' | 'delta' } | undefined;
  if (s.layer === 'silver') {
    const ref = silverRef(ctx, { table: s.table, catalog: s.catalog, format: s.format === 'parquet' ? undefined : s.format }, path);
    rows = Query.table(tableParts(ref.table));
    label = displayTable(ref.table);
    table = { table: ref.table, format: ref.catalog.format };
  } else {
    const ref = bronzeRef(ctx, { table: s.table, format: s.format ?? 'parquet', catalog: s.catalog }, path);
    const read = readBronze(ref, s['snapshot-date']);
    rows = read.rows;
    label = ref.name;
    // Each source probes its own dates: ids must be unique within a plan.
    checks = read.checks.map((c) => withId(c, `${c.id}-${stepSuffix(path)}`));
    if (ref.kind === 'table') table = { table: ref.table, format: ref.format };
  }
  // read: the commits since the vault table's position (the schema refused it for parquet files).
  const incremental = s.read && table && target ? incrementalRead(table, { table: target.table, format: target.catalog.format }, s.read) : undefined;
  if (incremental) {
    rows = incremental.rows;
    checks = [...incremental.steps, ...checks];
  }
  if (required.length)
    checks.push(
      checkSourceColumns({
        id: `check-source-columns-${stepSuffix(path)}`,
        source: rows,
        sourceName: label,
        configPath: `${path}.table`,
        template: 'the raw vault',
        // The vault's plans carry only the columns the config names: no source column is in their way.
        reserved: { names: [], prefixes: [] },
        required,
      }),
    );
  if (s.where) rows = rows.filter(configExpr(s.where));
  return { rows, checks, name: label, untrusted: s.where ? [`${path}.where`] : [], ...(incremental ? { incremental } : {}) };
}

/** `sources[1]` → `sources-1`: a config path as part of a step id. */
export const stepSuffix = (path: string): string => path.replace(/\[(\d+)\]/g, '-$1');
