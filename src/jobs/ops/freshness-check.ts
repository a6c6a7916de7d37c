import { z } from 'zod';
import { catalogName, columnName, duration, name } from '../../core/config/validate.js';
import { ConfigError, DataError, InputMissingError, type ConfigIssue, type LakehouseError } from '../../core/errors.js';
import { type Instant, instant, instantText } from '../../core/instant.js';
import { LAYERS, type TableName, displayTable, tableParts } from '../../core/naming.js';
import type { ExpectationReport, OutputReport } from '../../core/status.js';
import { alias, cast, coalesce, col, eq, fn, lit } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import { sql } from '../../spark/plan/sql.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { eachTableOnce, tableCatalog } from '../tables.js';
import type { CatalogRef, JobContext, JobPlan, Step, TypedRow } from '../template.js';
import { type QueryStep, queryStep } from '../steps.js';

/**
 * freshness-check: is each listed table of the tenant new enough? Per table, the age of its latest
 * commit (Iceberg: the snapshot `main` points at; Delta: the last version) or, with `event-time`,
 * of the newest value of that column, against the table's `max-age`, measured from the run's clock.
 * Exit 0 when every table is fresh; 65 naming each stale table with its age and its limit; 66 for
 * a table that does not exist. It reads metadata (or one aggregate) and writes nothing.
 */

const TEMPLATE = 'freshness-check';

const tableSpec = z
  .object({
    layer: z.enum(LAYERS).describe("the table's layer: the table is <catalog>.<tenant>_<layer>.<table>"),
    table: name().describe("the table's name in that layer"),
    catalog: catalogName().optional().describe("the platform's catalog (default: its default catalog)"),
    format: z.enum(['iceberg', 'delta']).optional().describe("checked against the catalog's format"),
    'max-age': duration().describe('the oldest the table may be, a duration with its unit ("6h", "90 minutes", "2 days")'),
    'event-time': columnName().optional().describe("a timestamp (or date) column: the table's age is that of its newest value, not of its latest commit"),
  })
  .strict();

type TableSpec = z.infer<typeof tableSpec>;

const v1 = defineVersion(1, {
  sections: {
    tables: z.array(tableSpec).min(1).max(100).describe('the tables to check, 1 to 100, each with its own max-age; a table at most once'),
  },
  refine: (c, ctx) => eachTableOnce(c.tables, ctx, 'checks'),
});

export type FreshnessCheckSpec = SpecOf<typeof v1.sections>;

// ---------------------------------------------------------------------------------------------
// The plan

interface Target {
  readonly path: string;
  readonly id: string;
  readonly spec: TableSpec;
  readonly catalog: CatalogRef;
  readonly table: TableName;
}

const COLUMNS = ['latest', 'empty'] as const;
type Measured = TypedRow<(typeof COLUMNS)[number]>;

/** A table's freshness as judged: what the status and the lineage facets report. */
export interface Judgement {
  readonly output: OutputReport;
  /** Why it is stale (the message names the table, its age and its limit); undefined when fresh. */
  readonly stale?: string;
}

function plan(ctx: JobContext, spec: FreshnessCheckSpec): JobPlan {
  const issues: ConfigIssue[] = [];
  const targets: Target[] = [];
  spec.tables.forEach((s, i) => {
    const path = `tables[${i}]`;
    try {
      const catalog = tableCatalog(ctx, s.catalog, s.format, path);
      targets.push({ path, id: `${i}`, spec: s, catalog, table: ctx.tenant.table(catalog.name, s.layer, s.table) });
    } catch (e) {
      if (e instanceof ConfigError) return void issues.push(...e.issues);
      throw e;
    }
  });
  if (issues.length) throw new ConfigError(issues);
  // Ages are taken from the run's clock: `plan` and a rerun judge the same way, and the status says the reference.
  const now = ctx.clock;
  const steps: QueryStep<(typeof COLUMNS)[number]>[] = [];
  targets.forEach((t, i) => {
    const earlier = [...steps];
    const last = i === targets.length - 1;
    steps.push(
      queryStep({
        id: `measure-${t.id}`,
        title: t.spec['event-time']
          ? `Read the newest ${t.spec['event-time']} of ${displayTable(t.table)}`
          : `Read the time of ${displayTable(t.table)}'s latest commit`,
        query: measureQuery(t),
        columns: COLUMNS,
        explainFailure: (e) => explainFailure(e, t),
        interpret: ([r], facts) => {
          const mine = judge(t, r, now);
          if (!last) return { output: mine.output };
          // The last table's step judges them all: one failure names every stale table.
          const stale = [...earlier.map((s, j) => judge(targets[j]!, facts?.rows(s)?.[0], now).stale), mine.stale].filter((x): x is string => x !== undefined);
          if (!stale.length) return { output: mine.output };
          return {
            output: mine.output,
            fail: new DataError(`${stale.length} of ${targets.length} table(s) are stale: ${stale.join('; ')}`, { code: 'STALE_TABLE' }),
          };
        },
      }),
    );
  });
  return { steps: steps as Step[] };
}

