import type { Cmd } from './commands.js';
import type { OptionValue, Rel } from './relations.js';

/**
 * What plan nodes read and write, found by one walk of the relation and command trees. `plan` and
 * `validate` list it for people (src/app/plan-view.ts) and lineage names it as OpenLineage datasets
 * (src/runner/lineage/datasets.ts): each maps a touch to its own shape, neither walks the trees.
 * SQL text (a `sql` relation or command) touches the tables its `sql` tag names (sql.ts).
 */
export type Touch =
  /** A catalog table, with what the node says of its format and location. */
  | { readonly kind: 'table'; readonly parts: readonly string[]; readonly format?: string; readonly location?: string }
  /**
   * A data source or sink by format: files at paths, or a JDBC table or Kafka topics named by its
   * options (no paths). `schema` is a read's declared DDL schema.
   */
  | {
      readonly kind: 'source';
      readonly format: string;
      readonly paths: readonly string[];
      readonly options: Readonly<Record<string, OptionValue>>;
      readonly schema?: string;
    }
  /** Paths only listed, never read (a probe for what exists). */
  | { readonly kind: 'listing'; readonly paths: readonly string[] };

export interface Touches {
  readonly reads: readonly Touch[];
  readonly writes: readonly Touch[];
}

export const NO_TOUCHES: Touches = { reads: [], writes: [] };

/** Everything a relation reads, leaves first from left to right. */
export function relTouches(rel: Rel): Touch[] {
  switch (rel.kind) {
    case 'table':
      return [{ kind: 'table', parts: rel.parts }];
    case 'source':
      return [{ kind: 'source', format: rel.format, paths: rel.paths, options: rel.options, ...(rel.schema ? { schema: rel.schema } : {}) }];
    // Rows an earlier step materialised: that step's relation names what they were read from.
    case 'materialized':
    case 'range':
      return [];
    case 'sql':
      return rel.reads.map((parts) => ({ kind: 'table', parts }));
    // A server plugin's relation names the tables it reads.
    case 'extension':
      return rel.reads.map((parts) => ({ kind: 'table', parts }));
    case 'join':
    case 'union':
      return [...relTouches(rel.left), ...relTouches(rel.right)];
    default:
      return relTouches(rel.input);
  }
}

/** What a command reads and writes. */
export function cmdTouches(cmd: Cmd): Touches {
  switch (cmd.kind) {
    case 'sqlCommand':
      return { reads: cmd.reads.map((parts) => ({ kind: 'table', parts })), writes: cmd.writes.map((parts) => ({ kind: 'table', parts })) };
    case 'write':
      return {
        reads: relTouches(cmd.input),
        writes: [
          cmd.path === undefined && cmd.table
            ? { kind: 'table', parts: cmd.table, format: cmd.format }
            : { kind: 'source', format: cmd.format, paths: cmd.path === undefined ? [] : [cmd.path], options: cmd.options },
        ],
      };
    case 'writeV2':
      return {
        reads: relTouches(cmd.input),
        writes: [
          {
            kind: 'table',
            parts: cmd.table,
            ...(cmd.provider ? { format: cmd.provider } : {}),
            ...(cmd.properties.location ? { location: cmd.properties.location } : {}),
          },
        ],
      };
    case 'merge':
      return { reads: relTouches(cmd.source), writes: [{ kind: 'table', parts: cmd.target }] };
    case 'createView':
      return { reads: relTouches(cmd.input), writes: [] };
    case 'writeStream':
      return { reads: relTouches(cmd.input), writes: [{ kind: 'table', parts: cmd.table }] };
    // A server plugin's command names the tables it reads and writes.
    case 'extension':
      return { reads: cmd.reads.map((parts) => ({ kind: 'table', parts })), writes: cmd.writes.map((parts) => ({ kind: 'table', parts })) };
  }
}

/** The tables Iceberg derives from a table's metadata (`<table>.snapshots`): a read of that table. */
const ICEBERG_METADATA_TABLES: ReadonlySet<string> = new Set([
  'history',
  'metadata_log_entries',
  'snapshots',
  'entries',
  'files',
  'data_files',
  'delete_files',
  'manifests',
  'partitions',
  'refs',
  'position_deletes',
  'all_data_files',
  'all_delete_files',
  'all_files',
  'all_manifests',
  'all_entries',
  // Its changelog (the rows its snapshots added and removed).
  'changes',
]);

/** The table a name refers to: an Iceberg metadata table's own table, else the name itself. */
export function baseTable(parts: readonly string[]): readonly string[] {
  return parts.length === 4 && ICEBERG_METADATA_TABLES.has(parts[3]!.toLowerCase()) ? parts.slice(0, 3) : parts;
}
