import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { createTopic, kafkaBootstrap, produce } from '../../support/kafka.js';
import { openLineageProblems } from '../../support/openlineage.js';
import { freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg, remote, runCli } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'py-tools');

/**
 * OpenLineage events of real runs on the local Spark Connect server: jdbc-snapshot-ingest from a
 * SQLite file into an Iceberg bronze table, then cdc-silver-merge from it into a Delta silver table,
 * dv-hub from the same bronze table, gold-publish from the silver table (its SQL transform) and
 * kafka-bronze-ingest from a topic of the local broker, each sent to a file and to an HTTP
 * receiver. The schemas the events report are compared with what PyIceberg and delta-rs read from
 * the tables (not Spark); a failing run ends with FAIL.
 */

type Event = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const tenant = freshTenant();
const PARENT = '01890a5d-ac96-774b-bcce-b302099a8057';
let dir: string;
let receiver: Server;
const posted: Event[] = [];

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url === '/api/v1/lineage' && req.headers.authorization === 'Bearer it-lineage-token') posted.push(JSON.parse(body) as Event);
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as { port: number }).port;
  dir = tempFiles({});
  execFileSync('python3', [
    '-c',
    `import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE orders_cdc (id INTEGER, ts INTEGER, op TEXT, name TEXT)")\ndb.executemany("INSERT INTO orders_cdc VALUES (?, ?, ?, ?)", [(1, 10, 'c', 'one'), (2, 10, 'c', 'two'), (2, 20, 'u', 'two*'), (3, 10, 'c', 'three'), (3, 30, 'd', 'three')])\ndb.commit()`,
    join(dir, 'shop.db'),
  ]);
  tempFilesInto(dir, {
    'platform.conf': `
catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }
jdbc { inline-urls = allow }
tenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }
kafka.clusters.local {
  bootstrap-servers = "${kafkaBootstrap()}"
  tenants { ${tenant.id} { topic-prefixes = ["${tenant.id}."] } }
}
lineage {
  namespace = "it-platform"
  transports = [
    { type = file, path = "${join(dir, 'events.jsonl')}" }
    { type = http, url = "http://127.0.0.1:${port}", token { env = "IT_LINEAGE_TOKEN" } }
  ]
}`,
    'ingest.conf': `
job    { template = "jdbc-snapshot-ingest", schema-version = 2, name = "orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc", url = "jdbc:sqlite:${join(dir, 'shop.db')}", driver = "org.sqlite.JDBC" }
target { table = "orders", snapshot-date = "2026-07-05", format = iceberg, catalog = "lake" }`,
    'merge.conf': `
job    { template = "cdc-silver-merge", schema-version = 2, name = "orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders", format = iceberg, catalog = "lake", where = "id <> 99" }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"] }
target { table = "orders", format = delta, catalog = "spark_catalog" }`,
    'hub.conf': `
job     { template = "dv-hub", schema-version = 1, name = "hub-order" }
tenant  { id = "${tenant.id}", storage-root = "${tenant.root}" }
sources = [{ table = "orders", format = iceberg, catalog = "lake", record-source = "shop.orders", business-key = ["id"] }]
hub     { hash-key = "hk_order", business-key = ["order_id"] }
target  { table = "hub_order", catalog = "lake", format = iceberg }`,
    'gold.conf': `
job       { template = "gold-publish", schema-version = 1, name = "names" }
tenant    { id = "${tenant.id}", storage-root = "${tenant.root}" }
transform {
  sql = "SELECT :logical_date AS day, name, count(*) AS orders FROM silver.orders GROUP BY name"
  catalogs { silver = "spark_catalog" }
}
target    { table = "daily_names", catalog = "lake", grain = ["day", "name"], mode = replace-range, range-column = "day" }`,
    'kafka.conf': `
job    { template = "kafka-bronze-ingest", schema-version = 1, name = "events" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { topics = ["${tenant.id}.events"], value-format = json, value-schema { id = bigint, name = string } }
target { table = "events", format = delta, catalog = "spark_catalog" }`,
  });
});

afterAll(() => {
  if (receiver?.listening) {
    receiver.closeAllConnections();
    receiver.close();
  }
});

function tempFilesInto(into: string, files: Record<string, string>): void {
  const made = tempFiles(files);
  for (const name of Object.keys(files)) execFileSync('cp', [join(made, name), join(into, name)]);
}

let seen = 0;
/** Run the CLI; the events it appended to the file since the last run. */
async function run(
  config: string,
  set: string[] = [],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string; events: Event[]; ms: number }> {
  const started = Date.now();
  const r = await runCli(
    [
      '--config',
      join(dir, config),
      '--env',
      join(dir, 'platform.conf'),
      '--remote',
      remote(),
      '--run-id',
      `it__${config}`,
      '--logical-date',
      '2026-07-05',
      ...set.flatMap((s) => ['--set', s]),
    ],
    { IT_LINEAGE_TOKEN: 'it-lineage-token', ...env },
  );
  const lines = readFileSync(join(dir, 'events.jsonl'), 'utf8').trimEnd().split('\n');
  // Only this run's events: a run an earlier test gave up on may still have left its START.
  const events = lines
    .slice(seen)
    .map((l) => JSON.parse(l) as Event)
    .filter((e) => Date.parse(e.eventTime as string) >= started);
  seen = lines.length;
  return { code: r.code, stderr: r.stderr, events, ms: Date.now() - started };
}

