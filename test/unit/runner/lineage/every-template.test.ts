import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJob, type LoadedJob } from '../../../../src/runner/load-job.js';
import { ConfigError } from '../../../../src/core/errors.js';
import { createLogger } from '../../../../src/core/logger.js';
import { templates } from '../../../../src/jobs/registry.js';
import { LineageRun } from '../../../../src/runner/lineage/index.js';
import { type Access, planAccess } from '../../../../src/app/plan-view.js';
import type { Transport } from '../../../../src/runner/lineage/transports.js';
import { tempFiles } from '../../../support/files.js';
import { openLineageProblems } from '../../../support/openlineage.js';
import { repoRoot } from '../../../support/stack.js';

/**
 * Lineage from every template of the registry, without Spark: each example config of each template
 * (every version's, and any other `configs/examples/<template>.*.conf`) is loaded, its plan built,
 * and the START and COMPLETE events it yields are checked against the OpenLineage contract and
 * against the datasets the example really reads and writes, named per OpenLineage's naming spec
 * (Iceberg and Delta tables by location with their catalog name a symlink, JDBC by host, port,
 * database and table, Kafka by the first bootstrap server and the topic). A template added to the
 * registry fails here until its datasets are listed below: lineage is part of a template.
 */

const SECRET = 'pg-secret-9876';
/** The brokers of the platform's cluster, two of them: only the first names the Kafka datasets. */
const env = { LAKEHOUSE_LAKE_HOME: '/srv/lake', LAKEHOUSE_KAFKA_BOOTSTRAP: 'kafka-1.example:9093,kafka-2.example:9093', CRM_DB_PASSWORD: SECRET };

const lake = (layer: string, table: string, catalog: string) => `file /srv/lake/acme/${layer}/${table} @ ${catalog}:acme_${layer}.${table}`;

/** Per example: its input and output datasets, `<namespace> <name>[ @ <symlink namespace>:<symlink name>]`. */
const EXPECTED: Record<string, { inputs: string[]; outputs: string[] }> = {
  'configs/examples/jdbc-snapshot-ingest.v1.conf': {
    inputs: ['sqlite:///srv/lake/sources/shop.db orders_cdc'],
    outputs: ['file /srv/lake/acme/bronze/orders_cdc'],
  },
  'configs/examples/jdbc-snapshot-ingest.v2.conf': {
    inputs: ['sqlite:///srv/lake/sources/shop.db orders_cdc'],
    outputs: [lake('bronze', 'orders_cdc_table', 'lake')],
  },
  'configs/examples/jdbc-snapshot-ingest.postgres.v1.conf': {
    inputs: ['postgres://127.0.0.1:15432 lakehouse_test.public.customers'],
    outputs: ['file /srv/lake/acme/bronze/customers'],
  },
  'configs/examples/kafka-bronze-ingest.v1.conf': {
    inputs: ['kafka://kafka-1.example:9093 acme.shop.orders'],
    outputs: [lake('bronze', 'orders_events', 'lake')],
  },
  'configs/examples/cdc-silver-merge.v1.conf': {
    inputs: ['file /srv/lake/acme/bronze/orders_cdc'],
    outputs: [lake('silver', 'orders', 'lake'), lake('silver', 'orders__cdc_tombstones', 'lake')],
  },
  'configs/examples/cdc-silver-merge.v2.conf': {
    inputs: [lake('bronze', 'orders_cdc_table', 'lake')],
    outputs: [lake('silver', 'orders_delta', 'spark_catalog'), lake('silver', 'orders_delta__cdc_tombstones', 'spark_catalog')],
  },
  'configs/examples/dv-hub.v1.conf': { inputs: [lake('bronze', 'orders_cdc_table', 'lake')], outputs: [lake('silver', 'hub_order', 'lake')] },
  'configs/examples/dv-link.v1.conf': { inputs: [lake('bronze', 'orders_cdc_table', 'lake')], outputs: [lake('silver', 'link_order_customer', 'lake')] },
  'configs/examples/dv-satellite.v1.conf': { inputs: [lake('bronze', 'orders_cdc_table', 'lake')], outputs: [lake('silver', 'sat_order', 'lake')] },
  'configs/examples/gold-publish.v1.conf': {
    // The transform's SQL reads silver.orders: the template declares it (lineage does not parse SQL).
    inputs: [lake('silver', 'orders', 'lake')],
    outputs: [lake('gold', 'daily_customer_sales', 'lake'), lake('gold', 'daily_customer_sales__quarantine', 'lake')],
  },
  'configs/examples/gold-publish.incremental.v1.conf': {
    // The followed table's changelog (`<table>.changes`) is a read of that table, as its metadata tables are.
    inputs: [lake('silver', 'shop_orders', 'lake')],
    outputs: [lake('gold', 'daily_shop_sales', 'lake'), lake('gold', 'daily_shop_sales__quarantine', 'lake')],
  },
  'configs/examples/gold-publish.vault.v1.conf': {
    // The raw vault's hub and satellite (Iceberg) in, a Delta gold table out.
    inputs: [lake('silver', 'hub_order', 'lake'), lake('silver', 'sat_order', 'lake')],
    outputs: [lake('gold', 'orders_current', 'spark_catalog')],
  },
  'configs/examples/scd2-dim-load.v1.conf': { inputs: [lake('silver', 'orders', 'lake')], outputs: [lake('gold', 'dim_order_status', 'lake')] },
  'configs/examples/scd2-dim-load.v2.conf': { inputs: [lake('bronze', 'orders_cdc_table', 'lake')], outputs: [lake('gold', 'dim_orders', 'spark_catalog')] },
  // Maintenance rewrites the tables it maintains (declared: its procedures are SQL text).
  'configs/examples/table-maintenance.v1.conf': { inputs: [], outputs: [lake('silver', 'orders', 'lake'), lake('silver', 'orders_delta', 'spark_catalog')] },
  // Checks read the tables' metadata (or, with event-time, the table) and write nothing.
  'configs/examples/freshness-check.v1.conf': {
    inputs: [lake('silver', 'orders', 'lake'), lake('silver', 'orders_delta', 'spark_catalog'), lake('bronze', 'orders_cdc_table', 'lake')],
    outputs: [],
  },
  // The bronze snapshot and its JDBC source, both read; nothing written.
  'configs/examples/reconcile.v1.conf': {
    inputs: [lake('bronze', 'orders_cdc_table', 'lake'), 'sqlite:///srv/lake/sources/shop.db orders_cdc'],
    outputs: [],
  },
  'configs/examples/iceberg-zero-copy-append.v1.conf': {
    inputs: [lake('silver', 'orders_2025', 'lake')],
    outputs: [lake('silver', 'orders_history', 'lake')],
  },
};

