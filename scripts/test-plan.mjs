// What a test run consists of, decided before anything runs: which test files the filters select,
// what each integration file needs of the local stack (its `needs(...)` call, read as text), which
// installs that takes, and how the files split into groups that run side by side, each against its
// own servers. Used by scripts/test-run.mjs and test/support/needs.ts; pure functions, no I/O
// beyond reading the test files.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/**
 * Everything a test file may need, in the order a file's needs are made ready (installs first,
 * then the services a server reads at its start, the servers last). `install` and `start` are
 * arguments of the script; `apt` installs take the machine's package lock and run one at a time;
 * `exports` is the variable the test helpers read start's last line (an address) from; `keep` a
 * variable that, set to 1, leaves a service this run started running after it; `server` the kind
 * of Spark Connect server (a group runs one kind at a time).
 */
export const NEEDS = {
  'py-tools': { script: 'scripts/py-tools', install: [['install']] },
  'examples-py': { script: 'scripts/py-tools', install: [['install-examples']] },
  'spark-install': { script: 'scripts/spark-connect', install: [['install']] },
  container: { script: 'scripts/container', install: [['setup'], ['base']], apt: true },
  // Always with logical decoding: a CDC file (Debezium) after a JDBC one would otherwise restart it.
  postgres: { script: 'scripts/postgres', install: [['install']], apt: true, start: ['start', '--logical'], keep: 'LAKEHOUSE_KEEP_POSTGRES' },
  kafka: { script: 'scripts/kafka', install: [['install']], start: ['start'], exports: 'LAKEHOUSE_KAFKA_BOOTSTRAP', keep: 'LAKEHOUSE_KEEP_KAFKA' },
  // Debezium's worker: after the broker it connects to at its start (KAFKA_PORT).
  'kafka-connect': { script: 'scripts/kafka-connect', install: [['install']], start: ['start'], keep: 'LAKEHOUSE_KEEP_KAFKA' },
  // The Confluent-compatible schema registry (Apicurio) Avro values are written with.
  'schema-registry': {
    script: 'scripts/schema-registry',
    install: [['install']],
    start: ['start'],
    exports: 'LAKEHOUSE_SCHEMA_REGISTRY_URL',
    keep: 'LAKEHOUSE_KEEP_KAFKA',
  },
  'object-store': { script: 'scripts/object-store', install: [['install']], start: ['start'], keep: 'LAKEHOUSE_KEEP_OBJECT_STORE' },
  // Reads the object store's key at its start, as the Spark servers do (`storeKey`): after the store.
  'iceberg-rest': { script: 'scripts/iceberg-rest', install: [['install']], start: ['start'], keep: 'LAKEHOUSE_KEEP_SPARK', storeKey: true },
  spark: { script: 'scripts/spark-connect', install: [['install']], start: ['start'], exports: 'SPARK_REMOTE', keep: 'LAKEHOUSE_KEEP_SPARK', server: 'local' },
  'spark-cluster': {
    script: 'scripts/spark-connect',
    install: [['install']],
    // With its History Server: the cluster files read their application back from its REST API.
    start: ['start', '--cluster', '--history'],
    exports: 'SPARK_REMOTE',
    keep: 'LAKEHOUSE_KEEP_SPARK',
    server: 'cluster',
  },
};

/**
 * What an integration file without a needs(...) call gets (a file written before the declaration
 * existed, or on a branch that does not know it): the stack the integration setup always started
 * for every file (the server, the REST catalog, the broker, the object store) and the readers.
 * PostgreSQL, Kafka Connect, podman and the cluster are not in it: their helpers throw in such a
 * file, naming the need to declare. `needs();` declares that a file needs nothing.
 */
export const DEFAULT_NEEDS = ['py-tools', 'kafka', 'iceberg-rest', 'object-store', 'spark'];

