import { z } from 'zod';
import { closest } from '../core/config/closest.js';
import { ConfigError } from '../core/errors.js';
import {
  ALLOWED_PROPERTIES,
  type Format,
  type PartitionField,
  type PartitionFieldAt,
  TIME_TRANSFORMS,
  type TableShape,
  parsePartitionField,
  partitionText,
} from './partition-spec.js';

export type { TableShape } from './partition-spec.js';

/**
 * The shape a template creates its table in (docs/table-shape.md): `target.partition-by`, identity
 * columns and Iceberg's partition transforms, and `target.table-properties` from an allow-list whose
 * values are checked, not only its keys. A tenant never reaches any other property: `location`,
 * `write.metadata.path`, `write.object-storage.path`, `provider` and the like move files outside
 * the tenant's root or change who owns the table.
 */

const ALL_KEYS = [...new Set(Object.values(ALLOWED_PROPERTIES).flatMap((p) => Object.keys(p)))];

const formatOf = (key: string): Format | undefined => (key in ALLOWED_PROPERTIES.iceberg ? 'iceberg' : key in ALLOWED_PROPERTIES.delta ? 'delta' : undefined);

/** HOCON reads `write.merge.mode = x` unquoted as nested objects: flattened back into the dotted key. */
function flatten(value: unknown, prefix = ''): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flatten(v, key));
    else out[key] = v;
  }
  return out;
}

const propertyValue = z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v));

/** The two keys every `target` section that creates a table has (spread into its z.object). */
export const tableShapeKeys = {
  'partition-by': z
    .array(z.string())
    .superRefine((fields, ctx) => {
      const seen = new Map<string, number>();
      const timed = new Map<string, string>();
      fields.forEach((text, i) => {
        const f = parsePartitionField(text);
        if ('problem' in f) return ctx.addIssue({ code: 'custom', path: [i], message: f.problem });
        const canon = partitionText(f).toLowerCase();
        if (seen.has(canon)) ctx.addIssue({ code: 'custom', path: [i], message: `repeats partition-by[${seen.get(canon)}]` });
        seen.set(canon, i);
        if ((TIME_TRANSFORMS as readonly string[]).includes(f.kind)) {
          const other = timed.get(f.column.toLowerCase());
          // Iceberg refuses a spec with two time transforms of one column (they are redundant).
          if (other) ctx.addIssue({ code: 'custom', path: [i], message: `${f.column} is already partitioned by ${other}; one time transform per column` });
          timed.set(f.column.toLowerCase(), partitionText(f));
        }
      });
    })
    .optional()
    .describe(
      'How the table is partitioned when it is created: columns (identity) and Iceberg transforms years(c), months(c), days(c), hours(c), bucket(N, c). Delta tables take columns only. An existing table with another spec is refused (78); see docs/table-shape.md.',
    ),
  'table-properties': z
    .preprocess((v) => flatten(v), z.record(z.string(), propertyValue))
    .superRefine((props, ctx) => {
      for (const [key, value] of Object.entries(props)) {
        const format = formatOf(key);
        if (!format) {
          const near = closest(key, ALL_KEYS);
          ctx.addIssue({
            code: 'custom',
            path: [key],
            message: `is not a table property a job may set${near ? `; did you mean "${near}"?` : ''} (allowed: ${ALL_KEYS.join(', ')})`,
          });
          continue;
        }
        const problem = ALLOWED_PROPERTIES[format][key]!(value);
        if (problem) ctx.addIssue({ code: 'custom', path: [key], message: `${JSON.stringify(value)} ${problem}` });
      }
    })
    .optional()
    .describe(
      'Table properties from an allow-list (values checked): Iceberg format-version, write.merge.mode, write.update.mode, write.delete.mode, write.target-file-size-bytes, …; Delta delta.enableDeletionVectors, delta.enableChangeDataFeed, delta.checkpointInterval, …. Set when the table is created; on an existing table a differing one is set by the run (format-version: refused, 78); see docs/table-shape.md.',
    ),
};

/** The keys as a template's spec holds them. */
export interface TableShapeSpec {
  readonly 'partition-by'?: readonly string[] | undefined;
  readonly 'table-properties'?: Readonly<Record<string, string>> | undefined;
}

/**
 * The table's shape for `format`: the config's fields (or `defaults`, the template's own spec) and
 * properties, refused at their paths (78) where the format cannot have them: a Delta table takes
 * identity columns only, Spark's table writer has no truncate transform, and each property belongs
 * to one format.
 */
export function tableShape(spec: TableShapeSpec, format: Format, defaults: readonly PartitionField[] = [], section = 'target'): TableShape {
  const issues: { path: string; message: string }[] = [];
  const configured = spec['partition-by'] !== undefined;
  const at = (i: number) => `${section}.partition-by[${i}]`;
  const fields: PartitionFieldAt[] = configured
    ? spec['partition-by']!.map((text, i) => {
        const f = parsePartitionField(text);
        if ('problem' in f) throw new Error(`unchecked partition field ${text}`); // the schema refused it
        return { field: f, path: at(i) };
      })
    : defaults.map((field) => ({ field, path: `${section}.table` }));
  for (const { field, path } of fields) {
    if (field.kind === 'truncate')
      issues.push({
        path,
        message: `truncate(${field.width}, ${field.column}) cannot be created through Spark Connect's table writer (it has no truncate transform), on ${format} as on any format; partition by bucket(N, ${field.column}) or a column`,
      });
    else if (format === 'delta' && field.kind !== 'identity')
      issues.push({
        path,
        message: `${partitionText(field)} is a partition transform, and Delta tables are partitioned by columns only (identity); partition by a column the rows carry (e.g. a date column)`,
      });
  }
  const properties: Record<string, string> = {};
  for (const [key, value] of Object.entries(spec['table-properties'] ?? {})) {
    const owner = formatOf(key);
    if (owner && owner !== format)
      issues.push({ path: `${section}.table-properties.${key}`, message: `is a property of ${owner} tables, and this table is ${format}` });
    else properties[key] = value;
  }
  if (issues.length) throw new ConfigError(issues);
  return Object.freeze({
    partitionBy: Object.freeze(fields),
    partitionByConfigured: configured,
    properties: Object.freeze(properties),
    propertiesPath: `${section}.table-properties`,
  });
}
