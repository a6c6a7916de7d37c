// scripts/test-plan.mjs: what each test file needs (its needs(...) call, read as text), which files
// a filter selects, how files split into groups, and which installs a run takes; and the tiers'
// rule that a unit test reaches nothing of the stack.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NEED_NAMES } from '../../support/needs.js';
import { repoRoot } from '../../support/stack.js';
// @ts-expect-error -- a plain JavaScript module of scripts/ (no declarations)
import * as plan from '../../../scripts/test-plan.mjs';

interface Segment {
  server: string | undefined;
  files: string[];
}
interface Group {
  seconds: number;
  segments: Segment[];
}
interface Planned {
  file: string;
  needs: string[];
  declared: boolean;
  server: string | undefined;
  seconds: number;
}
const {
  DEFAULT_NEEDS,
  NEEDS,
  assignGroups,
  groupEnv,
  installsFor,
  needsOf,
  orderNeeds,
  planFiles,
  selectFiles,
  serverOf,
  tierFiles,
  UNMEASURED_SECONDS,
  SEGMENT_SECONDS,
} = plan as {
  DEFAULT_NEEDS: string[];
  NEEDS: Record<string, { script: string; install?: string[][]; apt?: boolean; server?: string }>;
  assignGroups: (files: { file: string; server?: string; seconds: number; needs?: string[] }[], count: number) => Group[];
  groupEnv: (k: number, env: Record<string, string>, lakeHome: string) => Record<string, string>;
  installsFor: (needs: string[]) => { parallel: { need: string; script: string; args: string[] }[]; apt: { need: string; script: string; args: string[] }[] };
  needsOf: (text: string, file?: string) => string[] | undefined;
  orderNeeds: (needs: string[]) => string[];
  planFiles: (root: string, files: string[], timings?: Record<string, number>) => Planned[];
  selectFiles: (files: string[], filters: string[], root?: string, cwd?: string) => string[];
  serverOf: (needs: string[]) => string | undefined;
  tierFiles: (root: string, tier: 'unit' | 'integration') => string[];
  UNMEASURED_SECONDS: number;
  SEGMENT_SECONDS: number;
};

const unitFiles = tierFiles(repoRoot, 'unit');
const integrationFiles = tierFiles(repoRoot, 'integration');
const text = (file: string) => readFileSync(join(repoRoot, file), 'utf8');

