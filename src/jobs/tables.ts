import { ConfigError } from '../core/errors.js';
import { type TableName, quoteName } from '../core/naming.js';
import { sqlCommand } from '../spark/plan/query.js';
import type { CatalogRef, JobContext, Step } from './template.js';

/**
 * What every template that writes a catalog table shares: which catalog, its namespace, the
 * properties the table is created with.
 */

/**
 * The named catalog (or the platform's default), checked against the format the config asks for;
 * `section` holds the `catalog` and `format` keys errors name.
 */
export function tableCatalog(ctx: JobContext, name: string | undefined, format: 'iceberg' | 'delta' | undefined, section = 'target'): CatalogRef {
  const catalog = ctx.catalog(name, `${section}.catalog`);
  if (format && catalog.format !== format)
    throw new ConfigError([{ path: `${section}.format`, message: `is ${format}, but catalog "${catalog.name}" holds ${catalog.format} tables` }]);
  return catalog;
}

export function createNamespaceStep(table: TableName): Step {
  return {
    kind: 'command',
    id: 'create-namespace',
    title: `Create namespace ${table.catalog}.${table.namespace} if missing`,
    command: sqlCommand(`CREATE NAMESPACE IF NOT EXISTS ${quoteName([table.catalog, table.namespace])}`),
  };
}

/** A table lives at its layer's path under the tenant's storage root; Iceberg tables are format v2. */
export function tableProperties(format: 'iceberg' | 'delta', location: string): Record<string, string> {
  return format === 'iceberg' ? { location, 'format-version': '2' } : { location };
}