const id = (d: Event) => `${d.namespace}/${d.name}`;
const bronzeId = () => `file/${tenant.root.replace(/^file:\/\//, '')}/bronze/orders`;
const silverId = () => `file/${tenant.root.replace(/^file:\/\//, '')}/silver/orders`;

// The shared machine may be slow: a run of a few seconds alone can take minutes under load.
describe('OpenLineage events of real runs', { timeout: 900_000 }, () => {
  let ingest: Event[];

  it('jdbc-snapshot-ingest: START and COMPLETE, the SQLite table in, the Iceberg bronze table out with the schema PyIceberg reads', async () => {
    const r = await run('ingest.conf');
    expect(r.code, r.stderr).toBe(0);
    ingest = r.events;
    expect(ingest.map((e) => e.eventType)).toEqual(['START', 'COMPLETE']);
    for (const e of ingest) expect(openLineageProblems(e)).toEqual([]);
    const [start, complete] = ingest as [Event, Event];
    expect(complete.run.runId).toBe(start.run.runId);
    expect(start.job).toMatchObject({ namespace: `it-platform.${tenant.id}`, name: 'jdbc-snapshot-ingest.orders' });
    expect(start.inputs.map(id)).toEqual([`sqlite://${join(dir, 'shop.db')}/orders_cdc`]);
    expect(complete.outputs.map(id)).toEqual([bronzeId()]);
    const out = complete.outputs[0];
    expect(out.facets.symlinks.identifiers).toEqual([{ namespace: 'lake', name: `${tenant.id}_bronze.orders`, type: 'TABLE' }]);
    // The schema the event reports is the table's, as a second engine reads it.
    const rows = readIcebergWithPyIceberg(`${tenant.id}_bronze`, 'orders');
    expect(rows).toHaveLength(5);
    expect(out.facets.schema.fields.map((f: Event) => f.name).sort()).toEqual(Object.keys(rows[0]!).sort());
    expect(out.facets.schema.fields).toEqual(
      expect.arrayContaining([
        { name: 'id', type: 'int' },
        { name: '_snapshot_date', type: 'date' },
      ]),
    );
    expect(complete.run.facets.tags.tags).toEqual(expect.arrayContaining([{ key: 'exit-code', value: '0', source: 'lakehouse-jobs' }]));
    // The same events went to the HTTP receiver, with the bearer token.
    expect(posted.slice(-2)).toEqual(ingest);
  });

  it('cdc-silver-merge: the bronze table in (the ingest output), the Delta silver table out, silver columns from bronze columns, the parent run', async () => {
    const r = await run('merge.conf', [], { OPENLINEAGE_PARENT_ID: `airflow-it/lakehouse_medallion.silver/${PARENT}` });
    expect(r.code, r.stderr).toBe(0);
    expect(r.events.map((e) => e.eventType)).toEqual(['START', 'COMPLETE']);
    for (const e of r.events) expect(openLineageProblems(e)).toEqual([]);
    const [start, complete] = r.events as [Event, Event];
    expect(complete.run.runId).toBe(start.run.runId);
    expect(start.run.runId).not.toBe(ingest[0]!.run.runId);
    expect(start.run.facets.parent).toMatchObject({ run: { runId: PARENT }, job: { namespace: 'airflow-it', name: 'lakehouse_medallion.silver' } });
    // The ingest's output is this run's input: the two jobs connect in a lineage graph.
    expect(start.inputs.map(id)).toEqual([bronzeId()]);
    expect(complete.outputs.map(id).sort()).toEqual([silverId(), `${silverId()}__cdc_tombstones`].sort());
    const silver = complete.outputs.find((o: Event) => id(o) === silverId());
    expect(silver.facets.symlinks.identifiers).toEqual([{ namespace: 'spark_catalog', name: `${tenant.id}_silver.orders`, type: 'TABLE' }]);
    const rows = readDeltaWithDeltaRs(`${tenant.root}/silver/orders`);
    expect(rows.map((x) => Number(x.id)).sort()).toEqual([1, 2]);
    const fields = silver.facets.schema.fields.map((f: Event) => f.name);
    expect([...fields].sort()).toEqual(Object.keys(rows[0]!).sort());
    expect(fields).not.toContain('op');
    expect(Object.keys(silver.facets.columnLineage.fields).sort()).toEqual([...fields].sort());
    for (const f of fields)
      expect(silver.facets.columnLineage.fields[f].inputFields).toEqual([
        {
          namespace: 'file',
          name: bronzeId().slice('file/'.length),
          field: f,
          transformations: [{ type: 'DIRECT', subtype: 'IDENTITY', description: '', masking: false }],
        },
      ]);
    // source.where's literal (99) is nowhere in the events.
    expect(JSON.stringify(r.events)).not.toMatch(/\b99\b/);
    expect(posted.slice(-2)).toEqual(r.events);
  });

  /** A successful run's two events, valid, one run id, its job named after the template. */
  async function completed(config: string, template: string, name: string): Promise<[Event, Event]> {
    const r = await run(config);
    expect(r.code, r.stderr).toBe(0);
    expect(r.events.map((e) => e.eventType)).toEqual(['START', 'COMPLETE']);
    for (const e of r.events) expect(openLineageProblems(e)).toEqual([]);
    const [start, complete] = r.events as [Event, Event];
    expect(complete.run.runId).toBe(start.run.runId);
    expect(start.job).toMatchObject({ namespace: `it-platform.${tenant.id}`, name: `${template}.${name}` });
    expect(posted.slice(-2)).toEqual(r.events);
    return [start, complete];
  }
  const root = () => tenant.root.replace(/^file:\/\//, '');
  const fieldNames = (d: Event) => d.facets.schema.fields.map((f: Event) => f.name).sort();

  it('dv-hub: the bronze table in, the hub table out with the schema PyIceberg reads', async () => {
    const [start, complete] = await completed('hub.conf', 'dv-hub', 'hub-order');
    expect(start.inputs.map(id)).toEqual([bronzeId()]);
    expect(complete.outputs.map(id)).toEqual([`file/${root()}/silver/hub_order`]);
    expect(complete.outputs[0].facets.symlinks.identifiers).toEqual([{ namespace: 'lake', name: `${tenant.id}_silver.hub_order`, type: 'TABLE' }]);
    const rows = readIcebergWithPyIceberg(`${tenant.id}_silver`, 'hub_order');
    expect(rows.map((r) => Number(r.order_id)).sort()).toEqual([1, 2, 3]);
    expect(fieldNames(complete.outputs[0])).toEqual(Object.keys(rows[0]!).sort());
  });

  it("gold-publish: the silver table its SQL transform reads (the merge's output) in, the gold table and its quarantine out", async () => {
    const [start, complete] = await completed('gold.conf', 'gold-publish', 'names');
    expect(start.inputs.map(id)).toEqual([silverId()]);
    expect(start.inputs[0].facets.symlinks.identifiers).toEqual([{ namespace: 'spark_catalog', name: `${tenant.id}_silver.orders`, type: 'TABLE' }]);
    const gold = `file/${root()}/gold/daily_names`;
    expect(complete.outputs.map(id)).toEqual(expect.arrayContaining([gold]));
    const rows = readIcebergWithPyIceberg(`${tenant.id}_gold`, 'daily_names');
    expect(rows.map((r) => r.name).sort()).toEqual(['one', 'two*']);
    expect(fieldNames(complete.outputs.find((o: Event) => id(o) === gold))).toEqual(Object.keys(rows[0]!).sort());
  });

  it('kafka-bronze-ingest: the topic in (kafka://<first broker>), the Delta bronze table out with the schema delta-rs reads', async () => {
    const topic = `${tenant.id}.events`;
    createTopic(topic, 1);
    produce(topic, [{ value: { id: 1, name: 'a' } }, { value: { id: 2, name: 'b' } }]);
    const [start, complete] = await completed('kafka.conf', 'kafka-bronze-ingest', 'events');
    expect(start.inputs.map(id)).toEqual([`kafka://${kafkaBootstrap().split(',')[0]}/${topic}`]);
    expect(complete.outputs.map(id)).toEqual([`file/${root()}/bronze/events`]);
    expect(complete.outputs[0].facets.symlinks.identifiers).toEqual([{ namespace: 'spark_catalog', name: `${tenant.id}_bronze.events`, type: 'TABLE' }]);
    const rows = readDeltaWithDeltaRs(`${tenant.root}/bronze/events`);
    expect(rows.map((r) => Number(r.id)).sort()).toEqual([1, 2]);
    expect(fieldNames(complete.outputs[0])).toEqual(Object.keys(rows[0]!).sort());
  });

  it('a failing run ends with FAIL and the error facet (code, exit code), under the run id of its START; a receiver that is down costs a warning, not the job', async () => {
    receiver.closeAllConnections();
    await new Promise<void>((r) => receiver.close(() => r()));
    const r = await run('merge.conf', ['source.table=missing_orders']);
    expect(r.stderr).toMatch(/lineage: sending the START event failed/);
    expect(r.stderr).not.toContain('it-lineage-token');
    expect(r.code, r.stderr).toBe(66);
    expect(r.events.map((e) => e.eventType)).toEqual(['START', 'FAIL']);
    for (const e of r.events) expect(openLineageProblems(e)).toEqual([]);
    expect(r.events[1]!.run.runId).toBe(r.events[0]!.run.runId);
    expect(r.events[1]!.run.facets.errorMessage).toMatchObject({
      message: expect.stringMatching(/^INPUT_MISSING \(exit 66, input\)/),
      programmingLanguage: 'TypeScript',
    });
    expect(r.events[1]!.inputs.map(id)).toEqual([`file/${tenant.root.replace(/^file:\/\//, '')}/bronze/missing_orders`]);
  });
});