describe('the needs declaration', () => {
  it('reads the names of the one needs(...) call, in the order they are made ready', () => {
    expect(needsOf(`import x from 'y';\n\nneeds('spark', 'kafka', 'py-tools');\n\nit('x', () => {});`)).toEqual(['py-tools', 'kafka', 'spark']);
    expect(needsOf(`needs(\n  'spark',\n  'iceberg-rest',\n);\n`)).toEqual(['iceberg-rest', 'spark']);
    expect(needsOf(`it('mentions needs(...) in a string', () => {});`)).toBeUndefined();
    expect(needsOf(`needs();\n`)).toEqual([]);
    expect(() => needsOf(`needs('spark', 'sparkk');`, 'x.test.ts')).toThrow(/x\.test\.ts: unknown need sparkk/);
    expect(() => needsOf(`needs('spark');\nneeds('kafka');`, 'x.test.ts')).toThrow(/more than one needs/);
  });

  it('names the same needs in the test helper (needs.ts) as in the plan, each with a script of the repository', () => {
    expect([...NEED_NAMES]).toEqual(Object.keys(NEEDS));
    for (const [name, spec] of Object.entries(NEEDS)) expect(() => text(spec.script), name).not.toThrow();
  });

  it('gives a file without a needs(...) call the stack every file used to get, and says so in its plan', () => {
    const dir = mkdtempSync(join(tmpdir(), 'needs-plan-'));
    try {
      mkdirSync(join(dir, 'test/integration'), { recursive: true });
      writeFileSync(join(dir, 'test/integration/new.test.ts'), `import { it } from 'vitest';\nit('x', () => {});\n`);
      writeFileSync(join(dir, 'test/integration/none.test.ts'), `needs();\n`);
      const [undeclared, none] = planFiles(dir, ['test/integration/new.test.ts', 'test/integration/none.test.ts']);
      expect(undeclared).toMatchObject({ needs: orderNeeds(DEFAULT_NEEDS), declared: false, server: 'local' });
      expect(none).toMatchObject({ needs: [], declared: true, server: undefined });
      expect(DEFAULT_NEEDS).toEqual(expect.arrayContaining(['spark', 'iceberg-rest', 'kafka', 'object-store', 'py-tools']));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts the Kafka Connect worker after the broker it connects to; every Debezium file declares it', () => {
    expect(orderNeeds(['kafka-connect', 'postgres', 'kafka', 'spark'])).toEqual(['postgres', 'kafka', 'kafka-connect', 'spark']);
    const debezium = integrationFiles.filter((f) => /debeziumSource\(|scripts\/demo'/.test(text(f)));
    expect(debezium.length).toBeGreaterThanOrEqual(3);
    for (const f of debezium) expect(needsOf(text(f), f), f).toEqual(expect.arrayContaining(['kafka', 'kafka-connect', 'postgres']));
  });

  it('orders object stores and catalogs before the servers that read them at their start', () => {
    expect(orderNeeds(['spark', 'object-store', 'iceberg-rest', 'py-tools'])).toEqual(['py-tools', 'object-store', 'iceberg-rest', 'spark']);
  });

  it('every integration file declares its needs once; no unit file does', () => {
    expect(integrationFiles.length).toBeGreaterThan(30);
    const undeclared = integrationFiles.filter((f) => !/^needs\(/m.test(text(f)));
    expect(undeclared).toEqual([]);
    for (const f of integrationFiles) expect(needsOf(text(f), f)?.length, f).toBeGreaterThan(0);
    expect(unitFiles.filter((f) => /^needs\(/m.test(text(f)))).toEqual([]);
  });

  it('a file that names the REST catalog in a config declares iceberg-rest (the helpers cannot see that use)', () => {
    const restUsers = integrationFiles.filter((f) => /\brest \{ format = iceberg|catalog: 'rest'|\['iceberg', 'rest'\]|type = rest/.test(text(f)));
    expect(restUsers.length).toBeGreaterThanOrEqual(3);
    for (const f of restUsers) expect(needsOf(text(f), f), f).toContain('iceberg-rest');
  });

  it('gives a file the server kind of its needs: one kind at most', () => {
    expect(serverOf(['py-tools', 'spark'])).toBe('local');
    expect(serverOf(['spark-cluster', 'object-store'])).toBe('cluster');
    expect(serverOf(['spark-install'])).toBeUndefined();
    expect(() => serverOf(['spark', 'spark-cluster'])).toThrow(/local and cluster/);
  });
});

describe('the unit tier reaches nothing of the stack', () => {
  // A stack script run (its path as a literal), the stack cache, or a helper that installs, starts or reaches a service.
  const RUNS_SCRIPT = /'bash', \[join\([^)]*'scripts\/(spark-connect|iceberg-rest|kafka|postgres|container|py-tools|object-store)'/;
  const CACHE = /LAKEHOUSE_CACHE|\.cache\/(spark|pytools|kafka|iceberg-rest|postgres|containers)/;
  const HELPERS = /from '[./]*support\/(needs|kafka|postgres|in-process)\.js'/;
  const REACHING = new Set([
    'remote',
    'connect',
    'useClient',
    'lakeHome',
    'icebergRestUri',
    'readIcebergWithPyIceberg',
    'readDeltaWithDeltaRs',
    'icebergSnapshotSummary',
    'deltaLastCommit',
    'runJob',
  ]);
  const stackImports = (t: string) =>
    [...t.matchAll(/import \{([^}]*)\} from '[./]*support\/stack\.js'/g)].flatMap((m) => m[1]!.split(',').map((n) => n.trim().replace(/^type /, '')));

  it('no unit test runs a stack script, reads the stack cache or imports a helper that reaches a service', () => {
    // This file names them as data (and imports needs.ts for its list of names, calling nothing).
    const offenders = unitFiles
      .filter((f) => f !== 'test/unit/scripts/test-plan.test.ts')
      .flatMap((f) => {
        const t = text(f);
        const found = [RUNS_SCRIPT, CACHE, HELPERS].map((re) => re.exec(t)?.[0]).filter(Boolean);
        found.push(...stackImports(t).filter((n) => REACHING.has(n)));
        return found.map((x) => `${f}: ${x}`);
      });
    expect(offenders).toEqual([]);
  });

  it('the check would see such a test', () => {
    const t = `import { connect, repoRoot } from '../../support/stack.js';\nexecFileSync('bash', [join(repoRoot, 'scripts/kafka'), 'start']);`;
    expect(RUNS_SCRIPT.test(t)).toBe(true);
    expect(RUNS_SCRIPT.test(`readFileSync(join(repo, 'scripts/spark-connect'), 'utf8')`)).toBe(false);
    expect(stackImports(t)).toEqual(['connect', 'repoRoot']);
    expect(HELPERS.test(`import { needs } from '../support/needs.js';`)).toBe(true);
  });
});

describe('selecting files', () => {
  const files = [
    'test/integration/jobs/cdc-silver-merge.test.ts',
    'test/integration/jobs/cdc-silver-merge-v2.test.ts',
    'test/integration/spark/errors.test.ts',
  ];

  it('selects all without a filter, by substring as vitest does, and by a path of the checkout', () => {
    expect(selectFiles(files, [], repoRoot, repoRoot)).toEqual(files);
    expect(selectFiles(files, ['merge'], repoRoot, repoRoot)).toEqual(files.slice(0, 2));
    expect(selectFiles(files, ['test/integration/jobs/cdc-silver-merge.test.ts'], repoRoot, repoRoot)).toEqual(files.slice(0, 1));
    expect(selectFiles(files, ['./test/integration/spark'], repoRoot, repoRoot)).toEqual(files.slice(2));
    expect(selectFiles(files, ['spark/'], repoRoot, join(repoRoot, 'test/integration'))).toEqual(files.slice(2));
  });

  it('finds every test file of both tiers', () => {
    expect(unitFiles.every((f) => f.startsWith('test/unit/') || f === 'test/security/hostile-configs.test.ts')).toBe(true);
    expect(integrationFiles).not.toContain('test/security/hostile-configs.test.ts');
    expect(integrationFiles.some((f) => f.startsWith('test/security/'))).toBe(true);
    expect(unitFiles).toContain('test/unit/scripts/test-plan.test.ts');
  });

  it('plans a file with its needs, server kind and measured (or guessed) time', () => {
    const [p] = planFiles(repoRoot, ['test/integration/jobs/kafka-bronze-ingest.test.ts'], { 'test/integration/jobs/kafka-bronze-ingest.test.ts': 132 });
    expect(p).toEqual({
      file: 'test/integration/jobs/kafka-bronze-ingest.test.ts',
      needs: ['py-tools', 'kafka', 'object-store', 'spark'],
      declared: true,
      server: 'local',
      seconds: 132,
    });
    expect(planFiles(repoRoot, ['test/integration/spark/errors.test.ts'])[0]!.seconds).toBe(UNMEASURED_SECONDS);
  });
});

describe('groups', () => {
  const f = (file: string, seconds: number, server: string | undefined = 'local') => ({ file, seconds, server });
  const all = (groups: Group[]) => groups.flatMap((g) => g.segments.flatMap((s) => s.files)).sort();

  it('balance files by time: longest first, each to the group that would finish first', () => {
    const files = [f('a', 500), f('b', 240), f('c', 220), f('d', 160), f('e', 150), f('f', 100), f('g', 30)];
    const groups = assignGroups(files, 2);
    expect(groups.map((g) => g.segments.map((s) => s.files))).toEqual([[['a', 'e', 'g']], [['b', 'c', 'd', 'f']]]);
    expect(groups.map((g) => g.seconds)).toEqual([680, 720]);
    expect(all(groups)).toEqual(files.map((x) => x.file).sort());
  });

  it('put one group in charge of everything when there is one group', () => {
    const groups = assignGroups([f('a', 10), f('b', 20)], 1);
    expect(groups).toEqual([{ seconds: 30, segments: [{ server: 'local', files: ['a', 'b'] }] }]);
  });

  it('run the files of a second server kind in the last group, as a segment after its local files', () => {
    const files = [f('a', 300), f('b', 200), f('c', 100), f('s3', 250, 'cluster'), f('s3-maint', 50, 'cluster'), f('own-server', 40, undefined)];
    const groups = assignGroups(files, 2);
    expect(groups[1]!.segments.map((s) => s.server)).toEqual(['local', 'cluster']);
    expect(groups[1]!.segments[1]!.files).toEqual(['s3', 's3-maint']);
    expect(groups.flatMap((g) => g.segments).filter((s) => s.server === 'cluster')).toHaveLength(1);
    // The second segment costs a server start of its own.
    const local1 = groups[1]!.segments[0]!.files.map((x) => files.find((y) => y.file === x)!.seconds).reduce((a, b) => a + b, 0);
    expect(groups[1]!.seconds).toBe(300 + local1 + SEGMENT_SECONDS);
    expect(all(groups)).toEqual(files.map((x) => x.file).sort());
  });

  it('keep the files that start a Spark server of their own in the first group, one after the other', () => {
    const own = (file: string, seconds: number) => ({ file, seconds, server: undefined, needs: ['spark-install'] });
    const groups = assignGroups([f('a', 100), f('b', 100), own('kill-server', 40), own('second-server', 40)], 2);
    expect(groups[0]!.segments[0]!.files).toEqual(expect.arrayContaining(['kill-server', 'second-server']));
    expect(groups[1]!.segments[0]!.files).not.toContain('kill-server');
  });

  it('are the same for the same input, whatever its order', () => {
    const files = [f('x', 10), f('y', 10), f('z', 10), f('w', 10)];
    expect(assignGroups([...files].reverse(), 2)).toEqual(assignGroups(files, 2));
    expect(() => assignGroups(files, 0)).toThrow(/not a number of groups/);
  });

  it('every checked-in integration file plans into two groups, each of a known server kind', () => {
    const timings = JSON.parse(text('test/timings.json')) as Record<string, number>;
    const planned = planFiles(repoRoot, integrationFiles, timings);
    const groups = assignGroups(planned, 2);
    expect(all(groups)).toEqual([...integrationFiles].sort());
    const [a, b] = groups.map((g) => g.seconds);
    expect(Math.abs(a! - b!)).toBeLessThan(Math.max(...planned.map((p) => p.seconds)));
  });

  it('get ports three (Spark) or two apart per group and, past the first, a lake home of their own', () => {
    const env = { SPARK_CONNECT_PORT: '15150', KAFKA_PORT: '19150' };
    expect(groupEnv(0, env, '/lake')).toMatchObject({
      SPARK_CONNECT_PORT: '15150',
      KAFKA_PORT: '19150',
      ICEBERG_REST_PORT: '18181',
      LAKEHOUSE_LAKE_HOME: '/lake',
    });
    expect(groupEnv(1, env, '/lake')).toMatchObject({
      SPARK_CONNECT_PORT: '15153',
      KAFKA_PORT: '19152',
      ICEBERG_REST_PORT: '18183',
      PGPORT: '15434',
      LAKEHOUSE_LAKE_HOME: '/lake-g2',
    });
    // Kafka's controller (+1), the server a test starts at the Spark port + 1 and the S3 tests' cluster at + 2 stay inside the group's ports.
    expect(Number(groupEnv(1, env, '/l').SPARK_CONNECT_PORT) - Number(env.SPARK_CONNECT_PORT)).toBe(3);
    expect(Number(groupEnv(1, env, '/l').KAFKA_PORT)).toBeGreaterThan(Number(env.KAFKA_PORT) + 1);
    expect(Number(groupEnv(1, {}, '/l').SPARK_MASTER_PORT) - 7077).toBe(4);
    expect(Number(groupEnv(1, {}, '/l').SPARK_HISTORY_PORT) - 18080).toBe(2);
    expect(groupEnv(1, { KAFKA_CONNECT_PORT: '18350' }, '/l').KAFKA_CONNECT_PORT).toBe('18352');
  });
});

describe('installs', () => {
  it('are each script command once, the apt ones apart', () => {
    const { parallel, apt } = installsFor(['spark', 'spark-install', 'py-tools', 'postgres', 'container', 'kafka']);
    expect(parallel.map((s) => `${s.script} ${s.args.join(' ')}`)).toEqual([
      'scripts/py-tools install',
      'scripts/spark-connect install',
      'scripts/kafka install',
    ]);
    expect(apt.map((s) => `${s.script} ${s.args.join(' ')}`)).toEqual(['scripts/container setup', 'scripts/container base', 'scripts/postgres install']);
    expect(installsFor([])).toEqual({ parallel: [], apt: [] });
  });
});