/** The needs, in the order they are made ready. */
export function orderNeeds(needs) {
  const order = Object.keys(NEEDS);
  return [...new Set(needs)].sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

/** The projects of vitest.config.ts: where their files live. */
// As vitest.config.ts's projects include and exclude them: the hostile corpus' validate tier needs no
// Spark and runs with the unit tests.
const VALIDATE_TIER = 'test/security/hostile-configs.test.ts';
export const TIERS = { unit: ['test/unit', VALIDATE_TIER], integration: ['test/integration', 'test/security'] };
const EXCLUDED = { unit: [], integration: [VALIDATE_TIER] };

/**
 * The needs a test file declares: the names of its one `needs(...)` call; undefined when it has
 * none (every unit test; an integration file then gets DEFAULT_NEEDS). A second call or an
 * unknown name is an error, reported with the file.
 */
export function needsOf(text, file = 'the file') {
  const calls = [...text.matchAll(/^needs\(([^)]*)\);/gm)];
  if (calls.length === 0) return undefined;
  if (calls.length > 1) throw new Error(`${file}: more than one needs(...) call`);
  const names = [...calls[0][1].matchAll(/'([^']*)'/g)].map((m) => m[1]);
  const unknown = names.filter((n) => !(n in NEEDS));
  if (unknown.length) throw new Error(`${file}: unknown need ${unknown.join(', ')} (known: ${Object.keys(NEEDS).join(', ')})`);
  return orderNeeds(names);
}

/** The kind of Spark Connect server a file runs against (none: it needs no server). */
export function serverOf(needs) {
  const kinds = [...new Set(needs.map((n) => NEEDS[n].server).filter(Boolean))];
  if (kinds.length > 1) throw new Error(`needs ${kinds.join(' and ')} servers at once`);
  return kinds[0];
}

