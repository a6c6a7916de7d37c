import { closest } from '../core/config/closest.js';
import { ConfigError } from '../core/errors.js';
import { displayTable, tableParts } from '../core/naming.js';
import type { StepOf } from '../jobs/steps.js';
import { CREATE_ONLY_PROPERTIES, type PartitionField, partitionText } from '../jobs/partition-spec.js';
import type { Cmd } from '../spark/plan/commands.js';
import { Query, sqlCommand } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import type { Field } from '../spark/types.js';
import type { StepRun } from './steps/kind.js';

/**
 * The ensureTable step's shape checks (docs/table-shape.md): before a create, the partition fields'
 * columns are the table's and of a type their transform takes; on an existing table, a configured
 * spec must be the table's (78 naming both), a create-only property must be as configured (78), and
 * the other configured properties that differ are what the run sets.
 */

type EnsureTable = StepOf<'ensureTable'>;

const TIMESTAMP = /^timestamp(_ntz|_ltz)?$/;
const DATE_OR_TIMESTAMP = /^(date|timestamp(_ntz|_ltz)?)$/;
const BUCKETABLE = /^(tinyint|smallint|int|bigint|decimal\(\d+,\d+\)|date|timestamp(_ntz|_ltz)?|string|binary)$/;
const NESTED = /^(array|map|struct)</;

/** What a transform needs of its column's type, or undefined when the type will do. */
function typeProblem(f: PartitionField, type: string): string | undefined {
  const t = type.toLowerCase();
  switch (f.kind) {
    case 'identity':
      return NESTED.test(t) ? `a ${type} column cannot be a partition column` : undefined;
    case 'hours':
      return TIMESTAMP.test(t) ? undefined : `hours() takes a timestamp column, and ${f.column} is ${type}`;
    case 'years':
    case 'months':
    case 'days':
      return DATE_OR_TIMESTAMP.test(t) ? undefined : `${f.kind}() takes a date or timestamp column, and ${f.column} is ${type}`;
    case 'bucket':
      return BUCKETABLE.test(t) ? undefined : `bucket() cannot hash a ${type} column`;
    case 'truncate':
      return /^(tinyint|smallint|int|bigint|decimal\(\d+,\d+\)|string|binary)$/.test(t) ? undefined : `truncate() cannot take a ${type} column`;
  }
}

/** The partition fields whose column the new table lacks, or whose type their transform cannot take: 78 at their paths. */
export function partitionColumnProblems(step: EnsureTable, columns: readonly Field[]): ConfigError | undefined {
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  const issues = (step.shape?.partitionBy ?? []).flatMap(({ field, path }) => {
    const column = byName.get(field.column.toLowerCase());
    if (!column) {
      const near = closest(
        field.column,
        columns.map((c) => c.name),
      );
      return [
        {
          path,
          message: `partitions by ${field.column}, which is not a column of ${displayTable(step.table)}${near ? `; did you mean "${near}"?` : ''} (its columns: ${columns.map((c) => c.name).join(', ')})`,
        },
      ];
    }
    const problem = typeProblem(field, column.type);
    return problem ? [{ path, message: problem }] : [];
  });
  return issues.length ? new ConfigError(issues) : undefined;
}

/** A table's partition spec and properties, as Spark reports them. */
export interface TableShapeFound {
  readonly partitionBy: readonly string[];
  readonly properties: Readonly<Record<string, string>>;
}

/**
 * The partition spec in DESCRIBE TABLE EXTENDED's rows: Iceberg's `# Partitioning` section (`Part N`
 * rows, transforms as `days(c)`), or Delta's `# Partition Information` (its columns).
 */
