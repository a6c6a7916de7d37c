import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../../src/runner/load-job.js';

/**
 * The orchestrator examples users copy, checked without Airflow, Kubernetes or extra packages:
 * the system Python (with PyYAML for the manifests). The integration project repeats these checks
 * with Airflow, its Kubernetes provider and the Kubernetes schemas installed
 * (test/integration/examples/airflow.test.ts).
 */
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const python = process.env.PYTHON ?? 'python3';

function check(script: string): string {
  return execFileSync(python, [join(repo, script)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('orchestrator examples', () => {
  it('the Airflow DAG compiles and passes the static (AST) checks of its operator arguments', () => {
    expect(check('configs/examples/airflow/check_dag.py').trim()).toBe('ok');
  });

  it.each([
    ['ingest.conf', 'jdbc-snapshot-ingest', ['target.snapshot-date=2026-07-05']],
    ['silver.conf', 'cdc-silver-merge', [`source.where="_snapshot_date = '2026-07-05'"`]],
    ['gold.conf', 'gold-publish', []],
  ])('the DAG ConfigMap file %s is a valid %s config with the DAG overrides and the local platform config', async (file, template, overrides) => {
    const job = await loadJob({
      configFile: join(repo, 'configs/examples/airflow/conf', file),
      envFile: join(repo, 'configs/examples/platform-local.conf'),
      overrides,
      env: { LAKEHOUSE_LAKE_HOME: '/lake' },
      runId: 'scheduled__2026-07-05T00:00:00+00:00',
      logicalDate: '2026-07-05',
    });
    expect(job.template.name).toBe(template);
    expect(job.tenant.id).toBe('acme');
  });

  it('the Kubernetes manifests parse and have the required fields and wiring', () => {
    expect(check('configs/examples/kubernetes/check_manifests.py').trim()).toMatch(/^ok: \d+ documents in \d+ files$/);
  });
});
