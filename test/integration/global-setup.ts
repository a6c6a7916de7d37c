import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error -- a plain JavaScript module of scripts/ (no declarations)
import { NEEDS } from '../../scripts/test-plan.mjs';

/**
 * Integration test files declare what they need (test/support/needs.ts): each need is installed
 * and started by the first file that declares it and reused by the later ones. This setup gives the
 * run a folder where those files record what they started, and stops it all at the end (the last
 * started first), except what a LAKEHOUSE_KEEP_* variable keeps (LAKEHOUSE_KEEP_SPARK=1: the
 * Spark Connect server and the REST catalog; LAKEHOUSE_KEEP_KAFKA, LAKEHOUSE_KEEP_POSTGRES). A
 * service found running is reused and left running.
 *
 * SPARK_REMOTE, when set, names a stack someone else runs: nothing is started next to it (its
 * Kafka, if the run needs one, is LAKEHOUSE_KAFKA_BOOTSTRAP or KAFKA_PORT), never a broker on the
 * default port. LAKEHOUSE_KAFKA_BOOTSTRAP alone points the tests at another broker.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));

interface Spec {
  script: string;
  stop?: string[];
  keep?: string;
}

export default function setup(): () => void {
  const external = [];
  if (process.env.SPARK_REMOTE) external.push('spark', 'spark-cluster', 'iceberg-rest', 'kafka', 'object-store');
  if (process.env.LAKEHOUSE_KAFKA_BOOTSTRAP) external.push('kafka');
  process.env.LAKEHOUSE_TEST_EXTERNAL = external.join(',');
  const run = mkdtempSync(join(tmpdir(), 'lakehouse-test-run-'));
  process.env.LAKEHOUSE_TEST_RUN = run;
  return () => {
    const records = readdirSync(run)
      .filter((f) => f.endsWith('.json'))
      .map((f) => ({ need: f.slice(0, -'.json'.length), ...(JSON.parse(readFileSync(join(run, f), 'utf8')) as { started: boolean; seq: number }) }))
      .filter((r) => r.started)
      .sort((a, b) => b.seq - a.seq);
    const failures: string[] = [];
    for (const r of records) {
      const spec = (NEEDS as Record<string, Spec>)[r.need]!;
      if (spec.keep && process.env[spec.keep] === '1') continue;
      try {
        execFileSync('bash', [join(root, spec.script), ...(spec.stop ?? ['stop'])], { stdio: 'inherit' });
      } catch (e) {
        failures.push(`${spec.script} stop: ${(e as Error).message}`);
      }
    }
    rmSync(run, { recursive: true, force: true });
    if (failures.length) throw new Error(`could not stop what the run started:\n${failures.join('\n')}`);
  };
}
