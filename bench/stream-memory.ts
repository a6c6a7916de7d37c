/**
 * Where the streamed path's memory goes (issue 13 item 2): streams ROWS rows × 10 columns to a sink
 * that keeps nothing (`client.executeToSink`), sampling V8's heap and the external ArrayBuffers at
 * every batch, then forces a full collection. Equal memory after the collection at every size means
 * nothing is retained per batch; the peak of live ArrayBuffers shows V8's external-memory trigger.
 * One JSON line on stdout (MB).
 *
 *   node --single-threaded-gc --expose-gc .cache/bench/build/bench/stream-memory.js REMOTE ROWS
 */
import { SparkConnectClient } from '../src/spark/client.js';
import { parseConnectionString } from '../src/spark/connection.js';
import { compileRelationPlan } from '../src/spark/plan/compile.js';
import { testQuery } from '../test/support/sql.js';

const [remote = '', rowsArg = ''] = process.argv.slice(2);
const rows = Number(rowsArg);
const gc = (globalThis as { gc?: () => void }).gc;
const spec = parseConnectionString(remote);
if (spec.kind !== 'remote' || !Number.isInteger(rows) || rows <= 0 || !gc) throw new Error('usage: node --expose-gc stream-memory.js sc://HOST:PORT ROWS');

const partitions = Math.max(2, Math.ceil(rows / 500_000));
const sql = [
  'SELECT id, id * 2 AS a, CAST(id AS DOUBLE) / 3 AS b, CAST(id AS STRING) AS c, id % 7 = 0 AS d,',
  "CAST(id AS DECIMAL(18,2)) AS e, DATE'2026-01-01' + CAST(id % 365 AS INT) AS f,",
  "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS g,",
  `CAST(NULL AS STRING) AS h, id % 100 AS i FROM range(0, ${rows}, 1, ${partitions})`,
].join(' ');
const mb = (n: number) => Math.round(n / 2 ** 20);
const memory = () => {
  const m = process.memoryUsage();
  return { rss: mb(m.rss), heap: mb(m.heapUsed), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers) };
};

const client = SparkConnectClient.connect(spec, { userAgent: 'lakehouse-jobs-bench' });
try {
  await client.analyze.sparkVersion();
  gc();
  const before = memory();
  const peak = { heap: 0, arrayBuffers: 0 };
  let seen = 0;
  await client.executeToSink(compileRelationPlan(testQuery(sql).rel, { reveal: true }), {
    write(batch) {
      seen += batch.numRows;
      const m = process.memoryUsage();
      peak.heap = Math.max(peak.heap, mb(m.heapUsed));
      peak.arrayBuffers = Math.max(peak.arrayBuffers, mb(m.arrayBuffers));
    },
  });
  const after = memory();
  gc();
  const collected = memory();
  process.stdout.write(JSON.stringify({ rows: seen, before, after, collected, peak, maxRssMB: mb(process.resourceUsage().maxRSS * 1024) }) + '\n');
} finally {
  client.close();
}
