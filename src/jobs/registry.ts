import { UsageError } from '../core/errors.js';
import { closest } from '../core/config/validate.js';
import { jdbcSnapshotIngest } from './bronze/jdbc-snapshot-ingest.js';
import { kafkaBronzeIngest } from './bronze/kafka-bronze-ingest.js';
import { cdcSilverMerge } from './silver/cdc-silver-merge.js';
import type { JobTemplate, TemplateVersion } from './template.js';

/** The job catalog. */
export const templates: readonly JobTemplate[] = [jdbcSnapshotIngest, cdcSilverMerge, kafkaBronzeIngest];

export function findTemplate(name: string): JobTemplate {
  const t = templates.find((x) => x.name === name);
  if (t) return t;
  const hint = closest(name, templates.map((x) => x.name));
  throw new UsageError(`unknown template "${name}"${hint ? `; did you mean "${hint}"?` : ''} (known: ${templates.map((x) => x.name).join(', ')})`);
}

export function latestVersion(t: JobTemplate): TemplateVersion {
  return t.versions.reduce((a, b) => (b.version > a.version ? b : a));
}