/** Every test file of a tier, relative to root, sorted. */
export function tierFiles(root, tier) {
  const out = [];
  const walk = (dir) => {
    let entries;
    try {
      entries = readdirSync(join(root, dir), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.test.ts')) out.push(p);
    }
  };
  for (const p of TIERS[tier]) {
    if (p.endsWith('.test.ts')) out.push(p);
    else walk(p);
  }
  return out.filter((f) => !EXCLUDED[tier].includes(f)).sort();
}

/**
 * The files that vitest's file filters select (no filter: all): a filter matches a file whose path
 * (relative to root) contains it, as vitest matches; a filter naming a folder or a file of the
 * checkout, from cwd, matches what lies under it.
 */
export function selectFiles(files, filters, root = process.cwd(), cwd = process.cwd()) {
  if (filters.length === 0) return files;
  const patterns = filters.map((f) => {
    let isPath = false;
    let rel = f;
    try {
      statSync(join(cwd, f));
      isPath = true;
      rel = relative(root, join(cwd, f)).split(sep).join('/');
    } catch {
      // not a path: a substring of the file's path
    }
    return { rel: rel.replace(/^\.\//, ''), isPath };
  });
  return files.filter((file) => patterns.some((p) => (p.isPath ? file === p.rel || file.startsWith(`${p.rel.replace(/\/$/, '')}/`) : file.includes(p.rel))));
}

/** Seconds a file is expected to take: its measured time, else this guess. */
export const UNMEASURED_SECONDS = 30;
/** What starting a second kind of server within a group costs (its start and its files' first connections). */
export const SEGMENT_SECONDS = 60;

/**
 * Splits integration files into `count` groups balanced by expected time (longest first, each to the
 * group that would finish first). A group runs one server kind at a time: the files of a kind that
 * not every group can start (a cluster) go to the last group, which runs them as a segment of its
 * own; files that start a server of their own all go to the first group. `files` is a list of
 * { file, server, seconds, needs }. Returns, per group, its segments
 * ({ server, files }), its expected seconds, in a stable order.
 */
export function assignGroups(files, count) {
  if (!(count >= 1)) throw new Error(`groups: ${count} is not a number of groups`);
  const groups = Array.from({ length: count }, () => ({ seconds: 0, segments: new Map() }));
  const add = (g, f) => {
    const key = f.server ?? 'none';
    if (!g.segments.has(key)) {
      g.segments.set(key, []);
      if (g.segments.size > 1) g.seconds += SEGMENT_SECONDS;
    }
    g.segments.get(key).push(f.file);
    g.seconds += f.seconds;
  };
  const byTime = (a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file);
  const kinds = [...new Set(files.map((f) => f.server ?? 'none'))];
  // The server kind most files use is the one every group runs; the others stay in the last group.
  const main = kinds.sort((a, b) => files.filter((f) => (f.server ?? 'none') === b).length - files.filter((f) => (f.server ?? 'none') === a).length)[0];
  // Files needing no server can go anywhere: they join the main kind's segment.
  const kindOf = (f) => (f.server === undefined || f.server === main ? main : f.server);
  for (const f of [...files].filter((x) => kindOf(x) !== main).sort(byTime)) add(groups[count - 1], { ...f, server: kindOf(f) });
  // Files that start a Spark server of their own (3 GB each) run in the first group, one after the
  // other: never two of them beside two groups' servers on a 24 GiB machine.
  const own = (f) => f.server === undefined && f.needs?.includes('spark-install');
  for (const f of [...files].filter((x) => kindOf(x) === main && own(x)).sort(byTime)) add(groups[0], { ...f, server: main });
  for (const f of [...files].filter((x) => kindOf(x) === main && !own(x)).sort(byTime)) {
    const g = groups.reduce((best, c) => (c.seconds < best.seconds ? c : best));
    add(g, { ...f, server: main });
  }
  return groups.map((g) => ({
    seconds: Math.round(g.seconds),
    // The main kind first: its server is already the one a group starts with.
    segments: [...g.segments.entries()]
      .sort(([a], [b]) => (a === main ? -1 : b === main ? 1 : a.localeCompare(b)))
      .map(([server, list]) => ({ server: server === 'none' ? undefined : server, files: list.sort() })),
  }));
}

/**
 * The integration files of a selection with their needs (DEFAULT_NEEDS, `declared: false`, for a
 * file without a needs(...) call), server kind and expected time.
 */
export function planFiles(root, files, timings = {}) {
  return files.map((file) => {
    const declared = needsOf(readFileSync(join(root, file), 'utf8'), file);
    const needs = declared ?? orderNeeds(DEFAULT_NEEDS);
    return { file, needs, declared: declared !== undefined, server: serverOf(needs), seconds: timings[file] ?? UNMEASURED_SECONDS };
  });
}

/**
 * The install commands for a set of needs, deduplicated: [script, args] pairs, the apt ones apart
 * (they take the package manager's lock, so they run one after the other).
 */
export function installsFor(needs) {
  const seen = new Set();
  const parallel = [];
  const apt = [];
  for (const n of orderNeeds(needs)) {
    const spec = NEEDS[n];
    for (const args of spec.install ?? []) {
      const key = `${spec.script} ${args.join(' ')}`;
      if (seen.has(key)) continue;
      seen.add(key);
      (spec.apt ? apt : parallel).push({ need: n, script: spec.script, args });
    }
  }
  return { parallel, apt };
}

/**
 * The ports a group's servers listen on: group 0 takes the environment's (or the scripts'
 * defaults), group k adds k strides, so a service's extra ports (Kafka's controller at +1; beside
 * the Spark port, the server a test starts at +1 and the S3 tests' cluster at +2; a cluster's
 * master, UI and workers) never meet the next group's.
 */
export const GROUP_PORTS = {
  SPARK_CONNECT_PORT: { default: 15002, stride: 3 },
  ICEBERG_REST_PORT: { default: 18181, stride: 2 },
  KAFKA_PORT: { default: 19092, stride: 2 },
  KAFKA_CONNECT_PORT: { default: 18083, stride: 2 },
  PGPORT: { default: 15432, stride: 2 },
  OBJECT_STORE_PORT: { default: 18333, stride: 2 },
  SCHEMA_REGISTRY_PORT: { default: 18091, stride: 2 },
  SPARK_MASTER_PORT: { default: 7077, stride: 4 },
  // The cluster's History Server (scripts/spark-connect start --cluster --history).
  SPARK_HISTORY_PORT: { default: 18080, stride: 2 },
};

/** The environment of group `k`: its ports and, past the first group, a lake home of its own. */
export function groupEnv(k, env, lakeHome) {
  const out = {};
  for (const [name, { default: d, stride }] of Object.entries(GROUP_PORTS)) out[name] = String(Number(env[name] ?? d) + k * stride);
  out.LAKEHOUSE_LAKE_HOME = k === 0 ? lakeHome : `${lakeHome}-g${k + 1}`;
  return out;
}
