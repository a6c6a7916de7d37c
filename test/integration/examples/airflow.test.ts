import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import { type OrderEvent, QUICKSTART_ORDERS, writeOrderEvents } from '../../support/shop-source.js';
import { connect, lakeHome, readIcebergWithPyIceberg, remote, repoRoot } from '../../support/stack.js';
import { testCommand } from '../../support/sql.js';
import { needs } from '../../support/needs.js';

needs('spark', 'py-tools', 'examples-py');

/**
 * The orchestrator examples against the real libraries, without a server or cluster: Airflow and
 * its cncf-kubernetes provider import the DAG; kubernetes-validate checks the manifests against the
 * Kubernetes OpenAPI schemas. Pinned in configs/examples/airflow/requirements-check.txt, installed
 * into a venv of their own by `scripts/py-tools install-examples` (the need 'examples-py').
 * Then the DAG runs for real on the local stack: its pods as Airflow renders them, the local CLI in
 * place of the image's entrypoint.
 */
const cache = process.env.LAKEHOUSE_CACHE ?? join(repoRoot, '.cache');
const python = join(cache, 'examples-py', 'venv', 'bin', 'python');

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

/** One pod task of the DAG as configs/examples/airflow/render_dag.py prints it (rendered for one run). */
interface RenderedTask {
  task_id: string;
  upstream: string[];
  image: string;
  cmds: string[];
  arguments: string[];
  env: Record<string, { value: string } | { secret: string; key: string }>;
  config_map_mounts: { path: string; config_map: string; read_only: boolean }[];
  do_xcom_push: boolean;
  skip_on_exit_code: number[];
}

/**
 * What the namespace holds: the DAG's Secret (the local server in Airflow's connection form, with a
 * token the local server does not check) and its ConfigMap (the files it is created from).
 */
const token = 'airflow-dag-test-token-5f1c';
const secrets = (): Record<string, Record<string, string>> => ({ 'lakehouse-spark-connect': { SPARK_REMOTE: `${remote()}/;token=${token};use_ssl=False` } });
const configMaps: Record<string, string> = { 'lakehouse-acme-jobs': join(repoRoot, 'configs/examples/airflow/conf') };

function renderDag(logicalDate: string, runId: string): { dag_id: string; tasks: RenderedTask[] } {
  return JSON.parse(execFileSync(python, [join(repoRoot, 'configs/examples/airflow/render_dag.py'), logicalDate, runId], { encoding: 'utf8' }));
}

/**
 * Run one rendered pod: its arguments as they are, except the ConfigMap mount's paths mapped to the
 * ConfigMap's files; its environment from the rendered values and Secrets, plus what the image and
 * the platform provide (the platform config, the lake of the local stack, and /airflow/xcom, the
 * directory the XCom sidecar reads, as a temp directory). The entrypoint is the local CLI.
 */
