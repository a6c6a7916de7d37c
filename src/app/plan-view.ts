import { name } from '../spark/plan/format.js';
import { type Touch, baseTable } from '../spark/plan/touches.js';
import type { JobPlan } from '../jobs/template.js';
import { formatStep, stepTouches } from '../runner/steps/index.js';
import { jdbcDataset, kafkaNamespace } from '../runner/lineage/naming.js';
import type { OptionValue } from '../spark/plan/relations.js';

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

/**
 * A table, files, a JDBC table or Kafka topics a plan touches: what `validate` and `plan` list.
 * `at` is where a JDBC or Kafka source lives, named as lineage names it (no credentials); absent
 * when the address is a secret.
 */
export type Access =
  | { readonly kind: 'table'; readonly table: string; readonly format?: string; readonly location?: string }
  | { readonly kind: 'path'; readonly path: string; readonly format: string }
  | { readonly kind: 'jdbc'; readonly table?: string; readonly at?: string }
  | { readonly kind: 'topic'; readonly topic?: string; readonly pattern?: string; readonly at?: string };

/** Every table and path the steps read and write, each once (a table's format and location merged in). */
export function planAccess(plan: JobPlan): PlanAccess {
  const touched = plan.steps.map(stepTouches);
  return { reads: merged(touched.flatMap((t) => t.reads.flatMap(access))), writes: merged(touched.flatMap((t) => t.writes.flatMap(access))) };
}

function access(t: Touch): Access[] {
  switch (t.kind) {
    case 'table':
      // An Iceberg metadata table (`<table>.refs`) is a read of its table.
      return [{ kind: 'table', table: name(baseTable(t.parts)), ...(t.format ? { format: t.format } : {}), ...(t.location ? { location: t.location } : {}) }];
    case 'source':
      if (t.format === 'jdbc') return [jdbcAccess(t.options)];
      if (t.format === 'kafka') return kafkaAccess(t.options);
      return t.paths.map((path) => ({ kind: 'path', path, format: t.format }));
    case 'listing':
      return t.paths.map((path) => ({ kind: 'path', path, format: 'listing' }));
  }
}

const plain = (v: OptionValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** A `query` source is the tenant's SQL: listed as a query, its text never printed (it may hold literals). */
function jdbcAccess(options: Readonly<Record<string, OptionValue>>): Access {
  const url = plain(options.url);
  const table = plain(options.dbtable);
  // Named as lineage names it (`<database>[.<schema>].<table>` at `postgres://host:port`).
  const id = url === undefined ? undefined : jdbcDataset(url, table ?? '');
  return { kind: 'jdbc', ...(table !== undefined ? { table: id?.name || table } : {}), ...(id ? { at: id.namespace } : {}) };
}

/** Topics by name (`subscribe`, a sink's `topic`) or by pattern (`subscribePattern`). */
function kafkaAccess(options: Readonly<Record<string, OptionValue>>): Access[] {
  const servers = plain(options['kafka.bootstrap.servers']);
  const at = servers === undefined ? undefined : kafkaNamespace(servers);
  const where = at ? { at } : {};
  const pattern = plain(options.subscribePattern);
  if (pattern !== undefined) return [{ kind: 'topic', pattern, ...where }];
  const topics = (plain(options.subscribe) ?? plain(options.topic) ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return topics.length ? topics.map((topic) => ({ kind: 'topic', topic, ...where })) : [{ kind: 'topic', ...where }];
}

function accessKey(a: Access): string {
  switch (a.kind) {
    case 'table':
      return `t:${a.table}`;
    case 'path':
      return `p:${a.path}`;
    case 'jdbc':
      return `j:${a.at ?? ''}/${a.table ?? '(query)'}`;
    case 'topic':
      return `k:${a.at ?? ''}/${a.topic ?? a.pattern ?? ''}`;
  }
}

function merged(list: Access[]): Access[] {
  const byKey = new Map<string, Access>();
  for (const a of list) {
    const key = accessKey(a);
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
  const at = (where?: string) => (where ? ` at ${where}` : '');
  const line = (verb: string, a: Access) => {
    switch (a.kind) {
      case 'table':
        return `  ${verb} table ${a.table}${a.format ? ` (${a.format})` : ''}${at(a.location)}`;
      case 'path':
        return `  ${verb} path  ${a.path} (${a.format})`;
      case 'jdbc':
        return `  ${verb} jdbc  ${a.table ?? 'the rows of its query'}${at(a.at)}`;
      case 'topic':
        return `  ${verb} topic ${a.topic ?? (a.pattern !== undefined ? `matching ${a.pattern}` : '(named at run time)')}${at(a.at)}`;
    }
  };
  return [...access.reads.map((a) => line('reads ', a)), ...access.writes.map((a) => line('writes', a))].join('\n');
}
