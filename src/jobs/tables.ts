import { ConfigError } from '../core/errors.js';
import { type TableName, displayTable, tableParts } from '../core/naming.js';
import { col, desc, eq, lit } from '../spark/plan/expressions.js';
import { Query, sqlCommand } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import type { Cmd } from '../spark/plan/commands.js';
import { type TableShape, partitionExpr } from './partition-spec.js';
import type { CatalogRef, JobContext, Step } from './template.js';
import { type Facts, queryStep } from './steps.js';

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
    command: sqlCommand(sql`CREATE NAMESPACE IF NOT EXISTS ${sql.qualified([table.catalog, table.namespace])}`),
    ifNotExists: true,
  };
}

/**
 * A list of tables names each at most once (`{ catalog, layer, table }`, the catalog as written):
 * an issue at `tables[i]` for each repeat, saying what the template `does` to it.
 */
export function eachTableOnce(
  tables: readonly { catalog?: string | undefined; layer: string; table: string }[],
  ctx: { addIssue(issue: { code: 'custom'; path: (string | number)[]; message: string }): void },
  does: string,
): void {
  const seen = new Map<string, number>();
  tables.forEach((t, i) => {
    const key = `${t.catalog ?? ''}/${t.layer}/${t.table}`;
    const first = seen.get(key);
    if (first !== undefined) ctx.addIssue({ code: 'custom', path: ['tables', i], message: `${does} the same table as tables[${first}]` });
    else seen.set(key, i);
  });
}

/** A table lives at its layer's path under the tenant's storage root; Iceberg tables are format v2. */
export function tableProperties(format: 'iceberg' | 'delta', location: string): Record<string, string> {
  return format === 'iceberg' ? { location, 'format-version': '2' } : { location };
}

/**
 * The create of a table from `shape`'s relation (its columns, no rows), in the configured shape: its
 * partition spec and allow-listed properties over the defaults; the location is always the layout's.
 */
export function createTable(columns: Query, target: TableName, format: 'iceberg' | 'delta', location: string, shape: TableShape): Cmd {
  return columns.limit(0).writeTo(tableParts(target), 'create', {
    provider: format,
    properties: { ...tableProperties(format, location), ...shape.properties, location },
    partitionBy: shape.partitionBy.map((f) => partitionExpr(f.field)),
  });
}

/**
 * A bronze table also records its change data feed when it is Delta, which an incremental read of
 * its versions needs (docs/contracts.md, "Incremental reads"); bronze only appends, and a Delta
 * append writes no change files: the feed costs nothing until rows are rewritten.
 */
export function bronzeTableProperties(format: 'iceberg' | 'delta', location: string): Record<string, string> {
  return format === 'delta' ? { ...tableProperties(format, location), 'delta.enableChangeDataFeed': 'true' } : tableProperties(format, location);
}

/**
 * The last step of a write: read the table's current commit (Iceberg snapshot id, Delta version)
 * into the status's output, so the orchestrator can pin what this run left behind. `when`: only
 * then (a template whose earlier step already read the commit, unless it wrote again since).
 */
export function readCommitStep(target: TableName, format: 'iceberg' | 'delta', when?: (facts: Facts) => boolean): Step {
  const table = displayTable(target);
  if (format === 'iceberg') {
    return queryStep({
      id: 'read-snapshot',
      ...(when ? { when } : {}),
      title: `Read the current snapshot of ${table}`,
      // The snapshot the table's main branch points at: after a rollback (rollback_to_snapshot,
      // set_current_snapshot) that is not the latest one committed.
      query: Query.table([...tableParts(target), 'refs'])
        .filter(eq(col('name'), lit('main')))
        .select('snapshot_id'),
      columns: ['snapshot_id'],
      interpret: (rows) => {
        const id = rows[0]?.snapshot_id;
        return id === undefined || id === null ? {} : { output: { table, format, snapshotId: String(id) } };
      },
    });
  }
  return queryStep({
    id: 'read-version',
    ...(when ? { when } : {}),
    title: `Read the current version of ${table}`,
    query: Query.sql(sql`DESCRIBE HISTORY ${sql.table(tableParts(target))}`)
      .select('version')
      .sort(desc(col('version')))
      .limit(1),
    columns: ['version'],
    interpret: (rows) => {
      const v = rows[0]?.version;
      return v === undefined || v === null ? {} : { output: { table, format, snapshotId: String(v) } };
    },
  });
}
