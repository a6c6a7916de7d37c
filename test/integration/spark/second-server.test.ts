// A second real server, started here with settings the shared one must not have:
//  - spark.connect.execute.reattachable.senderMaxStreamDuration=1s, so every result stream is cut
//    after a second and the client must reattach (normally every 2 minutes);
//  - a bearer token (SPARK_CONNECT_AUTHENTICATE_TOKEN) on a plaintext port;
//  - no Delta/Iceberg SQL extensions: with them, Spark 4.1.4 leaves SQL parameters unbound (their
//    parsers do not implement ParserInterface.parsePlanWithParameters), so named parameters are
//    checked here.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../../src/core/errors.js';
import { rows } from '../../../src/spark/arrow.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { connect, literal, sleep, sql } from './support.js';
import { needs } from '../../support/needs.js';

needs('spark-install');

const script = fileURLToPath(new URL('../../../scripts/spark-connect', import.meta.url));
const PORT = '15013';
const token = randomBytes(16).toString('hex');
let address = '';
let client: SparkConnectClient;

function stack(args: string[], extraEnv: NodeJS.ProcessEnv = {}): string {
  // spark-submit reads SPARK_REMOTE (set by the global setup) as --remote and refuses to start a server.
  const { SPARK_REMOTE: _ignored, ...env } = process.env;
  return execFileSync('bash', [script, ...args], {
    encoding: 'utf8',
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 600_000,
  });
}

beforeAll(() => {
  // A server left on this port by an earlier run has other options (or another token).
  stack(['stop', '--port', PORT]);
  const out = stack(
    ['start', '--port', PORT, '--token-from-env', '--conf', 'spark.connect.execute.reattachable.senderMaxStreamDuration=1s', '--conf', 'spark.sql.extensions='],
    { SPARK_CONNECT_AUTHENTICATE_TOKEN: token },
  );
  address = out.trim().split('\n').pop() ?? '';
  expect(address).toBe(`sc://127.0.0.1:${PORT}`);
  client = connect({}, `${address}/;token=${token}`);
});

afterAll(async () => {
  await client?.releaseSession().catch(() => undefined);
  client?.close();
  stack(['stop', '--port', PORT]);
});

describe('token on a plaintext channel', () => {
  it('is accepted when right', async () => {
    expect(await client.analyze.sparkVersion()).toBe('4.1.4');
  });

  it('is refused when missing or wrong (77)', async () => {
    for (const remote of [address, `${address}/;token=not-the-token`]) {
      const other = connect({ retry: { maxRetries: 0 } }, remote);
      try {
        await expect(other.analyze.sparkVersion()).rejects.toMatchObject({ exitCode: ExitCode.permission, code: 'SPARK_AUTH' });
      } finally {
        other.close();
      }
    }
  });
});

describe('reattach when the server ends result streams', () => {
  it('a slowly consumed result: every row exactly once, after several reattaches', async () => {
    const n = 400_000;
    const stream = client.executeStream(sql(`SELECT id, repeat('x', 200) AS pad FROM range(0, ${n}, 1, 4)`));
    const seen = new Uint8Array(n);
    let batches = 0;
    const started = Date.now();
    for await (const batch of stream) {
      const ids = batch.getChild('id')!.toArray() as BigInt64Array;
      for (const id of ids) seen[Number(id)]! += 1;
      batches++;
      await sleep(100); // a slow consumer keeps each stream open past the server's 1 s limit
    }
    expect(Date.now() - started).toBeGreaterThan(2000);
    expect(batches).toBeGreaterThan(10);
    expect(seen.every((count) => count === 1)).toBe(true);
    expect(stream.summary).toMatchObject({ rowCount: n, complete: true });
    expect(stream.summary.reattaches).toBeGreaterThanOrEqual(1);
  });

  it('a long query with no output for seconds: idle streams are reattached too', async () => {
    const before = client.stats.reattaches;
    // The query sleeps 3 s on the server before its only row: idle for three times the stream limit
    // on any machine. (A query made slow by its work, such as summing a large range, finished within
    // the 1 s limit on a fast CI machine and was never reattached.) reflect is non-deterministic, so
    // the optimizer does not evaluate it early; this server has no tenant read policy to refuse it.
    const started = Date.now();
    const result = await client.execute(sql("SELECT id, reflect('java.lang.Thread', 'sleep', 3000L) AS slept FROM range(0, 1, 1, 1)"));
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
    expect(rows(result.table!)).toEqual([{ id: 0n, slept: 'null' }]);
    expect(result.reattaches).toBeGreaterThanOrEqual(1);
    expect(client.stats.reattaches - before).toBe(result.reattaches);
    expect(client.stats.retries).toBe(0);
  });
});

describe('SQL parameters', () => {
  it('binds named parameters (SQL.named_arguments) as expressions', async () => {
    const result = await client.execute(
      sql('SELECT :name AS name, :n + 1 AS n, :amount * 2 AS amount, :day AS day', {
        name: literal.string("O'Brien'; DROP TABLE x --"),
        n: literal.long(41n),
        amount: literal.decimal('12.25', 12, 2),
        day: literal.date('2024-03-01'),
      }),
    );
    expect(rows(result.table!)).toEqual([{ name: "O'Brien'; DROP TABLE x --", n: 42n, amount: '24.50', day: '2024-03-01' }]);
  });
});
