import { z } from 'zod';
import { DataError } from '../../core/errors.js';
import { type TableName, tableParts, displayTable } from '../../core/naming.js';
import {
  type Expr,
  alias,
  and,
  col,
  desc,
  eq,
  eqNullSafe,
  fn,
  gt,
  isIn,
  isNotNull,
  isNull,
  lit,
  not,
  or,
  over,
  sqlExpr,
} from '../../spark/plan/expressions.js';
import { Query, sqlCommand } from '../../spark/plan/query.js';
import { quoteName } from '../../core/naming.js';
import { columnName, expression, jobSection, name, catalogName, tenantSection } from '../../core/config/validate.js';
import type { JobContext, JobPlan, JobTemplate, Row, Step, TemplateVersion } from '../template.js';

/**
 * cdc-silver-merge: resolve a batch of CDC events from the tenant's bronze layer to the latest event
 * per business key and MERGE it into a silver table, creating namespace and table on first run.
 * Schema-version 1 is the seed project's shape.
 */

/** Bronze metadata columns never reach silver. */
export const BRONZE_METADATA_COLUMNS = ['_lake_tenant', '_lake_source', '_lake_ingested_at', '_snapshot_date'] as const;

const TEMPLATE = 'cdc-silver-merge';
const SOURCE = '__source';
const DELETE_FLAG = '__lake_delete';
const ROW_NUMBER = '__lake_rn';
const TARGET_SEQ = '__lake_target_seq';

const v1Schema = z
  .object({
    job: jobSection(TEMPLATE, 1),
    tenant: tenantSection(),
    source: z
      .object({
        table: name(),
        where: expression('source.where').optional(),
      })
      .strict(),
    cdc: z
      .object({
        'primary-key': z.array(columnName()).min(1, 'needs at least one key column'),
        'sequence-by': columnName(),
        'op-column': columnName().optional(),
        'delete-values': z.array(z.string().min(1)).min(1).optional(),
      })
      .strict()
      .superRefine((cdc, ctx) => {
        const keys = cdc['primary-key'];
        keys.forEach((k, i) => {
          if (keys.indexOf(k) !== i) ctx.addIssue({ code: 'custom', path: ['primary-key', i], message: `"${k}" appears twice` });
        });
        if (keys.includes(cdc['sequence-by'])) ctx.addIssue({ code: 'custom', path: ['sequence-by'], message: 'must not be a primary-key column' });
        const op = cdc['op-column'];
        if (op !== undefined && (keys.includes(op) || op === cdc['sequence-by']))
          ctx.addIssue({ code: 'custom', path: ['op-column'], message: 'must differ from the key and sequence columns' });
        if (cdc['delete-values'] && op === undefined)
          ctx.addIssue({ code: 'custom', path: ['delete-values'], message: 'needs cdc.op-column (which column holds the operation?)' });
        for (const col of [...keys, cdc['sequence-by'], ...(op ? [op] : [])])
          if ((BRONZE_METADATA_COLUMNS as readonly string[]).includes(col))
            ctx.addIssue({ code: 'custom', path: [], message: `"${col}" is a bronze metadata column and cannot be a CDC column` });
      }),
    target: z
      .object({
        table: name(),
        catalog: catalogName().optional(),
      })
      .strict(),
  })
  .strict();

export type CdcSilverMergeV1 = z.infer<typeof v1Schema>;

