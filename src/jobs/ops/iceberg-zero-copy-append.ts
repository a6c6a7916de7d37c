import { z } from 'zod';
import { ConfigError, DataError, type ErrorReport, InputMissingError } from '../../core/errors.js';
import { LAYERS, type TableName, displayTable, normaliseStorageUri, quoteName, sameLocation, tableParts } from '../../core/naming.js';
import { catalogName, name, tableName } from '../../core/config/validate.js';
import type { Extension } from '../../spark/plan/relations.js';
import { Query, extensionCommand } from '../../spark/plan/query.js';
import type { JobContext, JobPlan, Step, StepEffect, TypedRow } from '../template.js';
import { queryStep } from '../steps.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { readCommitStep } from '../tables.js';

/**
 * iceberg-zero-copy-append: append a source Iceberg table's live files to a target Iceberg table
 * by metadata only (UNION ALL, never MERGE): one commit that references the source's data files
 * and the position delete files that apply to them, at their paths; no row is read or written.
 *
 * The Iceberg table API does this, the SQL procedures cannot (docs/templates/iceberg-zero-copy-append.md
 * says what was tried), so the work is done by the project's Spark Connect server plugin
 * (spark-plugins/, lakehouse.jobs.spark.ZeroCopy*): a relation that reports the facts of both
 * tables, which this template judges, and a command that checks them again and commits.
 *
 * Refusals (target unchanged): a missing table (66); the target not at the tenant's layout, or a
 * file of the source outside the tenant's storage roots (78); schemas that differ by field id, a
 * source whose field-id counter is ahead of the target's, equality deletes, partition specs that
 * differ, format v3 (65). A source without data files skips (99); a source snapshot the target's
 * history already records appends nothing (exit 0, `committed: false`). There is no copying fallback.
 */

const TEMPLATE = 'iceberg-zero-copy-append';

/** The snapshot summary keys the plugin writes (the idempotency marker). */
export const MARKER = {
  sourceUuid: 'lakehouse-jobs.zero-copy.source-table-uuid',
  sourceSnapshot: 'lakehouse-jobs.zero-copy.source-snapshot-id',
  sourceTable: 'lakehouse-jobs.zero-copy.source-table',
  runId: 'lakehouse-jobs.zero-copy.run-id',
} as const;

/** The plugin's message types (spark-plugins/zero_copy.proto). */
export const CHECK_TYPE = 'type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCheck';
export const COMMIT_TYPE = 'type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCommit';

// ---------------------------------------------------------------------------------------------
// Config schema

const v1 = defineVersion(1, {
  sections: {
    source: z
      .object({
        table: name().describe("The source Iceberg table's name; the files of its current snapshot are appended."),
        layer: z.enum(LAYERS).default('silver').describe("The tenant's layer the source table is in: <catalog>.<tenant>_<layer>.<table>."),
        namespace: name()
          .optional()
          .describe(
            "Instead of a layer: a namespace the platform grants this tenant for reading (tenants.<id>.read-namespaces has <catalog>.<namespace>), e.g. a shared reference table's.",
          ),
      })
      .strict()
      .describe('The Iceberg table whose live data files (and the position deletes that apply to them) are appended, by metadata only.'),
    target: z
      .object({
        table: tableName().describe("The target Iceberg table's name; it must exist at <storage-root>/<layer>/<table> and must not be the source."),
        layer: z.enum(LAYERS).default('silver').describe("The tenant's layer the target table is in (default silver): <catalog>.<tenant>_<layer>.<table>."),
        catalog: catalogName().optional().describe("The Iceberg catalog of both tables; the platform's default catalog when omitted."),
      })
      .strict()
      .describe('The existing Iceberg table the source files are appended to, in one commit.'),
  },
  refine: (c, ctx) => {
    if (c.source.namespace === undefined && c.source.layer === c.target.layer && c.source.table === c.target.table)
      ctx.addIssue({ code: 'custom', path: ['target', 'table'], message: 'is the source table: a table cannot be appended to itself' });
  },
});

export type ZeroCopyAppendSpec = SpecOf<typeof v1.sections>;

// ---------------------------------------------------------------------------------------------
// Resolution: both tables in the tenant's namespaces, the roots their files may lie under

interface Resolved {
  source: TableName;
  target: TableName;
  /** `<storage-root>/<layer>/<table>`: where the target must be. */
  targetLocation: string;
  /** Where every file the target adopts must lie. */
  roots: string[];
}

