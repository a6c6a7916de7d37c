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
  if (e.errorClass === 'LAKEHOUSE_TENANT_POLICY') {
    const reason = p.reason ?? 'refused';
    const message = `refused by the tenant policy: ${reason}`;
    return new ConfigError(paths.length ? paths.map((path) => ({ path, message })) : message, { cause: e, code: 'TENANT_POLICY' });
  }
  if (e.errorClass !== 'LAKEHOUSE_TENANT_ANALYSIS') return undefined;
  const errorClass = p.errorClass ?? 'ANALYSIS_ERROR';
  const position = p.line !== undefined ? { line: Number(p.line), column: Number(p.column ?? 1) } : undefined;
  const issue = (path: string) => {
    const at = position ? (opts.position?.(path, position) ?? position) : undefined;
    const where = at ? ` at line ${at.line}, column ${at.column}` : '';
    const what = p.objectName ? ` ${p.objectName}` : '';
    const suggestions = p.suggestions ? ` (did you mean ${p.suggestions.replace(/^\[|\]$/g, '')}?)` : '';
    return { path, message: `${describeAnalysis(errorClass)}${what}${where}${suggestions} [${errorClass}]` };
  };
  const issues = (paths.length ? paths : ['']).map(issue);
  if (/^(TABLE_OR_VIEW_NOT_FOUND|PATH_NOT_FOUND)/.test(errorClass))
    return new InputMissingError(issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; '), { cause: e });
  return new ConfigError(issues, { cause: e, code: 'TENANT_ANALYSIS' });
}

/**
 * Where a position in the SQL text sent lies in the text the tenant wrote (gold's rewrite of its
 * table names shifts positions): given the config path and the position sent, the original one.
 */
export type PositionMapper = (configPath: string, sent: { line: number; column: number }) => { line: number; column: number } | undefined;

function describeAnalysis(errorClass: string): string {
  if (errorClass.startsWith('UNRESOLVED_COLUMN')) return 'names a column that does not exist:';
  if (errorClass.startsWith('TABLE_OR_VIEW_NOT_FOUND')) return 'names a table that does not exist:';
  if (errorClass.startsWith('UNRESOLVED_ROUTINE')) return 'calls a function that does not exist:';
  if (errorClass.startsWith('PARSE_SYNTAX_ERROR')) return 'is not valid SQL near';
  if (errorClass.startsWith('DATATYPE_MISMATCH')) return 'mixes types that do not fit';
  if (errorClass.startsWith('AMBIGUOUS')) return 'is ambiguous:';
  return 'does not analyse';
}
