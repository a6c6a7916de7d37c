import { displayTable } from '../core/naming.js';
import { type Access, cmdAccess, formatCmd, formatRel, relReads } from '../spark/plan/format.js';
import type { Rel } from '../spark/plan/relations.js';
import type { JobPlan, Step } from '../jobs/template.js';

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
        step.untrusted?.length ? `(checked against the tenant read policy first: ${step.untrusted.join(', ')})` : '',
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

export function formatStep(step: Step): string {
  switch (step.kind) {
    case 'command':
    case 'stream':
      return formatCmd(step.command);
    case 'query':
      return formatRel(step.query.rel);
    case 'materialize':
      return `Materialize ${step.name} (kept for the run):\n${indent(formatRel(step.query.rel), 3)}\nthen:\n${indent(formatRel(step.check.rel), 3)}`;
    case 'ensureTable':
      return `EnsureTable ${displayTable(step.table)} at ${step.location}, if missing:\n${indent(formatCmd(step.create), 3)}`;
    case 'compareSchemas':
      return `CompareSchemas ${displayTable(step.table)} with:\n${indent(formatRel(step.source.rel), 3)}`;
    case 'probePaths':
      return `ProbePaths (lists, reads no file)\n${step.paths.map((p) => `   ${p}`).join('\n')}`;
  }
}

/** The relation of a step that Spark can explain without running anything, if it has one. */
export function explainableRel(step: Step): Rel | undefined {
  switch (step.kind) {
    case 'query':
    case 'materialize':
      return step.query.rel;
    case 'compareSchemas':
      return step.source.rel;
    case 'stream':
      return step.command.input;
    case 'command': {
      const c = step.command;
      return c.kind === 'merge' ? c.source : c.kind === 'sqlCommand' || c.kind === 'extension' ? undefined : c.input;
    }
    default:
      return undefined;
  }
}

export interface PlanAccess {
  reads: Access[];
  writes: Access[];
}

/** Every table and path the steps read and write, each once (a table's format and location merged in). */
export function planAccess(plan: JobPlan): PlanAccess {
  const reads: Access[] = [];
  const writes: Access[] = [];
  for (const step of plan.steps) {
    switch (step.kind) {
      case 'command':
      case 'stream': {
        const a = cmdAccess(step.command);
        reads.push(...a.reads);
        writes.push(...a.writes);
        break;
      }
      case 'ensureTable': {
        const format = cmdAccess(step.create).writes[0]?.format;
        writes.push({ kind: 'table', table: `${displayTable(step.table)}`, location: step.location, ...(format ? { format } : {}) });
        break;
      }
      case 'compareSchemas':
        reads.push(...relReads(step.source.rel));
        break;
      case 'probePaths':
        reads.push(...step.paths.map((path) => ({ kind: 'path' as const, path, format: 'listing' })));
        break;
      case 'query':
      case 'materialize':
        reads.push(...relReads(step.query.rel));
        break;
    }
  }
  return { reads: merged(reads), writes: merged(writes) };
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
