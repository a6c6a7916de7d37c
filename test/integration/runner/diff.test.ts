import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { rows as arrowRows } from '../../../src/spark/arrow.js';
import { compileRelationPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { freshTenant, remote, runCli, runJob, useClient } from '../../support/stack.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * `diff` (and `run --dry-run`) writes nothing and predicts what the run then reports. One row of
 * CASES per template and situation (a table that does not exist yet, a rerun that replaces a date,
 * a CDC batch that updates and deletes): the lake's listing (every file under the tenant's root,
 * with its size and mtime) and every table's current snapshot or version are the same before and
 * after the diff, and the real run that follows reports exactly the metrics the diff predicted.
 * The cases run in order: later ones read what earlier runs wrote. Delta takes part through
 * bronze (its versions compared like Iceberg's snapshots); a diff sends no command whatever the
 * format, so the CDC merge cases run on Iceberg only (a Delta MERGE costs ~45 s of server time here).
 */

const tenant = freshTenant();
// Created here: the cases' configs name the SQLite file in it.
const dir = tempFiles({});
let client: SparkConnectClient;
useClient((c) => (client = c));

const DAY1 = '2026-07-05';
const DAY2 = '2026-07-06';

function fill(rows: string): void {
  execFileSync('python3', [
    '-c',
    `import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER, ts INTEGER, op TEXT, name TEXT, amount INTEGER)")\ndb.execute("DELETE FROM orders")\ndb.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", ${rows})\ndb.commit()`,
    join(dir, 'shop.db'),
  ]);
}

const head = (template: string, version: number) =>
  `job { template = "${template}", schema-version = ${version}, name = "it-diff-${template}" }\ntenant { id = "${tenant.id}", storage-root = "${tenant.root}" }\n`;

const ingest = (format: string, catalog: string, date: string) =>
  `${head('jdbc-snapshot-ingest', 2)}source { table = "orders", url = "jdbc:sqlite:${join(dir, 'shop.db')}", driver = "org.sqlite.JDBC" }
target { table = "orders_${format}", snapshot-date = "${date}", format = ${format}, catalog = "${catalog}" }`;

const merge = (format: string, catalog: string, date: string) =>
  `${head('cdc-silver-merge', 2)}source { table = "orders_${format}", format = ${format}, catalog = "${catalog}", snapshot-date = "${date}" }
cdc    { primary-key = ["id"], sequence-by = ["ts"], op-column = "op", delete-values = ["d"] }
target { table = "orders_${format}", format = ${format}, catalog = "${catalog}" }`;

const gold = `${head('gold-publish', 1)}transform { sql = """SELECT :logical_date AS sale_date, name, CAST(sum(amount) AS BIGINT) AS revenue FROM silver.orders_iceberg GROUP BY name""" }
target { table = "daily_sales", catalog = "lake", grain = ["sale_date", "name"], mode = replace-range, range-column = "sale_date", range-days = 1 }
expectations = [
  { name = "revenue_positive", type = expression, expr = "revenue > 0", action = fail }
  { name = "big_enough", type = expression, expr = "revenue > 15", action = warn }
]`;

interface Case {
  name: string;
  /** The source rows (SQLite) the case runs on, when it changes them. */
  source?: string;
  config: string;
  logicalDate?: string;
  /** What the diff must say beside the metrics: created tables, not-predicted steps. */
  diff: (d: any, status: any) => void;
}

const CASES: Case[] = [
  {
    name: 'jdbc-snapshot-ingest v2 into a new Iceberg table',
    source: `[(1, 1, "c", "one", 10), (2, 1, "c", "two", 20), (3, 1, "c", "three", 30)]`,
    config: ingest('iceberg', 'lake', DAY1),
    diff: (d, s) => {
      const c = d.changes.find((x: any) => x.table === `lake.${tenant.id}_bronze.orders_iceberg`);
      expect(c.create.columns.map((f: any) => f.name)).toEqual(expect.arrayContaining(['id', 'ts', 'op', 'name', 'amount', '_snapshot_date']));
      expect(s.outputs[0].metrics).toEqual({ rowsWritten: 3 });
    },
  },
  {
    name: 'jdbc-snapshot-ingest v2 into a new Delta table',
    config: ingest('delta', 'spark_catalog', DAY1),
    diff: (d) => expect(d.changes.some((x: any) => x.create && x.format === 'delta')).toBe(true),
  },
  {
    name: 'cdc-silver-merge v2 into a new Iceberg silver table',
    config: merge('iceberg', 'lake', DAY1),
    diff: (d, s) => {
      expect(d.changes.find((x: any) => x.table === `lake.${tenant.id}_silver.orders_iceberg`).create).toBeDefined();
      expect(s.outputs[0].metrics).toEqual({ inserted: 3, updated: 0, deleted: 0, late: 0 });
    },
  },
  {
    name: 'gold-publish replace-range into a new table',
    config: gold,
    logicalDate: DAY1,
    diff: (d, s) => {
      expect(d.changes.find((x: any) => x.table === `lake.${tenant.id}_gold.daily_sales`).create).toBeDefined();
      // The one row the warning would count, shown.
      const big = s.outputs[0].expectations.find((e: any) => e.name === 'big_enough');
      expect(big).toMatchObject({ outcome: 'warned', failedRows: 1 });
      expect(big.samples.map((r: any) => [r.name, r.revenue])).toEqual([['one', 10]]);
    },
  },
  {
    name: 'jdbc-snapshot-ingest v2: the next day into the existing Iceberg table',
    source: `[(1, 2, "u", "one*", 11), (2, 2, "d", "two", 20), (4, 2, "c", "four", 40)]`,
    config: ingest('iceberg', 'lake', DAY2),
    diff: (d) => expect(d.changes.every((x: any) => !x.create)).toBe(true),
  },
  {
    name: 'jdbc-snapshot-ingest v2: the same day again replaces its date',
    config: ingest('iceberg', 'lake', DAY2),
    diff: (d) => {
      const w = d.changes.flatMap((x: any) => x.writes).find((x: any) => x.replaces);
      expect(w.replaces).toContain('_snapshot_date');
      expect(w.rowsReplaced).toBe(3);
    },
  },
  { name: 'jdbc-snapshot-ingest v2: the next day into the existing Delta table', config: ingest('delta', 'spark_catalog', DAY2), diff: () => undefined },
  {
    name: 'cdc-silver-merge v2: an update, a delete and an insert into Iceberg',
    config: merge('iceberg', 'lake', DAY2),
    diff: (_d, s) => expect(s.outputs[0].metrics).toEqual({ inserted: 1, updated: 1, deleted: 1, late: 0 }),
  },
  {
    name: 'gold-publish replace-range: the next day',
    config: gold,
    logicalDate: DAY2,
    diff: (d) => {
      const w = d.changes.flatMap((x: any) => x.writes).find((x: any) => x.replaces);
      expect(w.replaces).toContain('sale_date');
      expect(w.rowsReplaced).toBe(0);
    },
  },
  {
    name: 'gold-publish replace-range: the same day again',
    config: gold,
    logicalDate: DAY2,
    // Nothing changed since: the diff says the run would write nothing, as the run then commits nothing.
    diff: (d, s) => {
      expect(d.changes.flatMap((x: any) => x.writes).filter((x: any) => x.replaces)).toEqual([]);
      expect(s.outputs[0].committed).toBe(false);
    },
  },
];

/** Every file under the tenant's root, with its size and modification time. */
function listing(): string[] {
  const root = fileURLToPath(tenant.root);
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(`${p.slice(root.length)} ${statSync(p).size} ${statSync(p).mtimeMs}`);
    }
  };
  walk(root);
  return out.sort();
}

