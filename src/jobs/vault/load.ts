import { z } from 'zod';
import { catalogName, tableName } from '../../core/config/validate.js';
import { DataError, UsageError } from '../../core/errors.js';
import { type Instant, instant, parseInstant } from '../../core/instant.js';
import { displayTable, tableParts } from '../../core/naming.js';
import { type Expr, alias, col, fn, lit } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import type { JobContext, SchemaDiff, Step } from '../template.js';
import { queryStep } from '../steps.js';
import { createNamespaceStep, createTable, readCommitStep } from '../tables.js';
import { type TableShape, tableShapeKeys } from '../table-shape.js';
import { SILVER_FORMATS, type SilverRef } from '../layers/silver.js';
import type { IncrementalRead } from '../incremental.js';

/**
 * Loading a raw vault table, shared by dv-hub, dv-link and dv-satellite: every vault table is
 * insert-only, and a row is inserted by a MERGE on the table's key with only a "when not matched,
 * insert" clause (never a blind append), so a rerun inserts nothing and two concurrent runs cannot
 * both insert a key: the table format's commit validation makes the later one fail (75, retryable),
 * and its retry finds the key present.
 */

/** When the row was loaded: the run's logical date (`--logical-date`). */
export const LOAD_DATE = 'load_date';
/** Where the row came from (`record-source` of its source). */
export const RECORD_SOURCE = 'record_source';

/** The ghost record's load date and record source, as Data Vault 2.0 writes them. */
export const GHOST_LOAD_DATE: Instant = parseInstant('1900-01-01T00:00:00Z')!;
export const GHOST_RECORD_SOURCE = 'SYSTEM';

const SOURCE = '__source';

/** The `target` section of a vault template: the silver table `kind` (hub, link, satellite) is loaded into. */
export const vaultTarget = (kind: 'hub' | 'link' | 'satellite') =>
  z
    .object({
      table: tableName().describe(
        `The ${kind} table: <catalog>.<tenant>_silver.<table> at <storage-root>/silver/<table>; one found by name at another location is refused (78).`,
      ),
      catalog: catalogName().optional().describe('A catalog of the platform config (default: its default catalog).'),
      format: z.enum(SILVER_FORMATS).optional().describe("iceberg or delta; must be the catalog's (checked against the platform config)."),
      ...tableShapeKeys,
    })
    .strict()
    .describe(`The ${kind} table the rows are inserted into (insert-only, by a MERGE on its key).`);

/**
 * The load date of the run: `--logical-date` (a date is its midnight UTC, a timestamp itself; the
 * loader refused any other form, 64). Without one, the plan's first step stops the run (64): a load
 * date taken from the clock would make every rerun a new load.
 */
export function loadDate(ctx: JobContext): { value: Instant; check: Step[] } {
  if (ctx.logicalDate) return { value: ctx.logicalDate.instant, check: [] };
  return {
    value: instant(0n),
    check: [
      {
        // Fails before any other step; `plan` and `validate` still show the plan.
        kind: 'probePaths',
        id: 'check-load-date',
        title: 'Check --logical-date, the load date',
        paths: [],
        interpret: () => ({
          fail: new UsageError('a raw vault load needs --logical-date (Airflow: {{ ds }}): it is the load_date of every row it inserts'),
        }),
      },
    ],
  };
}

export interface VaultTableLoad {
  readonly target: SilverRef;
  /** The table's partitioning and properties, as configured (tableShape of the target section). */
  readonly tableShape: TableShape;
  /** What one row is, for titles and messages: "hub key", "link", "satellite row". */
  readonly what: string;
  /**
   * The rows to insert, with exactly the table's columns: one batch per source, inserted in this
   * order, so a key several sources deliver is the first one's.
   */
  readonly batches: readonly { readonly rows: Query; readonly from?: string }[];
  /** The table's columns, without reading the table (it may not exist yet): what it is created from. */
  readonly shape: Query;
  /** The columns that identify a row: the MERGE condition. */
  readonly key: readonly string[];
  /** Values of the ghost record's columns (the others are NULL), when the config asks for one. */
  readonly ghost?: readonly (readonly [string, Expr])[] | undefined;
  /** Steps before anything is written (the load date, the sources' snapshot dates, checks of the batch). */
  readonly checks: readonly Step[];
  /** The config paths whose logic the rows carry: those steps are judged by the tenant policy. */
  readonly untrusted: readonly string[];
  /** A source read incrementally (one batch): its position rides in the insert's commit. */
  readonly incremental?: IncrementalRead | undefined;
}

