import { isConfigExpr } from '../plan/config-expression.js';
import type { Expr } from '../plan/expressions.js';
import type { Rel } from '../plan/relations.js';
import { inputs } from '../plan/rewrite.js';

/**
 * Tenant logic, as the server judges it: the parts of a relation that carry config logic, each
 * wrapped in a `tenantLogic` node (compiled to the lakehouse.jobs.TenantLogic plugin relation) with
 * the config paths a refusal or an analysis error is reported at. The server analyses the wrapped
 * relation, judges the analysed tree and runs exactly what it judged (docs/security-policy.md).
 */

/**
 * The parts of a relation that carry config logic, each with everything below it: the topmost
 * nodes whose own expressions hold an expression made from config (`configExpr` marks them), and
 * SQL text. Spark resolves a node against its inputs only, so a config expression can name nothing
 * outside its subtree, and what the rest of the plan adds is the template's own nodes. A relation
 * where no such node is found (config logic put somewhere unmarked) is tenant logic as a whole.
 */
export function configSubtrees(rel: Rel): Rel[] {
  const found: Rel[] = [];
  const visit = (r: Rel): void => {
    if (r.kind === 'tenantLogic') return;
    if (r.kind === 'sql' || ownExpressions(r).some(holdsConfigExpr)) found.push(r);
    else inputs(r).forEach(visit);
  };
  visit(rel);
  return found.length ? found : [rel];
}

/** `rel` with each part that carries config logic wrapped as tenant logic of `configPaths`. */
export function wrapTenantLogic(rel: Rel, configPaths: readonly string[]): Rel {
  if (holdsTenantLogic(rel)) return rel;
  const parts = new Set(configSubtrees(rel));
  const wrap = (r: Rel): Rel => {
    if (r.kind === 'tenantLogic') return r;
    if (parts.has(r)) return Object.freeze({ kind: 'tenantLogic', input: r, configPaths: Object.freeze([...configPaths]) });
    switch (r.kind) {
      case 'join':
      case 'union': {
        const [left, right] = [wrap(r.left), wrap(r.right)];
        return left === r.left && right === r.right ? r : Object.freeze({ ...r, left, right });
      }
      default: {
        if (!('input' in r)) return r;
        const input = wrap(r.input);
        return input === r.input ? r : Object.freeze({ ...r, input });
      }
    }
  };
  return wrap(rel);
}

function holdsTenantLogic(rel: Rel): boolean {
  return rel.kind === 'tenantLogic' || inputs(rel).some(holdsTenantLogic);
}

/** JDBC reads the relation declares itself (a template's source): the server allows no more. */
export function jdbcSources(rel: Rel): number {
  return (rel.kind === 'source' && rel.format === 'jdbc' ? 1 : 0) + inputs(rel).reduce((n, c) => n + jdbcSources(c), 0);
}

/** The expressions of a node itself, not of its inputs. */
function ownExpressions(rel: Rel): unknown[] {
  switch (rel.kind) {
    case 'filter':
      return [rel.condition];
    case 'project':
      return [...rel.exprs];
    case 'withColumns':
      return rel.columns.map(([, x]) => x);
    case 'join':
      return rel.on ? [rel.on] : [];
    case 'aggregate':
      return [...rel.groupBy, ...rel.aggregates];
    case 'sort':
      return [...rel.orders];
    default:
      return [];
  }
}

function holdsConfigExpr(node: unknown, depth = 0): boolean {
  if (typeof node !== 'object' || node === null || depth > 500) return false;
  if ('kind' in node && isConfigExpr(node as Expr)) return true;
  return (Array.isArray(node) ? node : Object.values(node)).some((v) => holdsConfigExpr(v, depth + 1));
}