export function resolve(ctx: JobContext, spec: ZeroCopyAppendSpec): Resolved {
  const catalog = ctx.catalog(spec.target.catalog, 'target.catalog');
  if (catalog.format !== 'iceberg')
    throw new ConfigError([
      { path: 'target.catalog', message: `catalog "${catalog.name}" holds ${catalog.format} tables; zero-copy append is for Iceberg tables` },
    ]);
  const target = ctx.tenant.table(catalog.name, spec.target.layer, spec.target.table);
  const ownRoots = ctx.access?.storageRoots ?? [ctx.tenant.storageRoot];
  let source: TableName;
  let roots: readonly string[] = ownRoots;
  if (spec.source.namespace !== undefined) {
    const granted = `${catalog.name}.${spec.source.namespace}`;
    if (!(ctx.access?.readNamespaces ?? []).includes(granted))
      throw new ConfigError([
        {
          path: 'source.namespace',
          message: `${granted} is not a namespace the platform grants tenant ${ctx.tenant.id} (tenants.${ctx.tenant.id}.read-namespaces)`,
        },
      ]);
    source = Object.freeze({ catalog: catalog.name, namespace: spec.source.namespace, table: spec.source.table });
    // A granted table's files lie under the granted roots; the tenant's own roots stay allowed.
    roots = [...ownRoots, ...(ctx.access?.readRoots ?? [])];
  } else {
    source = ctx.tenant.table(catalog.name, spec.source.layer, spec.source.table);
  }
  const normalised = roots.map((r) => normaliseStorageUri(r)).filter((r): r is string => r !== undefined);
  return { source, target, targetLocation: ctx.tenant.location(spec.target.layer, spec.target.table), roots: [...new Set(normalised)] };
}

/** The plugin's request: both tables by quoted name, the allowed roots, the run (recorded in the marker). */
function request(ctx: JobContext, r: Resolved, typeUrl: string): Extension {
  return {
    typeUrl,
    fields: [
      { field: 1, name: 'source', value: quoteName(tableParts(r.source)) },
      { field: 2, name: 'target', value: quoteName(tableParts(r.target)) },
      ...r.roots.map((root) => ({ field: 3, name: 'allowed_root', value: root })),
      { field: 4, name: 'run_id', value: ctx.runId },
    ],
    reads: [tableParts(r.source), tableParts(r.target)],
    writes: typeUrl === COMMIT_TYPE ? [tableParts(r.target)] : [],
  };
}

// ---------------------------------------------------------------------------------------------
// Judging the facts

/** A refusal about the tables' state (65), with the config path it concerns. */
export class ZeroCopyRefused extends DataError {
  constructor(path: string, message: string, code: string, hint?: string) {
    super(`${path}: ${message}`, { code, path, ...(hint ? { hint } : {}) });
  }
}

/** An absent table (66), with its config path. */
export class ZeroCopyTableMissing extends InputMissingError {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
  }
  override report(): ErrorReport {
    return { ...super.report(), path: this.path };
  }
}

const str = (v: unknown): string | undefined => (v === null || v === undefined ? undefined : String(v));
const num = (v: unknown): number => Number(v ?? 0);

