import { UsageError } from '../core/errors.js';
import { closest } from '../core/config/validate.js';
import { jdbcSnapshotIngest } from './bronze/jdbc-snapshot-ingest.js';
import { kafkaBronzeIngest } from './bronze/kafka-bronze-ingest.js';
import { cdcSilverMerge } from './silver/cdc-silver-merge.js';
import { goldPublish } from './gold/gold-publish.js';
import { scd2DimLoad } from './gold/scd2-dim-load.js';
import { icebergZeroCopyAppend } from './ops/iceberg-zero-copy-append.js';
import { freshnessCheck } from './ops/freshness-check.js';
import { reconcile } from './ops/reconcile.js';
import { tableMaintenance } from './ops/table-maintenance.js';
import { dvHub } from './vault/dv-hub.js';
import { dvLink } from './vault/dv-link.js';
import { dvSatellite } from './vault/dv-satellite.js';
import type { JobTemplate } from './template.js';

/** The job catalog, in medallion order: bronze, silver (with the raw vault), gold, then operations. */
export const templates: readonly JobTemplate[] = [
  jdbcSnapshotIngest,
  kafkaBronzeIngest,
  cdcSilverMerge,
  dvHub,
  dvLink,
  dvSatellite,
  goldPublish,
  scd2DimLoad,
  tableMaintenance,
  icebergZeroCopyAppend,
  freshnessCheck,
  reconcile,
];

export function findTemplate(name: string): JobTemplate {
  const t = templates.find((x) => x.name === name);
  if (t) return t;
  const hint = closest(
    name,
    templates.map((x) => x.name),
  );
  throw new UsageError(`unknown template "${name}"${hint ? `; did you mean "${hint}"?` : ''} (known: ${templates.map((x) => x.name).join(', ')})`);
}