/** The steps of a load: create the table, check its columns, insert the ghost record and the new rows. */
export function vaultLoadSteps(load: VaultTableLoad): Step[] {
  const { target, key } = load;
  const name = displayTable(target.table);
  const parts = tableParts(target.table);
  const format = target.catalog.format;
  const untrusted = load.untrusted.length ? { untrusted: [...load.untrusted] } : {};
  const onKey = (left: string, right: string) => key.map((k) => fn('<=>', col(left, k), col(right, k))).reduce((a, b) => fn('and', a, b));
  const ids = load.batches.map((_, i) => (load.batches.length === 1 ? '' : `-${i}`));
  // The config logic of each batch (its source's where) is judged before anything is created,
  // unless one of the checks already carries it.
  const judged: Step[] =
    load.untrusted.length && !load.checks.some((c) => c.untrusted?.length)
      ? load.batches.map((batch, i) => ({
          kind: 'checkColumns',
          id: `check-batch${ids[i]}`,
          ...untrusted,
          title: `Analyse the ${load.what}s${batch.from ? ` of ${batch.from}` : ''} (reads no row): the tenant read policy judges their config logic before anything is created`,
          source: batch.rows,
          interpret: () => ({}),
        }))
      : [];
  const steps: Step[] = [
    ...load.checks,
    ...judged,
    createNamespaceStep(target.table),
    {
      kind: 'ensureTable',
      id: 'create-table',
      ...untrusted,
      title: `Create ${name} at ${target.location} if missing`,
      table: target.table,
      location: target.location,
      configPath: 'target.table',
      create: createTable(load.shape, target.table, format, target.location, load.tableShape),
      shape: load.tableShape,
    },
    {
      kind: 'compareSchemas',
      id: 'check-schema',
      ...untrusted,
      title: `Compare the ${load.what} columns with ${name}`,
      source: load.shape,
      table: target.table,
      interpret: (diff) => ({ ...(schemaProblem(diff, name) ? { fail: schemaProblem(diff, name)! } : {}) }),
    },
  ];
  const counted = measureStep(load, name, parts, untrusted);
  steps.push(counted);
  if (load.ghost) {
    const ghost = ghostRow(load.shape, load.ghost);
    const found = queryStep({
      id: 'find-ghost',
      ...untrusted,
      title: `Look for the ghost record (the zero key) in ${name}`,
      query: Query.table(parts)
        .join(ghost.select(...key), key as string[], 'left_semi')
        .aggregate([], [alias(fn('count', lit(1)), 'rows')]),
      columns: ['rows'],
      // Reported here, after the batch's count: the output says committed when either is written.
      interpret: ([r]) => (Number(r?.rows ?? 0) === 0 ? { output: { table: name, format, committed: true, metrics: { ghost: 1 } } } : {}),
    });
    steps.push(found, {
      kind: 'command',
      id: 'insert-ghost',
      ...untrusted,
      title: `Insert the ghost record into ${name}`,
      when: (facts) => facts.count(found.col('rows')) === 0,
      command: ghost.as(SOURCE).mergeInto(parts, onKey(target.table.table, SOURCE), { whenNotMatched: [{ action: 'insertAll' }] }),
    });
  }
  load.batches.forEach((batch, i) =>
    steps.push({
      kind: 'command',
      id: `insert${ids[i]}`,
      ...untrusted,
      title: `MERGE the new ${load.what}s${batch.from ? ` of ${batch.from}` : ''} into ${name} (insert only, on ${key.join(', ')})`,
      // A rerun finds every row present: no MERGE, so no new snapshot or version.
      when: (facts) => facts.count(counted.col(`inserted_${i}`)) > 0,
      ...(load.incremental ? { stamp: load.incremental.stamp } : {}),
      command: batch.rows.as(SOURCE).mergeInto(parts, onKey(target.table.table, SOURCE), {
        // Spark rewrites an Iceberg MERGE with only an insert clause into a plain append, which
        // Iceberg commits without checking what was added meanwhile: two concurrent loads would
        // then both insert a key. A matched clause that never fires keeps it a row-level MERGE,
        // validated at commit (serializable), so the later of two concurrent loads fails (75).
        ...(format === 'iceberg' ? { whenMatched: [{ action: 'delete' as const, condition: lit(false) }] } : {}),
        whenNotMatched: [{ action: 'insertAll' }],
      }),
    }),
  );
  // A batch that inserts nothing still records the position: the next run does not read the same commits again.
  if (load.incremental) steps.push(load.incremental.recordStep({ when: (facts) => facts.count(counted.col('inserted_0')) === 0 }));
  steps.push(readCommitStep(target.table, format));
  return steps;
}