function runPod(task: RenderedTask): Promise<{ code: number | null; stdout: string; stderr: string; xcom: string }> {
  const args = task.arguments.map((a) => {
    for (const m of task.config_map_mounts) if (a.startsWith(`${m.path}/`)) return join(configMaps[m.config_map]!, a.slice(m.path.length + 1));
    return a;
  });
  const env: Record<string, string> = {};
  for (const [name, v] of Object.entries(task.env)) env[name] = 'value' in v ? v.value : secrets()[v.secret]![v.key]!;
  const xcomDir = mkdtempSync(join(tmpdir(), 'lakehouse-xcom-'));
  const podEnv = {
    PATH: process.env.PATH!,
    HOME: process.env.HOME!,
    ...(process.env.LAKEHOUSE_CACHE ? { LAKEHOUSE_CACHE: process.env.LAKEHOUSE_CACHE } : {}),
    LAKEHOUSE_LAKE_HOME: lakeHome(),
    LAKEHOUSE_ENV: join(repoRoot, 'configs/examples/platform-local.conf'),
    LAKEHOUSE_XCOM_DIR: xcomDir,
    ...env,
  };
  return new Promise((resolve) => {
    const child = spawn('bash', [join(repoRoot, 'scripts/lakehouse-jobs'), ...args], { cwd: repoRoot, env: podEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('close', (code) => {
      const file = join(xcomDir, 'return.json');
      const xcom = existsSync(file) ? readFileSync(file, 'utf8') : '';
      rmSync(xcomDir, { recursive: true, force: true });
      resolve({ code, stdout, stderr, xcom });
    });
  });
}

/** The source database's CDC events of a day: the quickstart's orders, then a second order of alice's on the 6th. */
const DAY_EVENTS: Record<string, readonly OrderEvent[]> = {
  '2026-07-05': QUICKSTART_ORDERS['2026-07-05'],
  '2026-07-06': [
    [2, 'bob', 'SHIPPED', 25.5, '2026-07-06 09:00:00', 'u'],
    [4, 'dave', 'NEW', 99.99, '2026-07-06 09:30:00', 'd'],
    [5, 'erin', 'NEW', 42.0, '2026-07-06 10:00:00', 'c'],
    [6, 'alice', 'NEW', 5.0, '2026-07-06 11:00:00', 'c'],
  ],
};

const goldRows = (day: string) =>
  readIcebergWithPyIceberg('acme_gold', 'shop_customer_orders_daily')
    .filter((r) => String(r.order_day) === day)
    .map((r) => ({ customer: r.customer, orders: Number(r.orders), amount: String(r.amount) }))
    .sort((a, b) => String(a.customer).localeCompare(String(b.customer)));

describe('the Airflow DAG runs for real: its three pods as Airflow renders them, on the local stack', () => {
  const home = lakeHome();

  beforeAll(async () => {
    // The DAG's tables start empty, so the test sees this run's results only (nothing else writes them).
    const client = connect();
    try {
      for (const t of ['acme_silver.shop_orders', 'acme_silver.shop_orders__cdc_tombstones', 'acme_gold.shop_customer_orders_daily'])
        await client.execute(compileCommandPlan(testCommand(`DROP TABLE IF EXISTS lake.${t} PURGE`), { reveal: true }));
    } finally {
      await client.releaseSession().catch(() => undefined);
      client.close();
    }
    for (const dir of ['bronze/shop_orders_cdc', 'silver/shop_orders', 'silver/shop_orders__cdc_tombstones', 'gold/shop_customer_orders_daily'])
      rmSync(join(home, 'acme', dir), { recursive: true, force: true });
  }, 600_000);

  it('two scheduled runs: exit 0 and the status as XCom for every task, gold holds each day once, the second run replaces only its own day', async () => {
    const expected: Record<string, { customer: string; orders: number; amount: string }[]> = {
      '2026-07-05': [
        { customer: 'alice', orders: 1, amount: '10.00' },
        { customer: 'bob', orders: 1, amount: '25.50' },
        { customer: 'dave', orders: 1, amount: '99.99' },
      ],
      '2026-07-06': [
        { customer: 'alice', orders: 2, amount: '15.00' },
        { customer: 'bob', orders: 1, amount: '25.50' },
        { customer: 'erin', orders: 1, amount: '42.00' },
      ],
    };
    let firstDay: unknown[] = [];
    for (const day of ['2026-07-05', '2026-07-06']) {
      const runId = `scheduled__${day}T00:00:00+00:00`;
      const dag = renderDag(day, runId);
      expect(dag.dag_id).toBe('lakehouse_medallion_acme');
      expect(dag.tasks.map((t) => [t.task_id, t.upstream])).toEqual([
        ['bronze_ingest', []],
        ['silver_merge', ['bronze_ingest']],
        ['gold_publish', ['silver_merge']],
      ]);
      writeOrderEvents(home, DAY_EVENTS[day]!);
      for (const task of dag.tasks) {
        // The image's ENTRYPOINT is the CLI (no command override), so the arguments are the CLI's.
        expect(task.cmds).toEqual([]);
        expect(task.arguments).toEqual(expect.arrayContaining(['--run-id', runId, '--logical-date', day]));
        expect(task.do_xcom_push).toBe(true);
        const r = await runPod(task);
        expect(r.code, `${task.task_id} ${task.arguments.join(' ')}\n${r.stderr}`).toBe(0);
        // What Airflow's sidecar pushes as the task's XCom: the status document, as the CLI printed it.
        const status = JSON.parse(r.xcom);
        expect(status).toEqual(JSON.parse(r.stdout));
        expect(status).toMatchObject({ status: 'succeeded', exitCode: 0, runId, logicalDate: day, tenant: 'acme' });
        // SPARK_REMOTE came from the Secret; its token appears nowhere.
        expect(status.spark.remote).toBe(`${remote()} (token redacted)`);
        for (const text of [r.xcom, r.stdout, r.stderr]) expect(text).not.toContain(token);
        if (task.task_id === 'bronze_ingest')
          expect(status.outputs[0]).toMatchObject({ path: `file://${home}/acme/bronze/shop_orders_cdc`, format: 'parquet' });
        if (task.task_id === 'silver_merge')
          expect(status.outputs[0]).toMatchObject({ table: 'lake.acme_silver.shop_orders', format: 'iceberg', committed: true });
        if (task.task_id === 'gold_publish') {
          expect(status.outputs[0]).toMatchObject({ table: 'lake.acme_gold.shop_customer_orders_daily', format: 'iceberg', committed: true });
          expect(status.outputs[0].expectations.map((e: { name: string; outcome: string; failedRows: number }) => [e.name, e.outcome, e.failedRows])).toEqual(
            expect.arrayContaining([
              ['customer_present', 'passed', 0],
              ['one_row_per_customer', 'passed', 0],
              ['amount_positive', 'passed', 0],
            ]),
          );
        }
      }
      // gold read back by PyIceberg: this day's order book; the day before untouched.
      expect(goldRows(day)).toEqual(expected[day]);
      if (day === '2026-07-05') firstDay = goldRows('2026-07-05');
      else expect(goldRows('2026-07-05')).toEqual(firstDay);
    }
    expect(readIcebergWithPyIceberg('acme_gold', 'shop_customer_orders_daily')).toHaveLength(6);
  }, 1_200_000);
});
