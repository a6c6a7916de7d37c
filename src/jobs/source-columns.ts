import { ConfigError, DataError } from '../core/errors.js';
import { closest } from '../core/config/closest.js';
import type { Query } from '../spark/plan/query.js';
import type { Step } from './template.js';

/**
 * The prefix every internal column of the cdc, gold and vault plans starts with (`__lake_hash`, …):
 * reserved, so a source or config column of it is refused.
 */
export const LAKE_INTERNAL_PREFIX = '__lake_';

/**
 * The column names a template gives its own columns: the ones it adds to what it writes and the
 * ones its plans use internally. Source data is not trusted for shape, and a source column of one
 * of these names changes what a plan means (Spark replaces a column of the same name, or resolves
 * a name to the tenant's column instead of the template's), so a source that has one is refused.
 */
export interface ReservedColumns {
  /** Exact names (compared case-insensitively, as Spark resolves them). */
  readonly names: readonly string[];
  /** Name prefixes (case-insensitive): every internal column of the template starts with one. */
  readonly prefixes: readonly string[];
}

/** The names of `columns` that `reserved` holds, as the source spells them. */
export function reservedIn(columns: readonly string[], reserved: ReservedColumns): string[] {
  const names = new Set(reserved.names.map((n) => n.toLowerCase()));
  const prefixes = reserved.prefixes.map((p) => p.toLowerCase());
  return columns.filter((c) => {
    const lower = c.toLowerCase();
    return names.has(lower) || prefixes.some((p) => lower.startsWith(p));
  });
}

/** A column the config names that the source must have, at the config path that names it. */
export interface RequiredColumn {
  readonly path: string;
  readonly column: string;
}

/**
 * The required columns the source lacks, as config issues: each at its path, with the source's own
 * closest column as "did you mean" (compared case-insensitively, as Spark resolves names).
 */
export function missingColumns(columns: readonly string[], required: readonly RequiredColumn[], sourceName: string): ConfigError | undefined {
  const have = new Set(columns.map((c) => c.toLowerCase()));
  const issues = required
    .filter((r) => !have.has(r.column.toLowerCase()))
    .map((r) => {
      const near = closest(r.column, columns);
      return { path: r.path, message: `column "${r.column}" is not a column of ${sourceName}${near ? `; did you mean "${near}"?` : ''}` };
    });
  return issues.length ? new ConfigError(issues) : undefined;
}

/**
 * A step that analyses the source's columns (no row is read) and fails the run before anything is
 * written: 78 at their paths when a column the config names (a key, a sequence, a grain) is not
 * one of them, 65 at `configPath` when one is named like the template's own.
 */
export function checkSourceColumns(opts: {
  readonly id?: string;
  readonly source: Query;
  readonly sourceName: string;
  readonly configPath: string;
  readonly template: string;
  readonly reserved: ReservedColumns;
  readonly required?: readonly RequiredColumn[];
}): Step {
  const { reserved } = opts;
  const what = [...reserved.names, ...reserved.prefixes.map((p) => `${p}…`)].join(', ');
  const required = opts.required ?? [];
  return {
    kind: 'checkColumns',
    id: opts.id ?? 'check-source-columns',
    title: `Check the columns of ${opts.sourceName}: ${[
      ...(required.length ? [`the ${required.length} the config names are there`] : []),
      ...(what ? [`none is named like ${opts.template}'s own (${what})`] : []),
    ].join(', and ')}`,
    source: opts.source,
    interpret: (columns) => {
      const names = columns.map((c) => c.name);
      const missing = missingColumns(names, required, opts.sourceName);
      if (missing) return { fail: missing };
      const found = reservedIn(names, reserved);
      if (!found.length) return {};
      return {
        fail: new DataError(
          `${opts.configPath}: ${opts.sourceName} has column(s) ${found.map((c) => `"${c}"`).join(', ')} named like ${opts.template}'s own columns (${what}); nothing was written`,
          {
            code: 'SOURCE_COLUMN_RESERVED',
            path: opts.configPath,
            hint: 'rename the column in the source (names are compared case-insensitively, as Spark resolves them)',
          },
        ),
      };
    },
  };
}
