import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * compose.yaml (for laptops with Docker; not run here) must start Spark Connect with the local
 * stack's own settings: scripts/stack/spark-connect.conf is the one source. The test runs the
 * compose service's own preparation script (with the mounted paths mapped to this checkout) and
 * compares the properties it produces with the conf file, filled in the way scripts/spark-connect
 * fills it; and it checks that nothing else sets a Spark setting.
 */
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const python = process.env.PYTHON ?? 'python3';

interface Service {
  image?: string;
  command?: string[];
  volumes?: string[];
}
const compose = JSON.parse(
  execFileSync(python, ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', join(repo, 'compose.yaml')], {
    encoding: 'utf8',
  }),
) as { services: Record<string, Service> };
const spark = compose.services['spark-connect']!;
const jars = compose.services['spark-jars']!;
/** Compose turns `$$` into `$` before the shell sees it. */
const script = (s: Service) => s.command![2]!.replaceAll('$$', '$');
// The compose stack is the cluster with its History Server: the local stack's settings, then its cluster's and the event log's.
const stackConf = ['spark-connect.conf', 'spark-cluster.conf', 'spark-history.conf'].map((f) => readFileSync(join(repo, 'scripts/stack', f), 'utf8')).join('');
const versions = readFileSync(join(repo, 'scripts/stack/versions.env'), 'utf8');

function settings(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (m) out.set(m[1]!, m[2]!.trim());
  }
  return out;
}

describe('compose.yaml', () => {
  it('mounts the stack folder read-only into the Spark and jar services', () => {
    expect(spark.volumes).toContain('./scripts/stack:/stack:ro');
    expect(jars.volumes).toContain('./scripts/stack:/stack:ro');
  });

  it("fills in spark-connect.conf itself: the properties equal the local stack's, placeholder for placeholder", () => {
    const prep = script(spark).split('exec /opt/spark/bin/spark-submit')[0]!;
    const dir = mkdtempSync(join(tmpdir(), 'compose-test-'));
    const mapped = prep
      .replaceAll('/stack/', '@STACK@/')
      .replaceAll('/state', join(dir, 'state'))
      .replaceAll('/lake', join(dir, 'lake'))
      // The compose script names /stack unquoted (it is a fixed path in the container): reach the
      // checkout's folder through a link in the temp dir, whose path has no space even where the
      // checkout's does.
      .replaceAll('@STACK@', join(dir, 'stack'));
    symlinkSync(join(repo, 'scripts/stack'), join(dir, 'stack'));
    let produced: Map<string, string>;
    try {
      execFileSync('bash', ['-ec', mapped], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
      produced = settings(readFileSync(join(dir, 'state/spark-connect.properties'), 'utf8'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const placeholders = new Set([...stackConf.matchAll(/\$\{([A-Z0-9_]+)\}/g)].map((m) => m[1]));
    expect([...placeholders].sort()).toEqual(['ICEBERG_REST_URI', 'LAKE_HOME', 'S3_ENDPOINT', 'STATE_DIR']);
    const expected = settings(
      stackConf
        .replaceAll('${LAKE_HOME}', join(dir, 'lake'))
        .replaceAll('${STATE_DIR}', join(dir, 'state'))
        .replaceAll('${ICEBERG_REST_URI}', 'http://127.0.0.1:18181/')
        .replaceAll('${S3_ENDPOINT}', 'http://object-store:80'),
    );
    expect(Object.fromEntries(produced)).toEqual(Object.fromEntries(expected));
    expect(produced.size).toBeGreaterThan(10);
  });

  it('passes no Spark setting of its own besides the per-launch binding address and port and the driver host', () => {
    const submit = script(spark).split('exec /opt/spark/bin/spark-submit')[1]!;
    expect(submit).toContain('--properties-file /state/spark-connect.properties');
    expect(submit).toContain('--class org.apache.spark.sql.connect.service.SparkConnectServer');
    expect(submit).toContain('--master spark://spark-master:7077');
    const confs = [...submit.matchAll(/--conf\s+(\S+?)=/g)].map((m) => m[1]);
    expect(confs.sort()).toEqual(['spark.connect.grpc.binding.address', 'spark.connect.grpc.binding.port', 'spark.driver.host']);
    for (const key of settings(stackConf).keys()) expect(JSON.stringify(compose)).not.toContain(`${key}=`);
  });

  it("builds the project's server plugins beside the jars, against the same Spark's own jars", () => {
    const home = compose.services['spark-home-jars']!;
    expect(home.image).toBe(spark.image);
    expect(jars.volumes).toContain('./spark-plugins:/spark-plugins:ro');
    expect(script(jars)).toContain('LAKEHOUSE_SPARK_HOME=/spark-home LAKEHOUSE_SPARK_JARS=/jars /spark-plugins/build /jars');
    // The plugins are enabled by spark-connect.conf itself (its Connect plugin classes and session extensions).
    expect(settings(stackConf).get('spark.sql.extensions')).toContain('lakehouse.jobs.spark.TenantPolicyExtensions');
  });

  it("runs the local stack's Spark version and copies exactly its SPARK_EXTRA_JARS", () => {
    const pyspark = /^PYSPARK_VERSION=(\S+)$/m.exec(versions)![1];
    expect(spark.image).toBe(`apache/spark:${pyspark}`);
    const copy = script(jars);
    expect(copy).toContain('source /stack/versions.env');
    expect(copy).toMatch(/for artifact in \$SPARK_EXTRA_JARS; do\s+mvn [^\n]*dependency:copy -Dartifact="\$artifact"/);
    expect(script(spark)).toContain('--jars "$(ls /jars/*.jar');
    expect(copy).toContain('source /stack/s3a-pom.sh');
    expect(copy).toContain('write_s3a_pom /tmp/s3a-pom.xml');
  });

  it("runs the cluster's workers as scripts/spark-connect --cluster does, the object store as scripts/object-store does", () => {
    const launcher = readFileSync(join(repo, 'scripts/spark-connect'), 'utf8');
    const cores = /^WORKER_CORES=(\S+)$/m.exec(launcher)![1]!;
    const memory = /^WORKER_MEMORY=(\S+)$/m.exec(launcher)![1]!;
    for (const name of ['spark-worker-1', 'spark-worker-2']) {
      const command = compose.services[name]!.command!.join(' ');
      expect(command).toContain(`--cores ${cores} --memory ${memory} spark://spark-master:7077`);
    }
    const s3proxy = /^S3PROXY_VERSION=(\S+)$/m.exec(versions)![1];
    expect(compose.services['object-store']!.image).toBe(`andrewgaul/s3proxy:s3proxy-${s3proxy}`);
  });
});
