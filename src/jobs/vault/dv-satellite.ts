import { z } from 'zod';
import { DataError } from '../../core/errors.js';
import { tableParts } from '../../core/naming.js';
import { columnName } from '../../core/config/validate.js';
import { type Expr, type SortOrder, alias, col, desc, eq, fn, isNull, lit, not, or, over } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import type { JobContext, JobPlan, Step } from '../template.js';
import { queryStep } from '../steps.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { tableShape } from '../table-shape.js';
import { silverRef } from '../layers/silver.js';
import { RESERVED_COLUMNS, checkDistinctColumns, columnList } from './columns.js';
import { hashAlgorithm, hashKey, hashOf, hashdiffColumns, noKey, zeroKey } from './hashing.js';
import { GHOST_LOAD_DATE, GHOST_RECORD_SOURCE, LOAD_DATE, RECORD_SOURCE, loadDate, vaultLoadSteps, vaultTarget } from './load.js';
import { readSource, sourceSection } from './source.js';

/**
 * dv-satellite: a Data Vault 2.0 satellite, the history of a parent key's descriptive attributes.
 * Each source row is hashed to its parent's hash key (as dv-hub does) and to a hashdiff over its
 * payload columns sorted by name; a row is inserted only when its hashdiff differs from the one
 * before it for the same key: within the batch (the changes of a key ordered by
 * satellite.order-by: each change kept, consecutive repeats dropped) and, for a key's first change
 * of the batch, from the satellite's latest row before this load date. The changes of one load date
 * are numbered 1, 2, … in `load_seq`; (hash key, load_date, load_seq) identifies a row, and the
 * insert is a MERGE on it: a rerun of the load date computes the same rows and inserts nothing.
 */

const TEMPLATE = 'dv-satellite';
/** The satellite's own columns besides the parent hash key and the payload. */
export const HASHDIFF = 'hashdiff';
export const LOAD_SEQ = 'load_seq';
const RN = '__lake_rn';
const PREV = '__lake_prev';
const LATEST_KEY = '__lake_latest_hk';
const LATEST_DIFF = '__lake_latest_hashdiff';
const ord = (i: number) => `__lake_ord_${i}`;

const v1 = defineVersion(1, {
  sections: {
    source: sourceSection('source', {}),
    satellite: z
      .object({
        'parent-hash-key': columnName().describe("The parent's hash key column, e.g. hk_order"),
        'business-key': columnList('business key').describe("The source columns that hold the parent's business key, in the hub's order"),
        payload: columnList('payload').describe('The descriptive columns the satellite keeps; the hashdiff is taken over them sorted by name'),
        'order-by': z.array(columnName()).min(1).optional().describe('The columns that order the changes of one key within a batch (ascending)'),
        'hash-algorithm': hashAlgorithm(),
      })
      .strict()
      .describe("The satellite's columns: the parent's hash key and business key, the payload hashed into the hashdiff, and the order of changes."),
    'ghost-record': z.boolean().default(false).describe('Insert the ghost record (zero key and hashdiff) if the satellite lacks it'),
    target: vaultTarget('satellite'),
  },
  refine: (c, ctx) =>
    checkDistinctColumns(
      [
        { path: ['satellite', 'parent-hash-key'], name: c.satellite['parent-hash-key'] },
        ...c.satellite.payload.map((p, i) => ({ path: ['satellite', 'payload', i], name: p })),
      ],
      ctx,
      [...RESERVED_COLUMNS, HASHDIFF, LOAD_SEQ],
    ),
});

export type DvSatelliteSpec = SpecOf<typeof v1.sections>;