/** Count what the inserts, run in order, will add: per batch `candidates_<i>` and `inserted_<i>`. */
function measureStep(load: VaultTableLoad, name: string, parts: string[], untrusted: { untrusted?: string[] }) {
  const { format } = load.target.catalog;
  return queryStep({
    id: 'measure',
    ...untrusted,
    title: `Count the ${load.what}s of this batch that ${name} does not hold yet`,
    query: measure(load.batches, parts, load.key),
    columns: load.batches.flatMap((_, i) => [`candidates_${i}`, `inserted_${i}`]),
    interpret: ([r]) => {
      const candidates = load.batches.reduce((n, _, i) => n + Number(r?.[`candidates_${i}`] ?? 0), 0);
      const inserted = load.batches.reduce((n, _, i) => n + Number(r?.[`inserted_${i}`] ?? 0), 0);
      return {
        output: { table: name, format, location: load.target.location, committed: inserted > 0, metrics: { candidates, inserted } },
        metrics: { rowsRead: candidates, rowsWritten: inserted },
      };
    },
  });
}

/**
 * One row: per batch, its rows (`candidates_<i>`) and those that neither the table nor an earlier
 * batch holds (`inserted_<i>`): what the inserts, run in order, will add.
 */
function measure(batches: VaultTableLoad['batches'], parts: string[], key: readonly string[]): Query {
  const keys = [...key];
  const table = Query.table(parts).select(...keys);
  const counts = batches.map((b, i) => {
    const fresh = batches.slice(0, i).reduce((q, earlier) => q.join(earlier.rows.select(...keys), keys, 'left_anti'), b.rows.join(table, keys, 'left_anti'));
    const total = b.rows.aggregate([], [alias(fn('count', lit(1)), `candidates_${i}`)]);
    return total.join(fresh.deduplicate(keys).aggregate([], [alias(fn('count', lit(1)), `inserted_${i}`)]), lit(true), 'inner');
  });
  return counts.reduce((a, b) => a.join(b, lit(true), 'inner'));
}

/**
 * One row with the table's columns: the given values, NULL elsewhere. A one-row relation left-joined
 * to the empty shape gives every column its type, so the ghost fits the table whatever the payload.
 */
function ghostRow(shape: Query, values: readonly (readonly [string, Expr])[]): Query {
  const one = '__lake_one';
  return Query.range(0n, 1n)
    .select(alias(lit(1), one))
    .join(shape.limit(0), lit(true), 'left')
    .drop(one)
    .withColumns(values);
}

/** A vault table's columns are fixed by its template and config: any difference is a changed config. */
function schemaProblem(diff: SchemaDiff, table: string): DataError | undefined {
  const parts = [
    ...diff.added.map((c) => `${c.name} ${c.type} is new`),
    ...diff.missing.map((c) => `${c} is missing`),
    ...diff.changed.map((c) => `${c.name} is ${c.sourceType} (${table} has ${c.tableType})`),
  ];
  if (!parts.length) return undefined;
  return new DataError(`the batch's columns differ from ${table}: ${parts.join(', ')}; a vault table's columns are fixed (load into a new table)`, {
    code: 'SCHEMA_CHANGED',
  });
}
