import { z } from 'zod';
import { columnName } from '../../core/config/validate.js';
import { alias, cast, col, fn, lit, not, over } from '../../spark/plan/expressions.js';
import type { Query } from '../../spark/plan/query.js';
import type { JobContext, JobPlan } from '../template.js';
import { type SpecOf, defineTemplate, defineVersion } from '../kit.js';
import { tableShape } from '../table-shape.js';
import { silverRef } from '../layers/silver.js';
import { checkDistinctColumns, columnList } from './columns.js';
import { hashAlgorithm, hashKey, noKey, zeroKey } from './hashing.js';
import { GHOST_LOAD_DATE, GHOST_RECORD_SOURCE, LOAD_DATE, RECORD_SOURCE, loadDate, vaultLoadSteps, vaultTarget } from './load.js';
import { readSource, sourceSection } from './source.js';

/**
 * dv-hub: a Data Vault 2.0 hub, the list of a business concept's keys. Each source's business key
 * is hashed to the hub's hash key (hashing.ts); a key the hub does not hold yet is inserted once,
 * with the run's load date and its source's record source. Sources are loaded in config order, so
 * a key several sources deliver belongs to the first; later runs (other sources, other dates) only
 * add keys. Insert-only, by a MERGE on the hash key: a rerun inserts nothing.
 */

const TEMPLATE = 'dv-hub';
const RN = '__lake_rn';

const v1 = defineVersion(1, {
  sections: {
    sources: z
      .array(
        sourceSection('sources[i]', {
          'business-key': z
            .array(columnName())
            .min(1)
            .optional()
            .describe("The source's business key columns, in the order of hub.business-key (default: the same names)"),
        }),
      )
      .min(1, 'needs at least one source')
      .max(16, 'at most 16 sources per job')
      .describe('The 1 to 16 source tables whose business keys are loaded into the hub, each with its own record source.'),
    hub: z
      .object({
        'hash-key': columnName().describe('The hash key column, e.g. hk_customer'),
        'business-key': columnList('business key').describe("The hub's business key columns"),
        'hash-algorithm': hashAlgorithm(),
      })
      .strict()
      .describe("The hub's columns: its hash key and business key, and the hash that derives one from the other."),
    'ghost-record': z.boolean().default(false).describe('Insert the ghost record (the zero key) if the hub lacks it'),
    target: vaultTarget('hub'),
  },
  refine: (c, ctx) => {
    checkDistinctColumns(
      [{ path: ['hub', 'hash-key'], name: c.hub['hash-key'] }, ...c.hub['business-key'].map((k, i) => ({ path: ['hub', 'business-key', i], name: k }))],
      ctx,
    );
    c.sources.forEach((s, i) => {
      // One position per vault table and source commit: a hub read incrementally has one source (one job per source).
      if (s.read !== undefined && c.sources.length > 1)
        ctx.addIssue({
          code: 'custom',
          path: ['sources', i, 'read'],
          message: `needs a hub job with one source (this one has ${c.sources.length}): load each source read incrementally by a job of its own`,
        });
      const bk = s['business-key'];
      if (bk && bk.length !== c.hub['business-key'].length)
        ctx.addIssue({
          code: 'custom',
          path: ['sources', i, 'business-key'],
          message: `has ${bk.length} column(s); hub.business-key has ${c.hub['business-key'].length}`,
        });
    });
  },
});

export type DvHubSpec = SpecOf<typeof v1.sections>;

function plan(ctx: JobContext, spec: DvHubSpec): JobPlan {
  const target = silverRef(ctx, spec.target);
  const algorithm = spec.hub['hash-algorithm'];
  const hk = spec.hub['hash-key'];
  const hubKey = spec.hub['business-key'];
  const load = loadDate(ctx);
  const sources = spec.sources.map((s, i) => ({
    spec: s,
    read: readSource(
      ctx,
      s,
      `sources[${i}]`,
      (s['business-key'] ?? hubKey).map((column, j) => ({ path: s['business-key'] ? `sources[${i}].business-key[${j}]` : `hub.business-key[${j}]`, column })),
      target,
    ),
  }));
  const batches = sources.map(({ spec: s, read }) => {
    const sourceKey = s['business-key'] ?? hubKey;
    // One row per hash key: keys that differ only in case or surrounding spaces are one key.
    const rows: Query = read.rows
      .filter(not(noKey(sourceKey.map((k) => col(k)))))
      .select(
        hashKey(sourceKey, algorithm, hk),
        ...sourceKey.map((k, j) => alias(fn('trim', cast(col(k), 'string')), hubKey[j]!)),
        alias(lit({ timestamp: load.value }), LOAD_DATE),
        alias(lit(s['record-source']), RECORD_SOURCE),
      )
      .withColumns([
        [
          RN,
          over(
            fn('row_number'),
            [col(hk)],
            hubKey.map((k) => ({ expr: col(k), descending: false, nullsFirst: true })),
          ),
        ],
      ])
      .filter(fn('==', col(RN), lit(1)))
      .drop(RN);
    return { rows, from: read.name };
  });
  const steps = vaultLoadSteps({
    target,
    what: 'hub key',
    batches,
    shape: batches[0]!.rows,
    tableShape: tableShape(spec.target, target.catalog.format),
    key: [hk],
    ghost: spec['ghost-record']
      ? [
          [hk, lit(zeroKey(algorithm))],
          [LOAD_DATE, lit({ timestamp: GHOST_LOAD_DATE })],
          [RECORD_SOURCE, lit(GHOST_RECORD_SOURCE)],
        ]
      : undefined,
    checks: [...load.check, ...sources.flatMap((s) => s.read.checks)],
    untrusted: sources.flatMap((s) => s.read.untrusted),
    incremental: sources[0]!.read.incremental,
  });
  const incremental = sources[0]!.read.incremental;
  return { steps, ...(incremental ? { bind: incremental.bind } : {}) };
}

export const dvHub = defineTemplate({
  name: TEMPLATE,
  layer: 'silver',
  summary:
    'Data Vault 2.0 hub: hash the business keys of one or more bronze or silver sources and insert the keys the hub lacks (load date, record source), insert-only by a MERGE on the hash key; optional ghost record.',
  stability: 'experimental',
  newest: v1,
  plan,
});
