import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
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
  currentBundle();
  process.env.LAKEHOUSE_TEST_CLI = 'bundle';
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

/**
 * The tests start the CLI as the image does, from the bundle (dist/cli.mjs, spawnCli): built here
 * when it is missing or older than a source, as scripts/lakehouse-jobs does. The build writes a
 * folder of its own and swaps it in, so two groups building at once each see a whole bundle. A
 * bundle start costs a tenth of a tsx start (0.12 s against 0.8 s for validate at load 7), and the
 * integration files start the CLI some hundreds of times.
 */
function currentBundle(): void {
  const bundle = join(root, 'dist/cli.mjs');
  const inputs = [join(root, 'src'), join(root, 'scripts/build.mjs'), join(root, 'scripts/build'), join(root, 'package.json')];
  const built = existsSync(bundle) ? statSync(bundle).mtimeMs : 0;
  const stale = (path: string): boolean =>
    statSync(path).isDirectory() ? readdirSync(path).some((f) => stale(join(path, f))) : statSync(path).mtimeMs > built;
  if (built === 0 || inputs.some(stale)) execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
}
