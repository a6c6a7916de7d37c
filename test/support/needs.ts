import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll } from 'vitest';
// @ts-expect-error -- a plain JavaScript module of scripts/ (no declarations), shared with scripts/test
import { DEFAULT_NEEDS, NEEDS, orderNeeds } from '../../scripts/test-plan.mjs';

/**
 * What an integration test file needs of the local stack, declared once, at the top of the file:
 *
 *   needs('spark', 'kafka', 'py-tools');
 *
 * Before the file's first test, each is installed and started by the project's own script (first
 * use in a run), or found running (a later file reuses it; a server someone started before the run
 * is reused and left running). What this run started, the global setup stops at the end. The list is
 * also read without running the file (scripts/test-plan.mjs) to install only what the selected files
 * use and to put a file into a group whose server is of the kind it needs. test/README.md lists
 * the names.
 */
export const NEED_NAMES = [
  'py-tools',
  'examples-py',
  'spark-install',
  'container',
  'postgres',
  'kafka',
  'kafka-connect',
  'schema-registry',
  'object-store',
  'iceberg-rest',
  'spark',
  'spark-cluster',
] as const;
export type Need = (typeof NEED_NAMES)[number];

interface NeedSpec {
  script: string;
  server?: string;
  /** Reads the object store's key when it starts (a Spark server, the REST catalog). */
  storeKey?: boolean;
  install?: string[];
  start?: string[];
  status?: string[];
  stop?: string[];
  /** The environment variable the test helpers read the address from: start's last line. */
  exports?: string;
}

const SPECS = NEEDS as Record<Need, NeedSpec>;
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** This file's needs, for the helpers that check them. */
const declared = new Set<Need>();
/** Whether this file called needs(...) (`needs();`: it needs nothing). */
let called = false;

/** Declare the file's needs (one call, at the top of the file); they are ready before its first test. */
export function needs(...wanted: Need[]): void {
  for (const n of wanted) {
    if (!SPECS[n]) throw new Error(`needs(): unknown need ${JSON.stringify(n)} (known: ${Object.keys(SPECS).join(', ')})`);
    declared.add(n);
  }
  called = true;
  // Installs can take minutes on a fresh machine (pip, Maven, apt): the hook may wait that long.
  beforeAll(() => ready(wanted), 3_600_000);
}

/**
 * For a script outside the test runner that starts its services itself and then uses the test
 * helpers (bench/passes: its own Spark server with the event log on, its own Kafka broker): what
 * it started, so the helpers' checks pass. Starts nothing.
 */
export function declareStarted(...started: Need[]): void {
  for (const n of started) declared.add(n);
  called = true;
}

/**
 * For a file without a needs(...) call (test/support/needs-default.ts runs it before each
 * integration file's hooks, after its collection): the stack every file used to get, DEFAULT_NEEDS.
 */
export async function readyDefault(): Promise<void> {
  if (called) return;
  const wanted = DEFAULT_NEEDS as Need[];
  for (const n of wanted) declared.add(n);
  process.stderr.write(`needs: this file has no needs(...) call; it gets ${wanted.join(', ')} (test/README.md)\n`);
  await ready(wanted);
}

async function ready(wanted: readonly Need[]): Promise<void> {
  for (const n of orderNeeds(wanted) as Need[]) {
    // A server and the REST catalog read the object store's key at their start: when any file of the
    // run (scripts/test names their needs) uses the store, it comes up first, whichever file is first.
    if ((SPECS[n].server || SPECS[n].storeKey) && runNeeds().includes('object-store')) await ensure('object-store');
    await ensure(n);
  }
}

/**
 * Throws unless this file declared `need`: a helper that reaches a service calls it, so a file that
 * forgot a need fails at once, even when an earlier file of the run happens to have started it.
 */
export function requireNeed(what: string, ...anyOf: Need[]): void {
  if (!anyOf.some((n) => declared.has(n)))
    throw new Error(`${what} needs ${anyOf.map((n) => JSON.stringify(n)).join(' or ')}: declare it in this file's needs(...) call`);
}

/** The needs of every file of this vitest process, as scripts/test planned it (none when run without it). */
function runNeeds(): string[] {
  return (process.env.LAKEHOUSE_TEST_NEEDS ?? '').split(',').filter(Boolean);
}

/** External services (SPARK_REMOTE, LAKEHOUSE_KAFKA_BOOTSTRAP set before the run): never started here. */
function external(need: Need): boolean {
  return (process.env.LAKEHOUSE_TEST_EXTERNAL ?? '').split(',').includes(need);
}

interface RunRecord {
  /** Started by this run (so stopped at its end), not found running. */
  started: boolean;
  /** Order of start, for stopping in reverse. */
  seq: number;
  env: { [name: string]: string };
}

function recordPath(need: Need): string | undefined {
  const dir = process.env.LAKEHOUSE_TEST_RUN;
  return dir ? join(dir, `${need}.json`) : undefined;
}

async function ensure(need: Need): Promise<void> {
  const spec = SPECS[need];
  const path = recordPath(need);
  if (path && existsSync(path)) {
    Object.assign(process.env, (JSON.parse(readFileSync(path, 'utf8')) as RunRecord).env);
    return;
  }
  if (external(need)) return;
  const script = join(repoRoot, spec.script);
  let started = false;
  const env: { [name: string]: string } = {};
  if (spec.install) await run(script, spec.install);
  if (spec.start) {
    started = !(await succeeds(script, spec.status ?? ['status']));
    const out = await run(script, spec.start);
    if (spec.exports) env[spec.exports] = out.trim().split('\n').pop() ?? '';
  }
  Object.assign(process.env, env);
  if (path) {
    mkdirSync(join(path, '..'), { recursive: true });
    const seq = Date.now();
    writeFileSync(path, JSON.stringify({ started, seq, env } satisfies RunRecord));
  }
}

/** The script's stdout; its progress (stderr) goes to the test output. */
function run(script: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    // spark-submit reads SPARK_REMOTE as --remote and would refuse to start a server.
    const { SPARK_REMOTE: _remote, ...env } = process.env;
    // The broker a script connects to (Kafka Connect) is the run's, wherever it came from.
    const broker = process.env.LAKEHOUSE_KAFKA_BOOTSTRAP?.split(':').pop();
    if (broker) env.KAFKA_PORT = broker;
    const child = spawn('bash', [script, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} ${args.join(' ')} exited with ${code}`))));
  });
}

function succeeds(script: string, args: readonly string[]): Promise<boolean> {
  return run(script, args).then(
    () => true,
    () => false,
  );
}
