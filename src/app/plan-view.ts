import { name } from '../spark/plan/format.js';
import { type Touch, baseTable } from '../spark/plan/touches.js';
import type { JobPlan } from '../jobs/template.js';
import { formatStep, stepTouches } from '../runner/steps/index.js';

export { formatStep } from '../runner/steps/index.js';

/**
 * What `plan` and `validate` show people: each step as an operator tree (src/spark/plan/format.ts),
 * and the tables and paths a run would read and write, derived from the plan nodes of every step
 * (not per template). The caller scrubs secrets from the text as from every output.
 */

/** One block per step: `[n/N] id: title`, then its plan indented. */
export function formatPlan(plan: JobPlan, explained?: ReadonlyMap<string, string>): string {
  return plan.steps
    .map((step, i) => {
      const head = `[${i + 1}/${plan.steps.length}] ${step.id}: ${step.title}`;
      const notes = [
        step.when ? '(runs only when the results of earlier steps call for it)' : '',
        step.untrusted?.length ? `(its config logic is judged by the server's tenant policy: ${step.untrusted.join(', ')})` : '',
      ].filter(Boolean);
      const explain = explained?.get(step.id);
      return [head, ...notes.map((n) => `  ${n}`), indent(formatStep(step)), ...(explain ? ['  Spark explain:', indent(explain.trimEnd(), 4)] : [])].join('\n');
    })
    .join('\n\n');
}

function indent(text: string, n = 2): string {
  return text
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
}

export interface PlanAccess {
  reads: Access[];
  writes: Access[];
}

/** A table or files a plan touches: what `validate` and `plan` list. */
export type Access =
  | { readonly kind: 'table'; readonly table: string; readonly format?: string; readonly location?: string }
  | { readonly kind: 'path'; readonly path: string; readonly format: string };

/** Every table and path the steps read and write, each once (a table's format and location merged in). */
export function planAccess(plan: JobPlan): PlanAccess {
  const touched = plan.steps.map(stepTouches);
  return { reads: merged(touched.flatMap((t) => t.reads.flatMap(access))), writes: merged(touched.flatMap((t) => t.writes.flatMap(access))) };
}

/** A JDBC table or Kafka topics (a source without paths) are not listed: their options name them. */
function access(t: Touch): Access[] {
  switch (t.kind) {
    case 'table':
      // An Iceberg metadata table (`<table>.refs`) is a read of its table.
      return [{ kind: 'table', table: name(baseTable(t.parts)), ...(t.format ? { format: t.format } : {}), ...(t.location ? { location: t.location } : {}) }];
    case 'source':
      return t.paths.map((path) => ({ kind: 'path', path, format: t.format }));
    case 'listing':
      return t.paths.map((path) => ({ kind: 'path', path, format: 'listing' }));
  }
}

function merged(list: Access[]): Access[] {
  const byKey = new Map<string, Access>();
  for (const a of list) {
    const key = a.kind === 'table' ? `t:${a.table}` : `p:${a.path}`;
    const seen = byKey.get(key);
    if (!seen) byKey.set(key, a);
    else if (seen.kind === 'table' && a.kind === 'table') byKey.set(key, { ...seen, ...stripUndefined(a) });
    else if (seen.kind === 'path' && a.kind === 'path' && seen.format === 'listing') byKey.set(key, a);
  }
  return [...byKey.values()];
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Plain lines for people: `reads  table lake.x.y (iceberg) at s3a://…`. */
export function formatAccess(access: PlanAccess): string {
  const line = (verb: string, a: Access) =>
    a.kind === 'table'
      ? `  ${verb} table ${a.table}${a.format ? ` (${a.format})` : ''}${a.location ? ` at ${a.location}` : ''}`
      : `  ${verb} path  ${a.path} (${a.format})`;
  return [...access.reads.map((a) => line('reads ', a)), ...access.writes.map((a) => line('writes', a))].join('\n');
}