/**
 * One row per table, from the table's metadata (or one aggregate for an event-time column):
 * `latest`, the instant in microseconds as text (NULL: no commit, no value); `empty`, whether the
 * table holds no rows (Iceberg: the current snapshot's `total-records`; Delta: no data file).
 */
function measureQuery(t: Target): Query {
  const parts = tableParts(t.table);
  const micros = (x: ReturnType<typeof col>) => cast(fn('max', fn('unix_micros', cast(x, 'timestamp'))), 'string');
  const event = t.spec['event-time'];
  if (event) return Query.table(parts).aggregate([], [alias(micros(col(event)), 'latest'), alias(eq(fn('count', lit(1)), lit(0)), 'empty')]);
  if (t.catalog.format === 'iceberg') {
    // The snapshot `main` points at: after a rollback that is not the newest one committed.
    const current = Query.table([...parts, 'refs'])
      .filter(eq(col('name'), lit('main')))
      .select(alias(col('snapshot_id'), 'current_id'));
    return current
      .join(Query.table([...parts, 'snapshots']), eq(col('current_id'), col('snapshot_id')), 'inner')
      .aggregate(
        [],
        [
          alias(micros(col('committed_at')), 'latest'),
          alias(eq(coalesce(fn('max', cast(fn('element_at', col('summary'), lit('total-records')), 'bigint')), lit(0)), lit(0)), 'empty'),
        ],
      );
  }
  const last = Query.sql(sql`DESCRIBE HISTORY ${sql.table(parts)} LIMIT 1`).aggregate([], [alias(micros(col('timestamp')), 'latest')]);
  const detail = Query.sql(sql`DESCRIBE DETAIL ${sql.table(parts)}`).select(alias(eq(col('numFiles'), lit(0)), 'empty'));
  return last.join(detail, lit(true), 'inner');
}

/** A table that is not there is the input missing (66); a column it lacks is the config's mistake (78). */
function explainFailure(e: LakehouseError, t: Target): LakehouseError | undefined {
  const name = displayTable(t.table);
  const r = e.report();
  if (r.code === 'INPUT_MISSING') return new InputMissingError(`${t.path}: table ${name} does not exist`, { cause: e });
  if (t.spec['event-time'] && /^UNRESOLVED_COLUMN/.test(r.sparkErrorClass ?? ''))
    return new ConfigError([{ path: `${t.path}.event-time`, message: `${name} has no column "${t.spec['event-time']}"` }]);
  return undefined;
}

/** A table's measurement against its limit. No row: the step did not run (not reached). */
function judge(t: Target, r: Measured | undefined, now: Instant): Judgement {
  const name = displayTable(t.table);
  const maxAge = t.spec['max-age'];
  const event = t.spec['event-time'];
  const measure = event ? `the newest ${event}` : 'the latest commit';
  const latest = r?.latest === null || r?.latest === undefined ? undefined : instant(BigInt(String(r.latest)));
  const empty = r?.empty === true;
  const ageSeconds = latest === undefined ? undefined : Number((now.micros - latest.micros) / 1_000_000n);
  let stale: string | undefined;
  if (latest === undefined)
    stale = event ? `${name} has ${empty ? 'no rows' : `no ${event} value`} (limit ${maxAge.text})` : `${name} has no commit (limit ${maxAge.text})`;
  else if (empty && !event) stale = `${name} is empty: its latest commit (${instantText(latest)}) holds no rows (limit ${maxAge.text})`;
  else if (ageSeconds! > maxAge.seconds)
    stale = `${name}: ${measure} (${instantText(latest)}) is ${age(ageSeconds!)} old, older than its limit of ${maxAge.text}`;
  const expectation: ExpectationReport = {
    name: event ? `freshness.${event}` : 'freshness',
    type: 'freshness',
    ...(event ? { column: event } : {}),
    action: 'fail',
    outcome: stale ? 'failed' : 'passed',
    failedRows: 0,
    observed: {
      measure: event ? 'event-time' : 'commit',
      latest: latest === undefined ? null : instantText(latest),
      ageSeconds: ageSeconds ?? null,
      maxAgeSeconds: maxAge.seconds,
      empty: empty ? 1 : 0,
      checkedAt: instantText(now),
    },
  };
  const metrics: Record<string, number> = { maxAgeSeconds: maxAge.seconds, ...(ageSeconds !== undefined ? { ageSeconds } : {}) };
  const output: OutputReport = { table: name, format: t.catalog.format, committed: false, metrics, expectations: [expectation] };
  return stale ? { output, stale } : { output };
}

/** An age as a person reads it: `3d 4h`, `2h 5m`, `42s`. */
export function age(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3600), Math.floor((s % 3600) / 60)];
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

export const freshnessCheck = defineTemplate({
  name: TEMPLATE,
  layer: 'ops',
  summary:
    "Check that each of a tenant's Iceberg and Delta tables is fresh: the age of its latest commit, or of the newest value of an event-time column, against a max-age per table; 65 naming every stale table with its age and limit, 66 for a missing table; results in the status and as OpenLineage data-quality assertions; writes nothing.",
  stability: 'beta',
  newest: v1,
  plan,
});