const query = async (text: string) => {
  const { table } = await client.execute(compileRelationPlan(testQuery(text).rel, { reveal: true }));
  return table ? arrowRows(table) : [];
};

/** Every table of the tenant's namespaces in both catalogs, with its current snapshot (Iceberg) or version (Delta). */
async function commits(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [catalog, format] of [
    ['lake', 'iceberg'],
    ['spark_catalog', 'delta'],
  ] as const) {
    const namespaces = (await query(`SHOW NAMESPACES IN ${catalog}`)).map((r) => String(r.namespace)).filter((n) => n.startsWith(`${tenant.id}_`));
    for (const ns of namespaces.sort())
      for (const t of await query(`SHOW TABLES IN ${catalog}.${ns}`)) {
        const name = `${catalog}.${ns}.${String(t.tableName)}`;
        const [r] =
          format === 'iceberg'
            ? await query(`SELECT CAST(snapshot_id AS STRING) AS c FROM ${name}.refs WHERE name = 'main'`)
            : await query(`DESCRIBE HISTORY ${name} LIMIT 1`);
        out[name] = String(r?.c ?? r?.version ?? 'none');
      }
  }
  return out;
}

/** `lakehouse-jobs diff`, its status document read from --status-file. */
async function diffCli(config: string, args: string[]) {
  const statusFile = join(dir, 'diff-status.json');
  const r = await runCli(['diff', '--config', config, '--env', join(dir, 'platform.conf'), '--remote', remote(), '--status-file', statusFile, ...args]);
  return { ...r, status: JSON.parse(readFileSync(statusFile, 'utf8')) };
}

beforeAll(async () => {
  // The test's own reads see every commit: Iceberg's catalog would serve a table cached up to 30 s.
  await client.config.set({ 'spark.sql.catalog.lake.cache-enabled': 'false' });
  writeFileSync(
    join(dir, 'platform.conf'),
    `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\njdbc { inline-urls = allow }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  );
});

describe('diff writes nothing and predicts what the run reports', () => {
  it.each(CASES.map((c, i) => [c.name, c, i] as const))(
    '%s',
    async (_name, c, i) => {
      if (c.source) fill(c.source);
      const file = join(dir, `case-${i}.conf`);
      writeFileSync(file, c.config);
      const dates = c.logicalDate ? ['--logical-date', c.logicalDate] : [];
      const before = { files: listing(), commits: await commits() };
      // Every other case through `run --dry-run`: the two spellings are one command.
      const d = i % 2 === 0 ? await diffCli(file, dates) : await runJob(file, join(dir, 'platform.conf'), ['--dry-run', ...dates]);
      expect(d.code, d.stderr).toBe(0);
      expect(d.status.command).toBe('diff');
      expect({ files: listing(), commits: await commits() }).toEqual(before);
      c.diff(d.status.diff, d.status);

      const r = await runJob(file, join(dir, 'platform.conf'), dates);
      expect(r.code, r.stderr).toBe(0);
      // The expectations as the run reports them (a diff adds sample rows to the failing ones).
      const expectations = (o: any) => o.expectations?.map(({ samples: _, ...e }: any) => e);
      const metrics = (s: any) => ({
        outputs: s.outputs.map((o: any) => ({ table: o.table ?? o.path, metrics: o.metrics, committed: o.committed, expectations: expectations(o) })),
        metrics: s.metrics,
      });
      expect(metrics(d.status)).toEqual(metrics(r.status));
      expect(d.status.diff.notPredicted.filter((n: any) => /measure|count-snapshot|publish/.test(n.step))).toEqual([]);
    },
    300_000,
  );
});
