// The scripts work from a checkout wherever it is: here a copy of this checkout under a private
// folder (mode 700, as `mktemp -d` or root's home make it) and a path with a space and a quote. Run as
// root, PostgreSQL's server user cannot even reach that folder, which is the case scripts/postgres
// must survive. Nothing here needs Spark: spark-connect is asked only what needs no server.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../support/stack.js';
import { needs } from '../../support/needs.js';

needs('py-tools');

const asRoot = process.getuid?.() === 0;
const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-checkout-'));
const checkout = join(scratch, 'dir with space', "ann's lakehouse-jobs");
// The user's cache for the lake-home fallback: a literal path of the test's own.
const userCache = mkdtempSync(join(tmpdir(), 'lakehouse-xdg-'));
let pgPort = 0;
let sparkPort = 0;

// Only what the scripts read from outside: no cache, lake, port or remote of the caller's.
const env: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^(LAKEHOUSE_|SPARK_REMOTE$|SPARK_CONNECT_|PG[A-Z]+$|XDG_CACHE_HOME$)/.test(k)),
);

function script(name: string, args: string[], extra: NodeJS.ProcessEnv = {}) {
  const r = spawnSync('bash', [join(checkout, 'scripts', name), ...args], {
    cwd: checkout,
    encoding: 'utf8',
    env: { ...env, XDG_CACHE_HOME: userCache, PGPORT: String(pgPort), ...extra },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout.trim(), stderr: r.stderr, last: r.stdout.trim().split('\n').pop() ?? '' };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on the port. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on port ${port}`);
}

/**
 * A stand-in for a Spark Connect server that the checkout at `from` started on `port`: a process
 * with the server's class and port setting, working in that checkout's run folder (as
 * scripts/spark-connect starts one), listening on the port.
 */
async function serverOf(from: string, port: number): Promise<ChildProcess> {
  const cwd = join(from, '.cache', 'spark', `run-${port}`);
  mkdirSync(cwd, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      '-e',
      "require('node:net').createServer().listen(Number(process.argv[1]), '127.0.0.1')",
      String(port),
      'org.apache.spark.sql.connect.service.SparkConnectServer',
      '--conf',
      `spark.connect.grpc.binding.port=${port}`,
      '--conf',
      'spark.ui.enabled=false',
    ],
    { cwd, stdio: 'ignore' },
  );
  await listening(port);
  return child;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  // A copy of the working tree (tracked and new files, as a clone with local edits would have).
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repoRoot, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && existsSync(join(repoRoot, f)));
  for (const f of files) {
    mkdirSync(dirname(join(checkout, f)), { recursive: true });
    cpSync(join(repoRoot, f), join(checkout, f));
  }
  symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(checkout, 'node_modules'));
  pgPort = await freePort();
  sparkPort = await freePort();
});

afterAll(() => {
  // Whatever a failed test left running.
  if (existsSync(checkout)) script('postgres', ['stop']);
  rmSync(scratch, { recursive: true, force: true });
  rmSync(userCache, { recursive: true, force: true });
});

describe('scripts from a private folder whose path has a space', () => {
  it('is such a folder: mode 700 and, run as root, closed to the postgres user', () => {
    expect(statSync(scratch).mode & 0o777).toBe(0o700);
    expect(checkout).toContain(' ');
    if (asRoot) {
      const r = spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-r', join(checkout, 'package.json')], { cwd: '/' });
      expect(r.status, 'postgres can read the checkout: the test proves nothing').not.toBe(0);
    }
  });

  it('scripts/postgres starts, answers, stops with no process left, and removes its cluster', () => {
    const started = script('postgres', ['start']);
    expect(started.code, started.stderr).toBe(0);
    expect(started.last).toBe(`jdbc:postgresql://127.0.0.1:${pgPort}/lakehouse_test`);

    const status = script('postgres', ['status']);
    expect(status.code, status.stderr).toBe(0);
    const cluster = readFileSync(join(checkout, '.cache/postgres', `run-${pgPort}`, 'cluster'), 'utf8').trim();
    expect(status.stdout).toBe(`running 127.0.0.1:${pgPort} (${cluster})`);
    expect(cluster.startsWith(scratch)).toBe(false);
    expect(statSync(cluster).mode & 0o777).toBe(0o700);

    expect(script('postgres', ['psql', '-tA', '-c', 'SELECT current_user']).stdout).toBe('lakehouse_test');
    expect(script('postgres', ['start']).last, 'a second start reuses the server').toBe(started.last);

    const postmaster = Number(readFileSync(join(cluster, 'data/postmaster.pid'), 'utf8').split('\n')[0]);
    const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    expect(alive(postmaster)).toBe(true);
    expect(children.length).toBeGreaterThan(0);

    const stopped = script('postgres', ['stop']);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect([postmaster, ...children].filter(alive)).toEqual([]);
    expect(existsSync(cluster)).toBe(false);
    expect(script('postgres', ['status'])).toMatchObject({ code: 3, stdout: 'stopped' });
    expect(readFileSync(join(checkout, '.cache/postgres', `run-${pgPort}`, 'server.log'), 'utf8')).toContain('database system is shut down');
  });

  it('scripts/postgres stop removes only a folder that carries its mark', () => {
    const state = join(checkout, '.cache/postgres', `run-${pgPort}`);
    const decoy = mkdtempSync(join(tmpdir(), `lakehouse-postgres-${pgPort}.`));
    try {
      execFileSync('bash', ['-c', 'printf "%s\\n" "$1" >"$2"', '-', decoy, join(state, 'cluster')]);
      expect(script('postgres', ['status'])).toMatchObject({ code: 3, stdout: 'stopped' });
      expect(script('postgres', ['stop']).code).toBe(0);
      expect(existsSync(decoy)).toBe(true);
      expect(existsSync(join(state, 'cluster'))).toBe(false);
    } finally {
      rmSync(decoy, { recursive: true, force: true });
    }
  });

  it('scripts/postgres refuses a port another program holds, and leaves no cluster behind', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(pgPort, '127.0.0.1', resolve));
    try {
      const r = script('postgres', ['start']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`port ${pgPort} on 127.0.0.1 is taken by another program (set PGPORT)`);
      expect(existsSync(join(checkout, '.cache/postgres', `run-${pgPort}`, 'cluster'))).toBe(false);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('scripts/postgres refuses a runtime folder that does not exist', () => {
    const r = script('postgres', ['start'], { LAKEHOUSE_POSTGRES_RUNTIME: join(scratch, 'absent') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`LAKEHOUSE_POSTGRES_RUNTIME is not a folder: ${join(scratch, 'absent')}`);
    expect(script('postgres', ['status'])).toMatchObject({ code: 3, stdout: 'stopped' });
  });

  it('scripts/spark-connect answers status, address and warehouse; the lake gets a literal path', () => {
    const status = script('spark-connect', ['status', '--port', String(sparkPort)]);
    expect(status).toMatchObject({ code: 3, stdout: 'stopped' });
    expect(script('spark-connect', ['address', '--port', String(sparkPort)]).stdout).toBe(`sc://127.0.0.1:${sparkPort}`);
    expect(script('spark-connect', ['log', '--port', String(sparkPort)]).stdout).toBe(join(checkout, `.cache/spark/run-${sparkPort}/server.log`));
    // $CACHE/lake has a space, and storage URIs built from it would be refused: the user's cache instead.
    const lake = script('spark-connect', ['warehouse']).stdout;
    expect(lake).toMatch(new RegExp(`^${userCache}/lakehouse-jobs/lake-[0-9a-f]{16}$`));
    expect(script('spark-connect', ['warehouse']).stdout).toBe(lake);
    // A fresh clone at a deleted checkout's path (its cache, with the metastore, gone) gets a lake
    // of its own, never the old one's tables, which its new metastore does not know.
    const cache = { LAKEHOUSE_CACHE: join(scratch, 'dir with space', 'a cache') };
    const first = script('spark-connect', ['warehouse'], cache).stdout;
    rmSync(cache.LAKEHOUSE_CACHE, { recursive: true, force: true });
    const fresh = script('spark-connect', ['warehouse'], cache).stdout;
    expect([first, fresh]).toEqual([expect.stringMatching(/\/lake-[0-9a-f]{16}$/), expect.stringMatching(/\/lake-[0-9a-f]{16}$/)]);
    expect(new Set([lake, first, fresh]).size).toBe(3);
    expect(script('spark-connect', ['warehouse'], { LAKEHOUSE_LAKE_HOME: '/srv/lake' }).stdout).toBe('/srv/lake');
  });

  it("scripts/spark-connect takes a server on its port for its own only when this checkout started it, never another checkout's (another lake)", async () => {
    const port = await freePort();
    const other = await serverOf(join(scratch, 'another checkout'), port);
    try {
      expect(script('spark-connect', ['status', '--port', String(port)])).toMatchObject({ code: 3, stdout: 'stopped' });
      expect(script('spark-connect', ['stop', '--port', String(port)]).code).toBe(0);
      expect(alive(other.pid!), "stop left the other checkout's server alone").toBe(true);
    } finally {
      other.kill();
      await once(other, 'exit');
    }
    const own = await serverOf(checkout, port);
    try {
      expect(script('spark-connect', ['status', '--port', String(port)])).toMatchObject({ code: 0, stdout: `running sc://127.0.0.1:${port} (pid ${own.pid})` });
    } finally {
      own.kill();
    }
  });

  it('refuses to pick a lake home when no literal path is at hand, and says what to set', () => {
    const spaced = { XDG_CACHE_HOME: join(scratch, 'user cache') };
    const warehouse = script('spark-connect', ['warehouse'], spaced);
    expect(warehouse.code).toBe(1);
    expect(warehouse.stderr).toContain('set LAKEHOUSE_LAKE_HOME to such a path');
    const cli = script('lakehouse-jobs', ['templates'], spaced);
    expect(cli.code).toBe(64);
    expect(cli.stderr).toContain('set LAKEHOUSE_LAKE_HOME to such a path');
  });

  it('scripts/lakehouse-jobs validates the example with the local platform config', () => {
    const r = script('lakehouse-jobs', [
      'validate',
      '--config',
      'configs/examples/cdc-silver-merge.v1.conf',
      '--env',
      'configs/examples/platform-local.conf',
      '--log-level',
      'warn',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded', exitCode: 0, command: 'validate', tenant: 'acme' });
  });

  it('scripts/py-tools runs its venv from a cache whose path has a space', () => {
    // The installed venv of the caller's cache (this file's need py-tools), seen through a cache folder with a space.
    const realCache = process.env.LAKEHOUSE_CACHE ?? join(repoRoot, '.cache');
    const cache = join(scratch, 'py cache');
    mkdirSync(cache);
    symlinkSync(realpathSync(join(realCache, 'pytools')), join(cache, 'pytools'));
    expect(script('py-tools', ['venv'], { LAKEHOUSE_CACHE: cache }).stdout).toBe(join(cache, 'pytools'));
    const r = script('py-tools', ['python', '-c', 'import sys; print(sys.argv[1:])', 'a b', "c'd"], { LAKEHOUSE_CACHE: cache });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`['a b', "c'd"]`);
  });

  it('scripts/gen-proto writes the checked-in files into a folder with a space', () => {
    const out = join(scratch, 'gen out');
    const r = script('gen-proto', [out]);
    expect(r.code, r.stderr).toBe(0);
    const list = (d: string) => readdirSync(d, { recursive: true, encoding: 'utf8' }).sort();
    expect(list(out)).toEqual(list(join(repoRoot, 'src/spark/proto/gen')));
  });

  it('scripts/container env prints exports a shell can eval', () => {
    const r = spawnSync('bash', ['-c', 'eval "$(scripts/container env)" && printf "%s" "$CONTAINERS_STORAGE_CONF"'], { cwd: checkout, env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(join(checkout, '.cache/containers/storage.conf'));
  });
});
