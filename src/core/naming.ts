/**
 * Tenancy and naming (docs/contracts.md). Everything that becomes part of a Spark identifier or a storage
 * path passes through here: names are validated against strict patterns, then always quoted, so a
 * config value can never change the shape of a statement.
 */

/** Tenant ids, table and namespace parts chosen by tenants: lower snake case. */
export const NAME_PATTERN = /^[a-z][a-z0-9_]*$/;
/** Source column names may carry upper case (JDBC sources, CDC tools). */
export const COLUMN_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Catalog names configured by the platform. */
export const CATALOG_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const LAYERS = ['bronze', 'silver', 'gold'] as const;
export type Layer = (typeof LAYERS)[number];

/** Backtick-quote one identifier part (backticks inside are doubled, per Spark SQL). */
export function quoteIdentifier(part: string): string {
  return '`' + part.replaceAll('`', '``') + '`';
}

/** A multi-part name, quoted part by part: `lake`.`acme_silver`.`orders`. */
export function quoteName(parts: readonly string[]): string {
  return parts.map(quoteIdentifier).join('.');
}

/** The namespace of a tenant's layer: `acme_silver`. */
export function layerNamespace(tenantId: string, layer: Layer): string {
  return `${tenantId}_${layer}`;
}

export interface TableName {
  readonly catalog: string;
  readonly namespace: string;
  readonly table: string;
}

export function tableParts(name: TableName): string[] {
  return [name.catalog, name.namespace, name.table];
}

/** `catalog.namespace.table`, unquoted, for status documents and logs. */
export function displayTable(name: TableName): string {
  return tableParts(name).join('.');
}

/** `<storage-root>/<layer>/<table>`, with exactly one slash at each join. */
export function storagePath(storageRoot: string, layer: Layer, table: string): string {
  return `${storageRoot.replace(/\/+$/, '')}/${layer}/${table}`;
}
