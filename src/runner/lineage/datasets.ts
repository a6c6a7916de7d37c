import type { TenantContext } from '../../core/tenant.js';
import { LAYERS, type Layer } from '../../core/naming.js';
import type { DatasetRef, JobPlan } from '../../jobs/template.js';
import { stepTouches } from '../steps/index.js';
import type { OptionValue } from '../../spark/plan/relations.js';
import { type Touch, baseTable } from '../../spark/plan/touches.js';
import type { Field } from '../../spark/types.js';
import { type DatasetId, jdbcDataset, kafkaDatasets, locationDataset } from './naming.js';

/**
 * The datasets of a run, derived from its plan steps for every template alike: what each step's
 * relations read (catalog tables, files, JDBC tables, Kafka topics) and what its commands write.
 * Nothing here looks at a template's name; SQL text names the tables its `sql` tag holds.
 */

export interface PlanDataset {
  readonly id: DatasetId;
  /** The table or path as the plan names it: what a template's column hook and the schema lookup use. */
  readonly ref?: DatasetRef;
  /** For a catalog table at a known location: the table's name, an OpenLineage symlink. */
  readonly symlink?: DatasetId;
  readonly format?: string;
  /** Columns the plan itself declares (a source's schema). */
  readonly fields?: readonly Field[];
}

export interface PlanDatasets {
  readonly inputs: readonly PlanDataset[];
  readonly outputs: readonly PlanDataset[];
}

export interface NamingContext {
  readonly tenant: TenantContext;
  /** `lineage.catalog-namespaces` of the platform config. */
  readonly catalogNamespaces: Readonly<Record<string, string>>;
}

interface Found {
  readonly key: string;
  readonly dataset: PlanDataset;
}

export function planDatasets(plan: JobPlan, naming: NamingContext): PlanDatasets {
  const reads: Found[] = [];
  const writes: Found[] = [];
  for (const step of plan.steps) {
    const touched = stepTouches(step);
    for (const t of touched.reads) reads.push(...touchDatasets(t, 'read', naming));
    for (const t of touched.writes) writes.push(...touchDatasets(t, 'write', naming));
  }
  // What the template declares beyond its steps.
  const declared = plan.lineage?.datasets;
  const found = (ref: DatasetRef): Found => (ref.kind === 'table' ? tableDataset(ref.table.split('.'), naming) : pathDataset(ref.path));
  for (const ref of declared?.inputs ?? []) reads.push(found(ref));
  for (const ref of declared?.outputs ?? []) writes.push(found(ref));
  const outputs = merged(writes);
  const written = new Set(outputs.map((o) => o.key));
  // A target a step also reads (a MERGE's own table, a schema comparison) is an output, not an input.
  const inputs = merged(reads).filter((i) => !written.has(i.key));
  return { inputs: inputs.map((f) => f.dataset), outputs: outputs.map((f) => f.dataset) };
}

/** The dataset a template's `DatasetRef` names, as the plan's own datasets are named. */
export function refDataset(ref: DatasetRef, naming: NamingContext, location?: string): PlanDataset {
  return ref.kind === 'table' ? tableDataset(ref.table.split('.'), naming, location).dataset : pathDataset(ref.path).dataset;
}

export function refKey(ref: DatasetRef): string {
  return ref.kind === 'table' ? `table:${ref.table}` : `path:${ref.path.replace(/\/+$/, '')}`;
}

/** The datasets one touch of a plan node names; `role` says which Kafka option holds its topics. */
function touchDatasets(t: Touch, role: 'read' | 'write', naming: NamingContext): Found[] {
  switch (t.kind) {
    case 'table':
      return [tableDataset(t.parts, naming, t.location, t.format)];
    // Lists paths, reads no data: the step that reads them names them.
    case 'listing':
      return [];
    case 'source': {
      if (t.format === 'jdbc') {
        const jdbc = jdbcFound(t.options, t.schema);
        return jdbc ? [jdbc] : [];
      }
      if (t.format === 'kafka') return kafka(t.options, naming, role === 'read' ? 'subscribe' : 'topic');
      // Partitions read under a base path are one dataset: the directory the table's files live in;
      // so is a partition's folder written whole (parquet bronze's `<table>/_snapshot_date=<date>`).
      const base = role === 'read' ? plain(t.options.basePath) : undefined;
      const fields = t.schema ? ddlFields(t.schema) : undefined;
      return (base !== undefined ? [base] : role === 'write' ? t.paths.map(partitionedRoot) : t.paths).map((p) => pathDataset(p, t.format, fields));
    }
  }
}

/** The folder a Hive-style partition folder (`…/<column>=<value>`, nested or not) belongs to. */
function partitionedRoot(path: string): string {
  return path.replace(/(\/[A-Za-z_][A-Za-z0-9_]*=[^/]*)+\/?$/, '');
}

