import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../../src/jobs/template.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { tempFiles } from '../../support/files.js';
import { connect, freshTenant, readDeltaWithDeltaRs, readIcebergWithPyIceberg } from '../../support/stack.js';
import { type Outcome, pausePoint, runInProcess } from '../../support/in-process.js';
import { testQuery } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools');

/**
 * Two cdc-silver-merge runs on one target, interleaved step by step and deterministically: run X
 * is paused before one of its steps while run Y runs from start to end, then X resumes. Whatever
 * the pause point, the table must equal the oracle, or a run exits 75 (a commit conflict) and its
 * rerun converges: never two successes and a wrong table.
 *
 * The batches are built so that every way of losing a delete shows: A (the later events) deletes
 * existing keys, deletes keys it also inserts (its merge has nothing to delete: only its tombstones
 * stop a late insert), and updates keys; B (late events) touches the same keys with older
 * sequences, plus keys of its own.
 */
const tenant = freshTenant();
let dir: string;
let setupClient: SparkConnectClient;

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const DAY0 = '2026-03-01'; // keys 1..30 inserted at sequence 1
const A = '2026-03-02';
const B = '2026-03-03';

function rowsSql(rows: [number, number, string | null, string][]): string {
  return rows.map(([id, ts, op, v]) => `(${id}, ${ts}, ${op === null ? 'NULL' : `'${op}'`}, '${v}')`).join(', ');
}

const batches: Record<string, [number, number, string | null, string][]> = {
  [DAY0]: range(1, 30).map((k) => [k, 1, 'c', `v1-${k}`]),
  [A]: [
    ...range(1, 10).map((k): [number, number, string, string] => [k, 10, 'd', `a-del-${k}`]),
    ...range(31, 40).flatMap((k): [number, number, string, string][] => [
      [k, 8, 'c', `a-ins-${k}`],
      [k, 10, 'd', `a-del-${k}`],
    ]),
    ...range(11, 20).map((k): [number, number, string, string] => [k, 10, 'u', `a-upd-${k}`]),
  ],
  [B]: [
    ...range(1, 10).map((k): [number, number, string, string] => [k, 5, 'u', `b-late-${k}`]),
    ...range(31, 40).map((k): [number, number, string, string] => [k, 5, 'c', `b-late-${k}`]),
    ...range(11, 20).map((k): [number, number, string, string] => [k, 5, 'u', `b-late-${k}`]),
    ...range(21, 30).map((k): [number, number, string, string] => [k, 5, 'u', `b-upd-${k}`]),
  ],
};

/**
 * A batch whose deletes meet no row (keys it inserts and deletes itself): it changes nothing in
 * silver, so its merge is not sent; only its tombstones stop the late inserts of the other batch.
 */
const A2 = '2026-03-04';
const B2 = '2026-03-05';
batches[A2] = range(31, 40).flatMap((k): [number, number, string, string][] => [
  [k, 8, 'c', `a-ins-${k}`],
  [k, 10, 'd', `a-del-${k}`],
]);
batches[B2] = [
  ...range(31, 40).map((k): [number, number, string, string] => [k, 5, 'c', `b-late-${k}`]),
  ...range(21, 30).map((k): [number, number, string, string] => [k, 5, 'u', `b-upd-${k}`]),
];
const oracle2 = [...range(1, 20).map((k) => ({ id: k, ts: 1, v: `v1-${k}` })), ...range(21, 30).map((k) => ({ id: k, ts: 5, v: `b-upd-${k}` }))];

/** What silver must hold after both batches, in any order. */
const oracle = [...range(11, 20).map((k) => ({ id: k, ts: 10, v: `a-upd-${k}` })), ...range(21, 30).map((k) => ({ id: k, ts: 5, v: `b-upd-${k}` }))];

const config = (format: 'iceberg' | 'delta', table: string) => `
job    { template = "cdc-silver-merge", schema-version = 2, name = "it-concurrency" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }
target { table = "${table}", format = ${format}, catalog = "${format === 'iceberg' ? 'lake' : 'spark_catalog'}" }
`;

/** One run of the batch of `date`, in this process, on its own Spark session. */
function run(format: 'iceberg' | 'delta', table: string, date: string, beforeStep?: (s: Step) => Promise<void>): Promise<Outcome> {
  return runInProcess(
    {
      configFile: join(dir, `${table}.conf`),
      envFile: join(dir, 'platform.conf'),
      overrides: [`source.where="_snapshot_date = DATE'${date}'"`],
      env: {},
      runId: `it-conc-${table}-${date}-${Math.random().toString(36).slice(2, 8)}`,
    },
    beforeStep,
  );
}

