import { ConfigError, type LakehouseError } from '../core/errors.js';
import { SparkError } from '../spark/errors.js';
import type { Step } from '../jobs/template.js';

/**
 * A tenant's expression (`source.where`, `cdc.delete-when`, …) naming a column its input does not
 * have is the config's mistake, not bad data: Spark's answer (UNRESOLVED_COLUMN, with its whole
 * analysed plan in the text) becomes a config error (78) at the expression's path, naming the column
 * (the tenant's own word). Spark's suggestions are left out, as the tenant policy leaves them
 * out (src/spark/policy): they list what the plan touched. A column the template itself expects
 * stays the data error it is (the source broke its schema contract, 65). Steps the tenant policy
 * checks first are refused there (78, at the same paths) when they do not analyse.
 */
export function configColumnError(error: LakehouseError, step: Step | undefined, config: Record<string, unknown>): LakehouseError {
  if (!(error instanceof SparkError) || !error.errorClass?.startsWith('UNRESOLVED_COLUMN') || !step?.untrusted?.length) return error;
  const column = unquote(error.messageParameters.objectName ?? /name (`[^`]*`(?:\.`[^`]*`)*) cannot be resolved/.exec(error.serverMessage)?.[1] ?? '');
  if (!column) return error;
  const last = column.split('.').at(-1)!.toLowerCase();
  const paths = step.untrusted.filter((p) => mentions(textAt(config, p), last));
  if (paths.length === 0) return error;
  return new ConfigError(
    paths.map((path) => ({ path, message: `names column "${column}", which the input does not have (check its spelling against the source's columns)` })),
    { cause: error },
  );
}

function unquote(name: string): string {
  return name.replace(/`([^`]*)`/g, '$1');
}

/** The text of the config value at a dotted path: a string, or a parsed expression's source text. */
function textAt(config: Record<string, unknown>, path: string): string {
  let v: unknown = config;
  for (const key of path.split('.')) v = v && typeof v === 'object' && Object.hasOwn(v, key) ? (v as Record<string, unknown>)[key] : undefined;
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { text?: unknown }).text === 'string') return (v as { text: string }).text;
  return '';
}

function mentions(text: string, column: string): boolean {
  const escaped = column.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^A-Za-z0-9_])\`?${escaped}\`?([^A-Za-z0-9_]|$)`, 'i').test(text);
}