/** A string option; a secret (never a name) or a missing one is `undefined`. */
function plain(v: OptionValue | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function jdbcFound(options: Readonly<Record<string, OptionValue>>, schema?: string): Found | undefined {
  const url = plain(options.url);
  const table = plain(options.dbtable);
  // A `query` source is the tenant's SQL: its tables are not parsed out of it (and its text, which
  // may hold literals, never goes into an event).
  if (url === undefined || table === undefined) return undefined;
  const id = jdbcDataset(url, table);
  if (!id) return undefined;
  const fields = schema ? ddlFields(schema) : undefined;
  return { key: `jdbc:${id.namespace}/${id.name}`, dataset: { id, format: 'jdbc', ...(fields ? { fields } : {}) } };
}

function kafka(options: Readonly<Record<string, OptionValue>>, _naming: NamingContext, topicKey: 'subscribe' | 'topic'): Found[] {
  const servers = plain(options['kafka.bootstrap.servers']);
  const topics = plain(options[topicKey]);
  if (servers === undefined || topics === undefined) return [];
  return kafkaDatasets(
    servers,
    topics
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
  ).map((id) => ({ key: `kafka:${id.namespace}/${id.name}`, dataset: { id, format: 'kafka' } }));
}

function pathDataset(path: string, format?: string, fields?: readonly Field[]): Found {
  const ref: DatasetRef = { kind: 'path', path: path.replace(/\/+$/, '') };
  return { key: refKey(ref), dataset: { id: locationDataset(ref.path), ref, ...(format ? { format } : {}), ...(fields ? { fields } : {}) } };
}

/**
 * A catalog table. At a known location (given by the plan, or the tenant's layout for its own
 * layers) it is named by that location, with the table's name as a symlink, as Spark's OpenLineage
 * integration names Iceberg and Delta tables; elsewhere (a shared namespace) by its catalog name.
 */
function tableDataset(named: readonly string[], naming: NamingContext, location?: string, format?: string): Found {
  // An Iceberg metadata table (`<table>.snapshots`) is a read of its table's metadata, not a dataset.
  const parts = baseTable(named);
  const table = parts.join('.');
  const ref: DatasetRef = { kind: 'table', table };
  const [catalog, ...rest] = parts;
  const catalogNs =
    (catalog !== undefined && Object.hasOwn(naming.catalogNamespaces, catalog) ? naming.catalogNamespaces[catalog] : undefined) ?? catalog ?? '';
  const byName: DatasetId = { namespace: catalogNs, name: rest.join('.') };
  const at = location ?? tenantLocation(parts, naming.tenant);
  const dataset: PlanDataset = at
    ? { id: locationDataset(at), ref, symlink: byName, ...(format ? { format } : {}) }
    : { id: byName, ref, ...(format ? { format } : {}) };
  return { key: refKey(ref), dataset };
}

/** `<storage-root>/<layer>/<table>` for the tenant's own `<catalog>.<tenant>_<layer>.<table>`. */
function tenantLocation(parts: readonly string[], tenant: TenantContext): string | undefined {
  if (parts.length !== 3) return undefined;
  const layer = LAYERS.find((l: Layer) => parts[1] === tenant.namespace(l));
  if (!layer) return undefined;
  try {
    return tenant.location(layer, parts[2]!);
  } catch {
    return undefined;
  }
}

function merged(list: Found[]): Found[] {
  const byKey = new Map<string, Found>();
  for (const f of list) {
    const seen = byKey.get(f.key);
    if (!seen) {
      byKey.set(f.key, f);
      continue;
    }
    // The first mention names it; later ones add what it lacked (a location, a format, a schema).
    const a = seen.dataset;
    const b = f.dataset;
    const better = !a.symlink && b.symlink ? b : a;
    byKey.set(f.key, {
      key: f.key,
      dataset: {
        ...better,
        ...((a.format ?? b.format) ? { format: (a.format ?? b.format)! } : {}),
        ...((a.fields ?? b.fields) ? { fields: (a.fields ?? b.fields)! } : {}),
      },
    });
  }
  return [...byKey.values()];
}

/** The columns of a DDL schema string (`id BIGINT, name STRING, m MAP<STRING,INT>`). */
export function ddlFields(ddl: string): Field[] | undefined {
  const out: Field[] = [];
  let depth = 0;
  let start = 0;
  const parts: string[] = [];
  for (let i = 0; i < ddl.length; i++) {
    const c = ddl[i];
    if (c === '<' || c === '(') depth++;
    else if (c === '>' || c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(ddl.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(ddl.slice(start));
  for (const p of parts) {
    const m = /^\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s+(\S[\s\S]*?)\s*$/.exec(p);
    if (!m) return undefined;
    const name = m[1]!.startsWith('`') ? m[1]!.slice(1, -1).replaceAll('``', '`') : m[1]!;
    out.push({ name, type: m[2]!.replace(/\s+NOT\s+NULL$/i, '').toLowerCase() });
  }
  return out;
}