function plan(ctx: JobContext, spec: DvSatelliteSpec): JobPlan {
  const target = silverRef(ctx, spec.target);
  const s = spec.satellite;
  const algorithm = s['hash-algorithm'];
  const hk = s['parent-hash-key'];
  const orderBy = s['order-by'] ?? [];
  const load = loadDate(ctx);
  const named = (key: 'business-key' | 'payload' | 'order-by') => (s[key] ?? []).map((column, j) => ({ path: `satellite.${key}[${j}]`, column }));
  const read = readSource(ctx, spec.source, 'source', [...named('business-key'), ...named('payload'), ...named('order-by')], target);
  const loadDateLit = lit({ timestamp: load.value });
  const ords = orderBy.map((_, i) => ord(i));
  const byOrder: SortOrder[] = ords.map((o) => ({ expr: col(o), descending: false, nullsFirst: true }));

  // The batch's changes: key, hashdiff, payload and the order; identical changes are one.
  const changes = read.rows
    .filter(not(noKey(s['business-key'].map((k) => col(k)))))
    .select(
      hashKey(s['business-key'], algorithm, hk),
      alias(
        hashOf(
          hashdiffColumns(s.payload).map((c) => col(c)),
          algorithm,
        ),
        HASHDIFF,
      ),
      ...s.payload,
      ...orderBy.map((c, i) => alias(col(c), ord(i))),
    )
    .deduplicate([hk, HASHDIFF, ...ords]);

  const columns = (q: Query, seq: Expr) =>
    q.select(
      col(hk),
      alias(loadDateLit, LOAD_DATE),
      alias(seq, LOAD_SEQ),
      col(HASHDIFF),
      alias(lit(spec.source['record-source']), RECORD_SOURCE),
      ...s.payload,
    );
  const numbered = over(fn('row_number'), [col(hk)], byOrder.length ? byOrder : [{ expr: col(HASHDIFF), descending: false, nullsFirst: true }]);

  // The satellite's latest row per key before this load date: what a key's first change is compared with.
  const latest = Query.table(tableParts(target.table))
    .filter(fn('<', col(LOAD_DATE), loadDateLit))
    .withColumns([[RN, over(fn('row_number'), [col(hk)], [desc(col(LOAD_DATE)), desc(col(LOAD_SEQ))])]])
    .filter(eq(col(RN), lit(1)))
    .select(alias(col(hk), LATEST_KEY), alias(col(HASHDIFF), LATEST_DIFF));
  const before = fn('coalesce', col(PREV), col(LATEST_DIFF));
  const kept = changes
    .withColumns([[PREV, over(fn('lag', col(HASHDIFF)), [col(hk)], byOrder.length ? byOrder : [{ expr: col(HASHDIFF), descending: false, nullsFirst: true }])]])
    .join(latest, eq(col(hk), col(LATEST_KEY)), 'left')
    .filter(or(isNull(before), not(eq(col(HASHDIFF), before))));
  const rows = columns(kept, numbered);

  const zero = lit(zeroKey(algorithm));
  const steps = vaultLoadSteps({
    target,
    what: 'satellite row',
    batches: [{ rows, from: read.name }],
    shape: columns(changes, numbered),
    tableShape: tableShape(spec.target, target.catalog.format),
    key: [hk, LOAD_DATE, LOAD_SEQ],
    ghost: spec['ghost-record']
      ? [
          [hk, zero],
          [LOAD_DATE, lit({ timestamp: GHOST_LOAD_DATE })],
          [LOAD_SEQ, lit(1)],
          [HASHDIFF, zero],
          [RECORD_SOURCE, lit(GHOST_RECORD_SOURCE)],
        ]
      : undefined,
    checks: [...load.check, ...read.checks, batchCheck(changes, hk, ords, read.untrusted, read.name)],
    untrusted: read.untrusted,
    incremental: read.incremental,
  });
  return { steps, ...(read.incremental ? { bind: read.incremental.bind } : {}) };
}

/**
 * A key's changes must be ordered: two different payloads at the same position of one key (or,
 * without order-by, two different payloads of one key) cannot be told apart (65), and neither can a
 * NULL in an order-by column.
 */
function batchCheck(changes: Query, hk: string, ords: string[], untrusted: string[], from: string): Step {
  const perGroup = changes.aggregate(
    [col(hk), ...ords.map((o) => col(o))],
    [alias(fn('count', lit(1)), '__n'), alias(fn('max', ords.length ? or(...ords.map((o) => isNull(col(o)))) : lit(false)), '__null')],
  );
  const example = (cond: Expr) => fn('max', fn('if', cond, col(hk), lit(null)));
  return queryStep({
    id: 'check-batch',
    ...(untrusted.length ? { untrusted } : {}),
    title: `Check the changes in ${from}: NULL order values, different payloads at one position of a key`,
    query: perGroup.aggregate(
      [],
      [
        alias(fn('count_if', col('__null')), 'nulls'),
        alias(example(col('__null')), 'null_example'),
        alias(fn('count_if', fn('>', col('__n'), lit(1))), 'ties'),
        alias(example(fn('>', col('__n'), lit(1))), 'tie_example'),
      ],
    ),
    columns: ['nulls', 'null_example', 'ties', 'tie_example'],
    interpret: ([r = {}]) => {
      if (Number(r.nulls ?? 0) > 0)
        return { fail: new DataError(`satellite.order-by is NULL in changes of the key with hash ${String(r.null_example)}`, { code: 'SAT_NULL_ORDER' }) };
      if (Number(r.ties ?? 0) > 0)
        return {
          fail: new DataError(
            `${Number(r.ties)} key(s) have different payloads ${ords.length ? 'at the same satellite.order-by position' : 'in one batch and no satellite.order-by'} (which came last cannot be told), e.g. the key with hash ${String(r.tie_example)}`,
            { code: 'SAT_AMBIGUOUS_ORDER' },
          ),
        };
      return {};
    },
  });
}

export const dvSatellite = defineTemplate({
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Data Vault 2.0 satellite: hash a bronze or silver source’s parent keys and payload (hashdiff) and insert each change, dropping consecutive repeats within the batch and against the satellite’s latest row, insert-only by a MERGE; optional ghost record.',
  stability: 'experimental',
  newest: v1,
  plan,
});
