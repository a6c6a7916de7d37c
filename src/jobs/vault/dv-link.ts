import { z } from 'zod';
import { columnName } from '../../core/config/validate.js';
import { alias, col, fn, lit, not, or, over } from '../../spark/plan/expressions.js';
import type { JobContext, JobPlan } from '../template.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { tableShape } from '../table-shape.js';
import { silverRef } from '../layers/silver.js';
import { checkDistinctColumns } from './columns.js';
import { hashAlgorithm, hashKey, noKey, zeroKey } from './hashing.js';
import { GHOST_LOAD_DATE, GHOST_RECORD_SOURCE, LOAD_DATE, RECORD_SOURCE, loadDate, vaultLoadSteps, vaultTarget } from './load.js';
import { readSource, sourceSection } from './source.js';

/**
 * dv-link: a Data Vault 2.0 link, one row per relationship between hub keys. Each row holds the
 * hash key of every parent hub (the hash of that hub's business key, exactly as dv-hub computes it)
 * and the link's own hash key: the hash of all parents' business key parts, in the order of
 * link.hubs, joined by the same delimiter. Insert-only, by a MERGE on the link hash key.
 */

const TEMPLATE = 'dv-link';
const RN = '__lake_rn';

const hubRef = z
  .object({
    'hash-key': columnName().describe("The parent hub's hash key column in the link, e.g. hk_customer"),
    'business-key': z.array(columnName()).min(1).describe("The source columns that hold the parent's business key, in the hub's order"),
  })
  .strict();

const v1 = defineVersion(1, {
  sections: {
    source: sourceSection('source', {}),
    link: z
      .object({
        'hash-key': columnName().describe('The link hash key column, e.g. lhk_order_customer'),
        hubs: z.array(hubRef).min(2, 'a link relates at least two hub keys').max(16).describe('The parent hubs, in the order their keys are hashed'),
        'hash-algorithm': hashAlgorithm(),
      })
      .strict()
      .describe("The link's columns: its own hash key and the parent hubs' hash keys (use the hubs' hash algorithm)."),
    'ghost-record': z.boolean().default(false).describe('Insert the ghost record (all keys zero) if the link lacks it'),
    target: vaultTarget('link'),
  },
  refine: (c, ctx) =>
    checkDistinctColumns(
      [
        { path: ['link', 'hash-key'], name: c.link['hash-key'] },
        ...c.link.hubs.map((h, i) => ({ path: ['link', 'hubs', i, 'hash-key'], name: h['hash-key'] })),
      ],
      ctx,
    ),
});

export type DvLinkSpec = SpecOf<typeof v1.sections>;

function plan(ctx: JobContext, spec: DvLinkSpec): JobPlan {
  const target = silverRef(ctx, spec.target);
  const { hubs, 'hash-algorithm': algorithm } = spec.link;
  const lhk = spec.link['hash-key'];
  const load = loadDate(ctx);
  const read = readSource(
    ctx,
    spec.source,
    'source',
    hubs.flatMap((h, i) => h['business-key'].map((column, j) => ({ path: `link.hubs[${i}].business-key[${j}]`, column }))),
    target,
  );
  // A relationship needs every parent: a row missing one parent's whole key relates nothing.
  const incomplete = or(...hubs.map((h) => noKey(h['business-key'].map((k) => col(k)))));
  const rows = read.rows
    .filter(not(incomplete))
    .select(
      hashKey(
        hubs.flatMap((h) => h['business-key']),
        algorithm,
        lhk,
      ),
      ...hubs.map((h) => hashKey(h['business-key'], algorithm, h['hash-key'])),
      alias(lit({ timestamp: load.value }), LOAD_DATE),
      alias(lit(spec.source['record-source']), RECORD_SOURCE),
    )
    .withColumns([[RN, over(fn('row_number'), [col(lhk)], [{ expr: col(lhk), descending: false, nullsFirst: true }])]])
    .filter(fn('==', col(RN), lit(1)))
    .drop(RN);
  const zero = lit(zeroKey(algorithm));
  const steps = vaultLoadSteps({
    target,
    what: 'link',
    batches: [{ rows, from: read.name }],
    shape: rows,
    tableShape: tableShape(spec.target, target.catalog.format),
    key: [lhk],
    ghost: spec['ghost-record']
      ? [
          [lhk, zero],
          ...hubs.map((h) => [h['hash-key'], zero] as const),
          [LOAD_DATE, lit({ timestamp: GHOST_LOAD_DATE })],
          [RECORD_SOURCE, lit(GHOST_RECORD_SOURCE)],
        ]
      : undefined,
    checks: [...load.check, ...read.checks],
    untrusted: read.untrusted,
    incremental: read.incremental,
  });
  return { steps, ...(read.incremental ? { bind: read.incremental.bind } : {}) };
}

export const dvLink = defineTemplate({
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Data Vault 2.0 link: hash the parent hubs’ business keys of a bronze or silver source and insert each relationship the link lacks (its hash key, the parents’ hash keys, load date, record source), insert-only by a MERGE; optional ghost record.',
  stability: 'experimental',
  newest: v1,
  plan,
});
