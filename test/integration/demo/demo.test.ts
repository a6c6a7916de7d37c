import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { kafkaBootstrap } from '../../support/kafka.js';
import { repoRoot } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('spark', 'kafka', 'kafka-connect', 'postgres', 'py-tools');

/**
 * scripts/demo, as a user runs it: the reference scenario on the embedded server with real Debezium,
 * every check read back by PyIceberg or DuckDB and compared with SQL on PostgreSQL. It reuses the
 * stack this run started for its needs (the group's Spark server, broker, PostgreSQL with logical
 * decoding and Kafka Connect worker), as it reuses any that is running: its time is its jobs'.
 */
const CHECKS = [
  'first run',
  'second run',
  'bronze keeps every change event',
  'silver equals PostgreSQL',
  'gold equals SQL on PostgreSQL',
  'a rerun processes nothing twice',
  'the silver snapshot from before the changes is still readable',
  'maintenance runs',
];

it('passes each of its checks, printed one per line', () => {
  const r = spawnSync('bash', [join(repoRoot, 'scripts/demo')], {
    env: {
      ...process.env,
      KAFKA_PORT: kafkaBootstrap().split(':').pop()!,
      SPARK_CONNECT_PORT: new URL(process.env.SPARK_REMOTE!.replace(/^sc:/, 'http:')).port,
    },
    encoding: 'utf8',
    timeout: 900_000,
  });
  const lines = r.stdout.split('\n');
  for (const name of CHECKS)
    expect(
      lines.find((l) => l.includes(` ${name}: `)),
      `${name}\n${r.stdout}\n${r.stderr.slice(-4000)}`,
    ).toMatch(/^PASS /);
  expect(lines).toContain(`${CHECKS.length} of ${CHECKS.length} checks passed`);
  expect(r.status, r.stderr.slice(-4000)).toBe(0);
}, 960_000);
