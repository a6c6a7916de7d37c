import type { JobTemplate } from './template.js';

/**
 * Each template's module on its own, by template name: `validate`, `plan` and `run` load the one
 * template a config names instead of the whole catalog (src/jobs/registry.ts), so a one-config
 * process builds one template's zod schemas, not all of them (cold start, issue 13). The catalog
 * stays the one list of templates: a template missing here still works through it (only slower),
 * and test/unit/jobs/loaders.test.ts fails until it is added.
 */
export const templateLoaders: Readonly<Record<string, () => Promise<JobTemplate>>> = {
  'jdbc-snapshot-ingest': async () => (await import('./bronze/jdbc-snapshot-ingest.js')).jdbcSnapshotIngest,
  'kafka-bronze-ingest': async () => (await import('./bronze/kafka-bronze-ingest.js')).kafkaBronzeIngest,
  'cdc-silver-merge': async () => (await import('./silver/cdc-silver-merge.js')).cdcSilverMerge,
  'dv-hub': async () => (await import('./vault/dv-hub.js')).dvHub,
  'dv-link': async () => (await import('./vault/dv-link.js')).dvLink,
  'dv-satellite': async () => (await import('./vault/dv-satellite.js')).dvSatellite,
  'gold-publish': async () => (await import('./gold/gold-publish.js')).goldPublish,
  'scd2-dim-load': async () => (await import('./gold/scd2-dim-load.js')).scd2DimLoad,
  'table-maintenance': async () => (await import('./ops/table-maintenance.js')).tableMaintenance,
  'iceberg-zero-copy-append': async () => (await import('./ops/iceberg-zero-copy-append.js')).icebergZeroCopyAppend,
  'freshness-check': async () => (await import('./ops/freshness-check.js')).freshnessCheck,
  reconcile: async () => (await import('./ops/reconcile.js')).reconcile,
};

/** The template of that name from its own module, or undefined when it has no loader here. */
export async function loadTemplate(name: string): Promise<JobTemplate | undefined> {
  const load = Object.hasOwn(templateLoaders, name) ? templateLoaders[name] : undefined;
  const template = await load?.();
  // A loader that names the wrong module would run another template under this name.
  return template?.name === name ? template : undefined;
}