function planV1(ctx: JobContext, config: CdcSilverMergeV1): JobPlan {
  const { tenant } = ctx;
  const catalog = ctx.catalog(config.target.catalog, 'target.catalog');
  const target = tenant.table(catalog.name, 'silver', config.target.table);
  const location = tenant.location('silver', config.target.table);
  const bronzePath = tenant.location('bronze', config.source.table);
  const keys = config.cdc['primary-key'];
  const seq = config.cdc['sequence-by'];
  const op = config.cdc['op-column'];
  const deleteValues = config.cdc['delete-values'] ?? ['d'];

  let events = Query.read('parquet', { paths: [bronzePath] });
  if (config.source.where) events = events.filter(sqlExpr(config.source.where));

  // A NULL op is an upsert: only an explicit delete value deletes.
  const isDelete: Expr = op ? fn('coalesce', isIn(col(op), deleteValues.map(lit)), lit(false)) : lit(false);

  const latest = events
    .withColumns([
      [ROW_NUMBER, over(fn('row_number'), keys.map((k) => col(k)), [desc(col(seq))])],
      [DELETE_FLAG, isDelete],
    ])
    .filter(eq(col(ROW_NUMBER), lit(1)))
    .drop(ROW_NUMBER, ...BRONZE_METADATA_COLUMNS, ...(op ? [op] : []));

  const targetParts = tableParts(target);
  const onKeys = and(...keys.map((k) => eqNullSafe(col(target.table, k), col(SOURCE, k))));

  const steps: Step[] = [
    {
      kind: 'query',
      id: 'reject-null-keys',
      title: 'Reject events with a NULL key or sequence value',
      query: events.filter(or(...[...keys, seq].map((c) => isNull(col(c))))).select(...keys, seq).limit(5),
      interpret: (rows) =>
        rows.length === 0
          ? {}
          : {
              fail: new DataError(
                `${rows.length === 5 ? 'at least 5' : rows.length} CDC event(s) have a NULL in cdc.primary-key or cdc.sequence-by, e.g. ${JSON.stringify(rows[0], jsonSafe)}`,
                { code: 'CDC_NULL_KEY' },
              ),
            },
    },
    {
      kind: 'query',
      id: 'count-events',
      title: `Count the CDC events in ${bronzePath}`,
      query: events.aggregate([], [alias(fn('count', lit(1)), 'events')]),
      interpret: (rows) => {
        const n = Number(rows[0]?.events ?? 0);
        return n === 0 ? { skip: `no CDC events in ${config.source.table}${config.source.where ? ' matching source.where' : ''}` } : { metrics: { rowsRead: n } };
      },
    },
    {
      kind: 'command',
      id: 'create-namespace',
      title: `Create namespace ${target.catalog}.${target.namespace} if missing`,
      command: sqlCommand(`CREATE NAMESPACE IF NOT EXISTS ${quoteName([target.catalog, target.namespace])}`),
    },
    {
      kind: 'ensureTable',
      id: 'create-table',
      title: `Create ${displayTable(target)} at ${location} if missing`,
      table: target,
      create: latest
        .drop(DELETE_FLAG)
        .limit(0)
        .writeTo(targetParts, 'create', {
          provider: catalog.format,
          properties: catalog.format === 'iceberg' ? { location, 'format-version': '2' } : { location },
        }),
    },
    {
      kind: 'query',
      id: 'measure',
      title: 'Count the inserts, updates and deletes the merge will apply',
      query: measure(latest, target, keys, seq),
      interpret: (rows) => {
        const r = rows[0] ?? {};
        const metrics = {
          inserted: Number(r.inserted ?? 0),
          updated: Number(r.updated ?? 0),
          deleted: Number(r.deleted ?? 0),
          late: Number(r.late ?? 0),
        };
        return {
          output: { table: displayTable(target), format: catalog.format, location, metrics },
          metrics: { rowsWritten: metrics.inserted + metrics.updated + metrics.deleted },
        };
      },
    },
    {
      kind: 'command',
      id: 'merge',
      title: `MERGE the latest event per key into ${displayTable(target)}`,
      // An event applies only when it is newer than what the target holds: a late or replayed
      // batch never moves a row backwards, and rerunning a batch changes nothing.
      command: latest.as(SOURCE).mergeInto(targetParts, onKeys, {
        whenMatched: [
          { action: 'delete', condition: and(col(SOURCE, DELETE_FLAG), gt(col(SOURCE, seq), col(target.table, seq))) },
          { action: 'updateAll', condition: gt(col(SOURCE, seq), col(target.table, seq)) },
        ],
        whenNotMatched: [{ action: 'insertAll', condition: not(col(SOURCE, DELETE_FLAG)) }],
      }),
    },
  ];
  if (catalog.format === 'iceberg') steps.push(icebergSnapshotStep(target));
  return { steps };
}

/**
 * Left-join the resolved batch to the target's keys and sequences: what the merge will insert,
 * update and delete, and which events it ignores because the target already holds a newer or
 * equal sequence for the key (late or replayed events).
 */
function measure(latest: Query, target: TableName, keys: string[], seq: string): Query {
  const present = '__lake_present';
  const existing = Query.table(tableParts(target))
    .select(...keys.map((k) => col(k)), alias(col(seq), TARGET_SEQ), alias(lit(true), present))
    .as('__target');
  const joined = latest.as(SOURCE).join(existing, and(...keys.map((k) => eqNullSafe(col(SOURCE, k), col('__target', k)))), 'left');
  const matched = isNotNull(col('__target', present));
  const newer = gt(col(SOURCE, seq), col('__target', TARGET_SEQ));
  const del = col(SOURCE, DELETE_FLAG);
  const countIf = (cond: Expr) => fn('count_if', cond);
  return joined.aggregate(
    [],
    [
      alias(countIf(and(not(matched), not(del))), 'inserted'),
      alias(countIf(and(matched, newer, not(del))), 'updated'),
      alias(countIf(and(matched, newer, del)), 'deleted'),
      alias(countIf(and(matched, not(newer))), 'late'),
    ],
  );
}

function icebergSnapshotStep(target: TableName): Step {
  return {
    kind: 'query',
    id: 'read-snapshot',
    title: `Read the current snapshot of ${displayTable(target)}`,
    query: Query.table([...tableParts(target), 'snapshots'])
      .select('snapshot_id', 'committed_at', 'operation')
      .sort(desc(col('committed_at')))
      .limit(1),
    interpret: (rows: Row[]) => {
      const id = rows[0]?.snapshot_id;
      return id === undefined || id === null ? {} : { output: { table: displayTable(target), format: 'iceberg', snapshotId: String(id) } };
    },
  };
}

function jsonSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

const v1: TemplateVersion<CdcSilverMergeV1> = {
  version: 1,
  schema: v1Schema,
  example: 'configs/examples/cdc-silver-merge.v1.conf',
  plan: planV1,
};

export const cdcSilverMerge: JobTemplate = {
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Resolve CDC events from bronze to the latest event per business key and MERGE them into a silver table: deletes applied, updates upserted, namespace and table created on first run.',
  stability: 'beta',
  versions: [v1],
};