/** What the check's row means: the first refusal, a skip, or the run's output. Exported for unit tests. */
export function judge(row: CheckRow | undefined, r: Resolved): StepEffect {
  const source = displayTable(r.source);
  const target = displayTable(r.target);
  if (!row) return { fail: new ZeroCopyRefused('source.table', 'the zero-copy check returned nothing', 'ZERO_COPY_CHECK_FAILED') };
  if (!row.source_exists) return { fail: new ZeroCopyTableMissing('source.table', `the Iceberg table ${source} does not exist`) };
  if (!row.target_exists)
    return { fail: new ZeroCopyTableMissing('target.table', `the Iceberg table ${target} does not exist (create it with the source's schema first)`) };
  const at = str(row.target_location);
  if (at === undefined || !sameLocation(at, r.targetLocation))
    return {
      fail: new ConfigError([
        {
          path: 'target.table',
          message: `${target} is at ${at ?? 'an unknown location'}, not at ${r.targetLocation} (the tenant's layout): it is not this tenant's table`,
        },
      ]),
    };
  if (num(row.outside_roots) > 0)
    // No path is named: it would be another tenant's.
    return {
      fail: new ConfigError([
        {
          path: 'source.table',
          message: `${source} references ${num(row.outside_roots)} location(s) outside the tenant's storage roots: appending files by reference would adopt files this tenant does not own`,
        },
      ]),
    };
  const refusals: [unknown, string, string, string?][] = [
    [row.format_problem, 'source.table', 'ZERO_COPY_FORMAT_VERSION'],
    [
      row.schema_problem,
      'source.table',
      'ZERO_COPY_SCHEMA_MISMATCH',
      'Iceberg reads data files by field id: the schemas must be identical including field ids. Copy the rows instead (INSERT INTO … SELECT, outside this job).',
    ],
    [row.last_column_id_problem, 'source.table', 'ZERO_COPY_LAST_COLUMN_ID'],
    [row.spec_problem, 'target.table', 'ZERO_COPY_PARTITION_SPEC'],
    [
      row.source_changed_problem,
      'source.table',
      'ZERO_COPY_SOURCE_CHANGED',
      'A source is appended by reference once, frozen; after more appends only their new files follow. Copy the changed rows instead, or append a new source table.',
    ],
  ];
  for (const [problem, path, code, hint] of refusals) {
    const text = str(problem);
    if (text !== undefined) return { fail: new ZeroCopyRefused(path, `${source} cannot be appended to ${target} by metadata: ${text}`, code, hint) };
  }
  if (num(row.equality_delete_files) > 0)
    return {
      fail: new ZeroCopyRefused(
        'source.table',
        `${source} has ${num(row.equality_delete_files)} live equality delete file(s): they cannot be placed in ${target} correctly (committed with the files they delete nothing, committed later they also delete ${target}'s own rows)`,
        'ZERO_COPY_EQUALITY_DELETES',
        `Compact the source first (CALL <catalog>.system.rewrite_data_files on ${source}, which rewrites its data), then run again.`,
      ),
    };
  const metrics = { dataFiles: num(row.data_files), deleteFiles: num(row.position_delete_files), records: num(row.records) };
  // Before the empty-source skip: a source whose appends since added no file is a rerun, not nothing to do.
  if (row.already_appended === true)
    return {
      output: { table: target, format: 'iceberg', location: r.targetLocation, committed: false, metrics: { ...metrics, alreadyAppended: 1 } },
    };
  if (str(row.source_snapshot_id) === undefined || num(row.data_files) === 0) return { skip: `${source} has no data files: nothing to append` };
  return {
    output: { table: target, format: 'iceberg', location: r.targetLocation, committed: true, metrics },
    metrics: { rowsRead: 0, rowsWritten: metrics.records },
  };
}

/** The plugin's check: the facts of both tables, one row (spark-plugins/, ZeroCopyAppendCheck). */
export const CHECK_COLUMNS = [
  'source_exists',
  'target_exists',
  'source_uuid',
  'source_location',
  'target_location',
  'source_snapshot_id',
  'target_snapshot_id',
  'data_files',
  'position_delete_files',
  'equality_delete_files',
  'records',
  'already_appended',
  'schema_problem',
  'last_column_id_problem',
  'spec_problem',
  'format_problem',
  'source_changed_problem',
  'outside_roots',
] as const;
type CheckRow = TypedRow<(typeof CHECK_COLUMNS)[number]>;

/** Append only when the check found files the target does not already record. */
export function shouldAppend(row: CheckRow | undefined): boolean {
  return row !== undefined && row.already_appended !== true && num(row.data_files) > 0;
}

// ---------------------------------------------------------------------------------------------
// The plan

function plan(ctx: JobContext, spec: ZeroCopyAppendSpec): JobPlan {
  const r = resolve(ctx, spec);
  const source = displayTable(r.source);
  const target = displayTable(r.target);
  const check = queryStep({
    id: 'check',
    title: `Check that ${source}'s live files can be appended to ${target} by metadata (field ids, deletes, partition specs, locations, marker)`,
    query: Query.extension(request(ctx, r, CHECK_TYPE)),
    columns: CHECK_COLUMNS,
    interpret: (rows) => judge(rows[0], r),
  });
  const steps: Step[] = [
    check,
    {
      kind: 'command',
      id: 'append',
      title: `Append ${source}'s data and position delete files to ${target} in one commit, by reference (no data copied)`,
      when: (facts) => shouldAppend(facts.rows(check)?.[0]),
      command: extensionCommand(request(ctx, r, COMMIT_TYPE)),
    },
    readCommitStep(r.target, 'iceberg'),
  ];
  return { steps };
}

export const icebergZeroCopyAppend = defineTemplate({
  name: TEMPLATE,
  layer: 'ops',
  summary:
    "Append a source Iceberg table's live data files (with their position deletes) to a target Iceberg table by metadata only, in one commit: schemas identical by field id, no equality deletes, same partition spec, every file under the tenant's storage roots; a rerun appends nothing.",
  stability: 'experimental',
  newest: v1,
  plan,
});
