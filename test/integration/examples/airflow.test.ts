import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../support/stack.js';

/**
 * The orchestrator examples against the real libraries, without a server or cluster: Airflow and
 * its cncf-kubernetes provider import the DAG; kubernetes-validate checks the manifests against the
 * Kubernetes OpenAPI schemas. Pinned in configs/examples/airflow/requirements-check.txt, installed
 * once into .cache/examples-py (about 90 s from PyPI; a marker with the pins makes reruns instant).
 */
const cache = process.env.LAKEHOUSE_CACHE ?? join(repoRoot, '.cache');
const venv = join(cache, 'examples-py', 'venv');
const python = join(venv, 'bin', 'python');
const requirements = join(repoRoot, 'configs/examples/airflow/requirements-check.txt');
const marker = join(venv, '.lakehouse-installed');

beforeAll(() => {
  const pins = readFileSync(requirements, 'utf8');
  if (existsSync(python) && existsSync(marker) && readFileSync(marker, 'utf8') === pins) return;
  mkdirSync(join(cache, 'examples-py'), { recursive: true });
  const t0 = Date.now();
  if (!existsSync(python)) execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', requirements], { stdio: 'inherit', timeout: 900_000 });
  writeFileSync(marker, pins);
  console.log(`examples venv installed in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}, 1_000_000);

function run(script: string, flag: string) {
  return execFileSync(python, [join(repoRoot, script), flag], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('orchestrator examples with the real libraries', () => {
  it('Airflow imports the DAG: three pod tasks in order, templated run id and date, XCom, skip on 99, retries only for retryable codes', () => {
    expect(run('configs/examples/airflow/check_dag.py', '--require-airflow').trim()).toBe('ok');
  });

  it('the Kubernetes manifests validate strictly against the Kubernetes schemas (SparkConnect pod templates included)', () => {
    expect(run('configs/examples/kubernetes/check_manifests.py', '--require-schemas').trim()).toMatch(/^ok: /);
  });
});
