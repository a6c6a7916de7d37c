import { type TableName } from '../../core/naming.js';
import type { CatalogRef, JobContext } from '../template.js';
import { tableCatalog } from '../tables.js';

/**
 * The silver layer's contract: a silver table is `<catalog>.<tenant>_silver.<table>` at
 * `<storage-root>/silver/<table>`, an Iceberg or Delta table of the platform's catalog. Templates
 * that write silver name it through here.
 */

export const SILVER_FORMATS = ['iceberg', 'delta'] as const;
export type SilverFormat = (typeof SILVER_FORMATS)[number];

export interface SilverRef {
  readonly catalog: CatalogRef;
  readonly table: TableName;
  readonly location: string;
}

/** The tenant's silver table `name` (the catalog checked against `format`; errors at `<section>.catalog|format`). */
export function silverRef(
  ctx: JobContext,
  spec: { table: string; catalog?: string | undefined; format?: SilverFormat | undefined },
  section = 'target',
): SilverRef {
  const catalog = tableCatalog(ctx, spec.catalog, spec.format, section);
  return { catalog, table: ctx.tenant.table(catalog.name, 'silver', spec.table), location: ctx.tenant.location('silver', spec.table) };
}

/** A companion table next to a silver table (e.g. its CDC tombstones), in the same catalog and format. */
export function silverCompanion(ctx: JobContext, of: SilverRef, suffix: string): SilverRef {
  const name = `${of.table.table}${suffix}`;
  return { catalog: of.catalog, table: ctx.tenant.table(of.catalog.name, 'silver', name), location: ctx.tenant.location('silver', name) };
}