/** X paused before `pauseAt` while Y runs to its end; a run that lost a commit race (75) is rerun. */
async function interleave(format: 'iceberg' | 'delta', table: string, x: string, y: string, pauseAt: string, expected = oracle) {
  await writeConfig(format, table);
  expect((await run(format, table, DAY0)).code).toBe(0);

  const pause = pausePoint();
  const first = run(format, table, x, pause.hold(pauseAt));
  await Promise.race([pause.reached, first]);
  const second = await run(format, table, y);
  pause.release();
  const firstOutcome = await first;

  const codes = [firstOutcome.code, second.code];
  for (const c of codes) expect([0, 75], `exit codes ${codes.join(', ')}`).toContain(c);
  // A run that lost the race is retried by the orchestrator: its rerun must succeed and converge.
  if (firstOutcome.code === 75) expect((await run(format, table, x)).code).toBe(0);
  if (second.code === 75) expect((await run(format, table, y)).code).toBe(0);
  expect(read(format, table)).toEqual(expected);
  return { reachedPause: firstOutcome.steps.includes(pauseAt), codes, first: firstOutcome };
}

async function writeConfig(format: 'iceberg' | 'delta', table: string) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(join(dir, `${table}.conf`), config(format, table));
}

function read(format: 'iceberg' | 'delta', table: string) {
  const rows = format === 'iceberg' ? readIcebergWithPyIceberg(`${tenant.id}_silver`, table) : readDeltaWithDeltaRs(`${tenant.root}/silver/${table}`);
  return rows.map((r) => ({ id: Number(r.id), ts: Number(r.ts), v: String(r.v) })).sort((a, b) => a.id - b.id);
}

beforeAll(async () => {
  dir = tempFiles({
    'platform.conf': `catalogs { lake { format = iceberg, default = true }, spark_catalog { format = delta } }\ntenants { ${tenant.id} { storage-roots = ["${tenant.root}"] } }`,
  });
  setupClient = connect();
  for (const [date, rows] of Object.entries(batches)) {
    const q = testQuery(
      `SELECT *, 'x' AS _lake_tenant, 'it' AS _lake_source, current_timestamp() AS _lake_ingested_at, DATE'${date}' AS _snapshot_date FROM VALUES ${rowsSql(rows)} AS t(id, ts, op, v)`,
    );
    await setupClient.execute(
      compileCommandPlan(q.writeFiles(`${tenant.root}/bronze/orders_cdc`, 'parquet', { mode: 'append', partitionBy: ['_snapshot_date'] }), { reveal: true }),
    );
  }
});
afterAll(async () => {
  await setupClient?.releaseSession().catch(() => undefined);
  setupClient?.close();
});

// Where a pause can fall: after the run measured (its view of silver and the tombstones is then
// old), between its two commits, after its merge (before it reads the commits since its first read
// and decides whether to look again: the other run's commits land in its window, so it must look).
let n = 0;
const LOOK = 'window-commits';
const lookStep = (format: 'iceberg' | 'delta', pauseAt: string) => (pauseAt === LOOK && format === 'delta' ? 'window-commits-silver' : pauseAt);
/** A run paused after its own commits while the other run committed: it took the second look. */
function looked(r: { first: Outcome }, pauseAt: string) {
  if (pauseAt === LOOK) expect(r.first.steps).toContain('find-resurrected');
}

describe.each(['iceberg', 'delta'] as const)('two runs on one %s table, interleaved step by step', (format) => {
  it.each(['measure', 'merge', LOOK])('the late batch paused before %s while the later batch runs', async (pauseAt) => {
    const r = await interleave(format, `late_${format}_${n++}`, B, A, lookStep(format, pauseAt));
    expect(r.reachedPause).toBe(true);
    looked(r, pauseAt);
  });

  it.each(['record-tombstones', 'merge', LOOK])('the later batch paused before %s while the late batch runs', async (pauseAt) => {
    const r = await interleave(format, `later_${format}_${n++}`, A, B, lookStep(format, pauseAt));
    expect(r.reachedPause).toBe(true);
    looked(r, pauseAt);
  });

  it.each(['record-tombstones', LOOK])('a delete-only batch paused before %s while late inserts of its keys run', async (pauseAt) => {
    const r = await interleave(format, `tomb_${format}_${n++}`, A2, B2, lookStep(format, pauseAt), oracle2);
    expect(r.reachedPause).toBe(true);
    looked(r, pauseAt);
    // Its deletes met no row when it measured: no merge was sent, its tombstones did the work.
    expect(r.first.steps).not.toContain('merge');
  });

  it('late inserts paused before their merge while a delete-only batch runs', async () => {
    const r = await interleave(format, `tomb_late_${format}_${n++}`, B2, A2, 'merge', oracle2);
    expect(r.reachedPause).toBe(true);
  });
});
