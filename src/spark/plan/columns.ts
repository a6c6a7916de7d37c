import type { Expr } from './expressions.js';
import type { Rel } from './relations.js';

/**
 * The columns a relation produces, where the nodes alone say it (aliases, column references,
 * joins and drops of those); undefined where only the server knows (a table, a source, SQL text,
 * a star). A query step's declared columns are checked against this when the plan is built.
 */
export function outputColumns(rel: Rel): readonly string[] | undefined {
  switch (rel.kind) {
    case 'project':
      return allNamed(rel.exprs);
    case 'aggregate':
      return allNamed([...rel.groupBy, ...rel.aggregates]);
    case 'filter':
    case 'sort':
    case 'limit':
    case 'alias':
    case 'deduplicate':
      return outputColumns(rel.input);
    case 'join': {
      const left = outputColumns(rel.left);
      if (rel.type === 'left_semi' || rel.type === 'left_anti') return left;
      const right = outputColumns(rel.right);
      if (!left || !right) return undefined;
      const using = new Set((rel.using ?? []).map((c) => c.toLowerCase()));
      return [...left, ...right.filter((c) => !using.has(c.toLowerCase()))];
    }
    case 'union': {
      const left = outputColumns(rel.left);
      const right = outputColumns(rel.right);
      if (!left || !right) return undefined;
      return rel.allowMissing ? [...left, ...right.filter((c) => !left.some((l) => l.toLowerCase() === c.toLowerCase()))] : left;
    }
    case 'withColumns': {
      const input = outputColumns(rel.input);
      if (!input) return undefined;
      const out = [...input];
      for (const [name] of rel.columns) if (!out.some((c) => c.toLowerCase() === name.toLowerCase())) out.push(name);
      return out;
    }
    case 'drop': {
      const input = outputColumns(rel.input);
      const dropped = new Set(rel.columns.map((c) => c.toLowerCase()));
      return input?.filter((c) => !dropped.has(c.toLowerCase()));
    }
    case 'range':
      return ['id'];
    default:
      return undefined;
  }
}

function allNamed(exprs: readonly Expr[]): string[] | undefined {
  const names = exprs.map(exprName);
  return names.every((n): n is string => n !== undefined) ? names : undefined;
}

function exprName(e: Expr): string | undefined {
  if (e.kind === 'alias') return e.name;
  if (e.kind === 'col') return e.parts.at(-1);
  return undefined;
}
