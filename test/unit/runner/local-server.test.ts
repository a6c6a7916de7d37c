import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startLocalServer } from '../../../src/runner/local-server.js';
import { tempFiles } from '../../support/files.js';

/** A stand-in for scripts/spark-connect: progress on stderr, a pause, the address on stdout. */
const script = (exit: number) =>
  join(
    tempFiles({
      'spark-connect': `echo "spark-connect: [0s] installing pyspark" >&2\nsleep 0.4\necho "spark-connect: [1s] ready in 1s" >&2\necho sc://127.0.0.1:15999\nexit ${exit}\n`,
    }),
    'spark-connect',
  );

describe('starting the embedded local server', () => {
  it('reports its progress on stderr with elapsed seconds when info logs are off, and returns its address', async () => {
    let stderr = '';
    const address = await startLocalServer(pino({ level: 'warn' }), { script: script(0), stderr: (t) => void (stderr += t), heartbeatMs: 100 });
    expect(address).toBe('sc://127.0.0.1:15999');
    const lines = stderr.trim().split('\n');
    expect(lines[0]).toBe('lakehouse-jobs: [0s] starting or reusing the local Spark Connect server (scripts/spark-connect start)');
    expect(lines).toContain('lakehouse-jobs: [0s] spark-connect: [0s] installing pyspark');
    expect(lines.some((l) => /^lakehouse-jobs: \[\d+s\] still starting the local Spark Connect server$/.test(l))).toBe(true);
    // The script's lines in their order; a heartbeat may still come between its last line and its exit.
    const ready = lines.findIndex((l) => /^lakehouse-jobs: \[\d+s\] spark-connect: \[1s\] ready in 1s$/.test(l));
    expect(ready).toBeGreaterThan(lines.indexOf('lakehouse-jobs: [0s] spark-connect: [0s] installing pyspark'));
  });

  it('logs the same progress as JSON when info logs are on, and fails with 69 when the script fails', async () => {
    let stderr = '';
    const records: string[] = [];
    const logger = pino({ level: 'info' }, { write: (t: string) => void records.push(t) });
    await expect(startLocalServer(logger, { script: script(3), stderr: (t) => void (stderr += t) })).rejects.toMatchObject({ exitCode: 69 });
    expect(stderr).toBe('');
    expect(records.map((r) => JSON.parse(r).msg)).toContain('spark-connect: [0s] installing pyspark');
  });
});