/** Every example config of a template: its versions' and any `<template>.<variant>.v<N>.conf`. */
function examplesOf(template: { name: string; versions: readonly { example: string }[] }): string[] {
  const dir = join(repoRoot, 'configs/examples');
  const variants = readdirSync(dir)
    .filter((f) => f.startsWith(`${template.name}.`) && /\.v\d+\.conf$/.test(f))
    .map((f) => `configs/examples/${f}`);
  return [...new Set([...template.versions.map((v) => v.example), ...variants])].sort();
}

/** The local platform config, or the example's template's own (`<template>.platform.conf`) when that one refuses it. */
async function load(example: string): Promise<LoadedJob> {
  const attempt = (base: string) => {
    const dir = tempFiles({ 'platform.conf': `${readFileSync(base, 'utf8')}\nlineage { transports = [{ type = console }] }\n` });
    return loadJob({
      configFile: join(repoRoot, example),
      envFile: join(dir, 'platform.conf'),
      overrides: [],
      env,
      runId: 'scheduled__2026-07-05T00:00:00+00:00',
      logicalDate: '2026-07-05',
    });
  };
  try {
    return await attempt(join(repoRoot, 'configs/examples/platform-local.conf'));
  } catch (e) {
    const own = join(repoRoot, dirname(example), `${basename(example).split('.')[0]}.platform.conf`);
    if (!(e instanceof ConfigError) || !existsSync(own)) throw e;
    return attempt(own);
  }
}

type Dataset = { namespace: string; name: string; facets: { symlinks?: { identifiers: { namespace: string; name: string; type: string }[] } } };
const named = (d: Dataset) => {
  const link = d.facets.symlinks?.identifiers[0];
  return `${d.namespace} ${d.name}${link ? ` @ ${link.namespace}:${link.name}` : ''}`;
};

