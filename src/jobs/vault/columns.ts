import { z } from 'zod';
import { columnName } from '../../core/config/validate.js';
import { LOAD_DATE, RECORD_SOURCE } from './load.js';
import { LAKE_INTERNAL_PREFIX, reservedIn } from '../source-columns.js';

/** Column names the vault templates write themselves; a configured column may not take one. */
export const RESERVED_COLUMNS = [LOAD_DATE, RECORD_SOURCE] as const;

/** A list of distinct column names (business keys, payload). */
export const columnList = (what: string) =>
  z
    .array(columnName())
    .min(1, `needs at least one ${what} column`)
    .superRefine((cols, ctx) =>
      cols.forEach((c, i) => {
        if (cols.findIndex((x) => x.toLowerCase() === c.toLowerCase()) !== i) ctx.addIssue({ code: 'custom', path: [i], message: `"${c}" appears twice` });
      }),
    );

/**
 * Columns a vault table gets from config must be distinct from each other, from the columns the
 * template writes and from the plans' internal ones (`__lake_…`: a payload column of such a name was
 * replaced by the plan's own, e.g. `__lake_prev` by the previous hashdiff, and stored NULL).
 * Spark's column names are case-insensitive, and so is this check.
 */
export function checkDistinctColumns(
  named: readonly { path: (string | number)[]; name: string }[],
  ctx: z.RefinementCtx,
  reserved: readonly string[] = RESERVED_COLUMNS,
): void {
  const seen = new Map<string, string>();
  for (const { path, name } of named) {
    const lower = name.toLowerCase();
    if (reservedIn([name], { names: reserved, prefixes: [LAKE_INTERNAL_PREFIX] }).length)
      ctx.addIssue({
        code: 'custom',
        path,
        message: `"${name}" is a column the template writes or uses itself (${[...reserved, `${LAKE_INTERNAL_PREFIX}…`].join(', ')})`,
      });
    else if (seen.has(lower)) ctx.addIssue({ code: 'custom', path, message: `"${name}" is also ${seen.get(lower)}: a vault table's columns must be distinct` });
    else seen.set(lower, path.join('.'));
  }
}
