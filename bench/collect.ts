/**
 * Ours for "collect 1M rows × 10 columns": `client.execute(plan)` → one apache-arrow Table, as a job
 * would call it. One JSON line on stdout. The channel and session are set up with one AnalyzePlan
 * before the clock starts (as peer_collect.py does with spark.version); the checksum (sum of `a`) is
 * computed after it stops.
 *
 *   node FLAGS .cache/bench/build/bench/collect.js REMOTE SQL [table|sink]
 *
 * (FLAGS: the V8 flags of the CLI as scripts/lakehouse-jobs and the image run it, i.e.
 * scripts/build/node-flags bar --enable-source-maps; bench/harness.ts passes them)
 *
 * `sink` streams the result instead (`client.executeToSink`): each batch is summed and dropped, so
 * peak RSS should not grow with the number of rows.
 */
import { SparkConnectClient } from '../src/spark/client.js';
import { parseConnectionString } from '../src/spark/connection.js';
import { compileRelationPlan } from '../src/spark/plan/compile.js';
import { testQuery } from '../test/support/sql.js';

const [remote, sql, mode = 'table'] = process.argv.slice(2);
if (!remote || !sql || (mode !== 'table' && mode !== 'sink')) throw new Error('usage: collect.js REMOTE SQL [table|sink]');
const spec = parseConnectionString(remote);
if (spec.kind !== 'remote') throw new Error(`${remote} is not an sc:// remote`);

const client = SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-bench' });
try {
  await client.analyze.sparkVersion();
  const plan = compileRelationPlan(testQuery(sql).rel, { reveal: true });
  if (mode === 'sink') {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let sumA = 0n;
    let rows = 0;
    let cols = 0;
    let batches = 0;
    const summary = await client.executeToSink(plan, {
      write(batch) {
        const a = batch.getChild('a');
        if (a) for (const v of a.toArray() as BigInt64Array) sumA += v;
        rows += batch.numRows;
        cols = batch.numCols;
        batches++;
      },
    });
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    process.stdout.write(
      JSON.stringify({
        rows,
        rowCount: summary.rowCount,
        cols,
        batches,
        sumA: sumA.toString(),
        ms,
        cpuMs: (cpu.user + cpu.system) / 1000,
        rowsPerSec: rows / (ms / 1000),
        maxRssKb: process.resourceUsage().maxRSS,
      }) + '\n',
    );
  } else {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const result = await client.execute(plan);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const table = result.table;
    if (!table) throw new Error('the query returned no Arrow data');
    let sumA = 0n;
    const a = table.getChild('a');
    if (a) for (const v of a.toArray() as BigInt64Array) sumA += v;
    process.stdout.write(
      JSON.stringify({
        rows: table.numRows,
        rowCount: result.rowCount,
        cols: table.numCols,
        batches: table.batches.length,
        sumA: sumA.toString(),
        ms,
        /** CPU time of this process (all threads) during the collect. */
        cpuMs: (cpu.user + cpu.system) / 1000,
        rowsPerSec: table.numRows / (ms / 1000),
        maxRssKb: process.resourceUsage().maxRSS,
      }) + '\n',
    );
  }
} finally {
  client.close();
}