export function partitionSpecOf(rows: readonly { col_name?: unknown; data_type?: unknown }[]): string[] {
  const names = rows.map((r) => String(r.col_name ?? ''));
  const iceberg = names.indexOf('# Partitioning');
  if (iceberg >= 0) {
    const out: string[] = [];
    for (const r of rows.slice(iceberg + 1)) {
      if (!/^Part \d+$/.test(String(r.col_name ?? ''))) break;
      out.push(String(r.data_type ?? ''));
    }
    return out;
  }
  const delta = names.indexOf('# Partition Information');
  if (delta < 0) return [];
  const out: string[] = [];
  for (const r of rows.slice(delta + 1)) {
    const n = String(r.col_name ?? '');
    if (n === '# col_name') continue;
    if (n === '' || n.startsWith('#')) break;
    out.push(n);
  }
  return out;
}

const canonical = (text: string) => text.replace(/[\s`]/g, '').toLowerCase();

/**
 * What an existing table must change to have the step's shape: refused (78) when its partition spec
 * is not the configured one or a create-only property differs; otherwise the configured properties
 * whose value differs (none: nothing to do).
 */
export function shapeChanges(step: EnsureTable, found: TableShapeFound): Record<string, string> {
  const shape = step.shape;
  if (!shape) return {};
  const table = displayTable(step.table);
  if (shape.partitionByConfigured) {
    const wanted = shape.partitionBy.map((f) => partitionText(f.field));
    const same = wanted.length === found.partitionBy.length && wanted.every((w, i) => canonical(w) === canonical(found.partitionBy[i]!));
    if (!same) {
      const spec = (fields: readonly string[]) => (fields.length ? `[${fields.join(', ')}]` : 'unpartitioned');
      throw new ConfigError([
        {
          path: `${step.configPath.replace(/\.table$/, '')}.partition-by`,
          message: `table ${table} exists partitioned by ${spec(found.partitionBy)}, not by ${spec(wanted)} as configured; a table's partitioning is never changed by a run, and nothing was written (set partition-by to the table's spec, or evolve the table yourself: ALTER TABLE … ADD/DROP PARTITION FIELD)`,
        },
      ]);
    }
  }
  const differ: Record<string, string> = {};
  const refused: { path: string; message: string }[] = [];
  for (const [key, value] of Object.entries(shape.properties)) {
    const actual = found.properties[key];
    if (actual === value) continue;
    if (CREATE_ONLY_PROPERTIES.includes(key))
      refused.push({
        path: `${shape.propertiesPath}.${key}`,
        message: `table ${table} has ${key} ${actual ?? '(unset)'}, not ${value} as configured; it is fixed when a table is created (a format upgrade is a migration of its own), and nothing was written`,
      });
    else differ[key] = value;
  }
  if (refused.length) throw new ConfigError(refused);
  return differ;
}

/** An existing table's partition spec and properties, read only when the step's shape asks about them. */
export async function readShape(step: EnsureTable, run: StepRun): Promise<TableShapeFound> {
  const parts = tableParts(step.table);
  const partitionBy = step.shape?.partitionByConfigured
    ? partitionSpecOf((await run.rows(Query.sql(sql`DESCRIBE TABLE EXTENDED ${sql.table(parts)}`).rel, { reveal: false })).rows)
    : [];
  const properties: Record<string, string> = {};
  if (Object.keys(step.shape?.properties ?? {}).length) {
    const { rows } = await run.rows(Query.sql(sql`SHOW TBLPROPERTIES ${sql.table(parts)}`).rel, { reveal: false });
    for (const r of rows) properties[String(r.key)] = String(r.value);
  }
  return { partitionBy, properties };
}

/** ALTER TABLE … SET TBLPROPERTIES of allow-listed keys and checked values, each a literal. */
export function setPropertiesCommand(step: EnsureTable, properties: Readonly<Record<string, string>>): Cmd {
  const pairs = Object.entries(properties).map(([k, v]) => sql`${sql.value(k)} = ${sql.value(v)}`);
  return sqlCommand(sql`ALTER TABLE ${sql.target(tableParts(step.table))} SET TBLPROPERTIES (${sql.join(pairs, sql`, `)})`);
}