/** Whether an entry of validate's listing stands for a lineage dataset (as `named` prints it). */
function lists(a: Access, dataset: string): boolean {
  switch (a.kind) {
    case 'table': {
      // A table is named by its catalog name (its location is known where the run creates it).
      const [catalog, ...rest] = a.table.split('.');
      return dataset.endsWith(` @ ${catalog}:${rest.join('.')}`) && (!a.location || dataset.startsWith(`${a.location.replace(/^file:\/\//, 'file ')} @`));
    }
    case 'path':
      // A partition's folder (parquet bronze's `_snapshot_date=<date>`, written whole) is listed by
      // its path; lineage names the dataset it belongs to.
      return dataset === a.path.replace(/^file:\/\//, 'file ').replace(/(\/[A-Za-z_][A-Za-z0-9_]*=[^/]*)+$/, '');
    case 'jdbc':
      return dataset === `${a.at} ${a.table}`;
    case 'topic':
      return dataset === `${a.at} ${a.topic}`;
  }
}

/** What OpenLineage's naming spec allows for the sources this runner reads and writes. */
function namingProblems(d: Dataset): string[] {
  const problems: string[] = [];
  const where = `${d.namespace} ${d.name}`;
  if (d.namespace === 'file') {
    if (!d.name.startsWith('/') || d.name.endsWith('/')) problems.push(`${where}: a file dataset is named by its absolute path`);
  } else if (/^(s3|gs|hdfs|abfss|wasbs):\/\/[^/]+$/.test(d.namespace)) {
    if (d.name.startsWith('/')) problems.push(`${where}: an object store path has no leading slash`);
  } else if (/^(postgres|mysql|sqlserver|db2|redshift|oracle):\/\/[^/:@]+:\d+$/.test(d.namespace)) {
    if (!/^[^.]+(\.[^.]+){1,2}$/.test(d.name)) problems.push(`${where}: a JDBC table is <database>[.<schema>].<table>`);
  } else if (/^kafka:\/\/[^/:@,]+:\d+$/.test(d.namespace)) {
    if (!d.name || d.name.includes(',')) problems.push(`${where}: a Kafka dataset is one topic`);
  } else if (!/^sqlite:\/\/\/\S+$/.test(d.namespace)) problems.push(`${where}: not a namespace of OpenLineage's naming`);
  for (const s of d.facets.symlinks?.identifiers ?? [])
    if (s.type !== 'TABLE' || !/^[a-z_]+\.[a-z0-9_]+$/.test(s.name)) problems.push(`${where}: bad symlink ${JSON.stringify(s)}`);
  return problems;
}

const cases = templates.flatMap((t) => examplesOf(t).map((example) => ({ template: t.name, example })));

describe('lineage from every registered template, its example configs planned without Spark', () => {
  it('covers every template of the registry', () => {
    expect(new Set(cases.map((c) => c.template))).toEqual(new Set(templates.map((t) => t.name)));
  });

  it.each(cases)('$example: valid events naming what it reads and writes', async ({ template, example }) => {
    const expected = EXPECTED[example];
    expect(expected, `${example} (template ${template}): list the datasets it reads and writes in EXPECTED`).toBeDefined();
    const loaded = await load(example);
    const events: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const memory: Transport = { name: 'memory', send: async (line) => void events.push(JSON.parse(line)) };
    const run = new LineageRun(loaded.platform.lineage!, [memory], {
      loaded,
      orchestratorRunId: 'scheduled__2026-07-05',
      logicalDate: '2026-07-05',
      env,
      logger: createLogger('error', {}, () => undefined),
    });
    await run.start();
    await run.finish({ state: 'succeeded' }, async () => [{ name: 'id', type: 'bigint' }]);
    expect(events.map((e) => e.eventType)).toEqual(['START', 'COMPLETE']);
    for (const e of events) {
      expect(openLineageProblems(e)).toEqual([]);
      expect(e.job).toMatchObject({ namespace: `lakehouse-jobs.${loaded.tenant.id}`, name: `${template}.${loaded.config.job.name}` });
      expect({ inputs: e.inputs.map(named).sort(), outputs: e.outputs.map(named).sort() }).toEqual({
        inputs: [...expected!.inputs].sort(),
        outputs: [...expected!.outputs].sort(),
      });
      expect([...e.inputs, ...e.outputs].flatMap(namingProblems)).toEqual([]);
      // Secrets and the tenant's storage url scheme never leak into a name.
      expect(JSON.stringify(e)).not.toContain(SECRET);
    }
    // `validate` lists (at least) every dataset lineage names: its table, files, JDBC table, topics.
    const access = planAccess(loaded.plan);
    const missing = (datasets: Dataset[], listed: Access[]) => datasets.map(named).filter((d) => !listed.some((a) => lists(a, d)));
    expect({ reads: missing(events[0]!.inputs, access.reads), writes: missing(events[0]!.outputs, access.writes) }).toEqual({ reads: [], writes: [] });
  });
});
