import { ConfigError, InputMissingError, type LakehouseError } from '../../core/errors.js';
import { SparkError } from '../errors.js';

/**
 * The server's verdicts on tenant logic as the config's errors, at the config paths the logic
 * came from (the server sends them back in the error's parameters):
 *
 *  - LAKEHOUSE_TENANT_POLICY, a refusal: 78, naming what the tenant wrote that is refused;
 *  - LAKEHOUSE_TENANT_ANALYSIS, the tenant's own mistake found by Spark's analysis: 78 with the
 *    error class, the name the tenant wrote, its position in the SQL text sent and, for an unknown
 *    column, Spark's suggestions (the server gives them only when every relation named is the
 *    tenant's); a table or path that does not exist is a missing input (66).
 *
 * Anything else is returned unchanged (undefined).
 */
export function tenantPolicyError(e: unknown, opts: { position?: PositionMapper } = {}): LakehouseError | undefined {
  if (!(e instanceof SparkError)) return undefined;
  const p = e.messageParameters;
  const paths = (p.configPaths ?? '').split('\n').filter(Boolean);
  /** A position the server names, in the tenant's own text when the step can map it there. */
  const located = (configPath: string, line: number, column: number, offset?: number) =>
    opts.position?.({ configPath, line, column, ...(offset === undefined ? {} : { offset }) }) ?? { configPath, line, column };
  if (e.errorClass === 'LAKEHOUSE_TENANT_POLICY') {
    const reason = p.reason ?? 'refused';
    const issue = (path: string) => {
      let where = path;
      const text = reason.replace(/\(line (\d+), column (\d+)\)/g, (_, line: string, column: string) => {
        const at = located(path, Number(line), Number(column));
        where = at.configPath;
        return `(line ${at.line}, column ${at.column})`;
      });
      return { path: where, message: `refused by the tenant policy: ${text}` };
    };
    return new ConfigError(paths.length ? paths.map(issue) : `refused by the tenant policy: ${reason}`, { cause: e, code: 'TENANT_POLICY' });
  }
  if (e.errorClass !== 'LAKEHOUSE_TENANT_ANALYSIS') return undefined;
  const errorClass = p.errorClass ?? 'ANALYSIS_ERROR';
  const issue = (path: string) => {
    const at =
      p.line !== undefined ? located(path, Number(p.line), Number(p.column ?? 1), p.startIndex === undefined ? undefined : Number(p.startIndex)) : undefined;
    const where = at ? ` at line ${at.line}, column ${at.column}` : '';
    const what = p.objectName ? ` ${p.objectName}` : '';
    const suggestions = p.suggestions ? ` (did you mean ${p.suggestions.replace(/^\[|\]$/g, '')}?)` : '';
    return { path: at?.configPath ?? path, message: `${describeAnalysis(errorClass)}${what}${where}${suggestions} [${errorClass}]` };
  };
  const issues = (paths.length ? paths : ['']).map(issue);
  if (/^(TABLE_OR_VIEW_NOT_FOUND|PATH_NOT_FOUND)/.test(errorClass))
    return new InputMissingError(issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; '), { cause: e });
  return new ConfigError(issues, { cause: e, code: 'TENANT_ANALYSIS' });
}

/**
 * Where a position in the SQL text sent (1-based line and column, and the 0-based offset when the
 * server knows it) lies in the text the tenant wrote, and at which config path: gold rewrites the
 * tenant's table names and joins named steps into one query before sending, which shifts positions.
 * Undefined: the position stays as sent.
 */
export type PositionMapper = (sent: {
  readonly configPath: string;
  readonly line: number;
  readonly column: number;
  readonly offset?: number;
}) => { configPath: string; line: number; column: number } | undefined;

function describeAnalysis(errorClass: string): string {
  if (errorClass.startsWith('UNRESOLVED_COLUMN')) return 'names a column that does not exist:';
  if (errorClass.startsWith('TABLE_OR_VIEW_NOT_FOUND')) return 'names a table that does not exist:';
  if (errorClass.startsWith('UNRESOLVED_ROUTINE')) return 'calls a function that does not exist:';
  if (errorClass.startsWith('PARSE_SYNTAX_ERROR')) return 'is not valid SQL near';
  if (errorClass.startsWith('DATATYPE_MISMATCH')) return 'mixes types that do not fit';
  if (errorClass.startsWith('AMBIGUOUS')) return 'is ambiguous:';
  return 'does not analyse';
}
