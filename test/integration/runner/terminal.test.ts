import { execFile } from 'node:child_process';
import { testQuery } from '../../support/sql.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileCommandPlan } from '../../../src/spark/plan/compile.js';
import type { SparkConnectClient } from '../../../src/spark/client.js';
import { tempFiles } from '../../support/files.js';
import { freshTenant, remote, repoRoot, runCli, useClient } from '../../support/stack.js';
import { loadJob } from '../../../src/runner/load-job.js';
import { needs } from '../../support/needs.js';

needs('spark');

/**
 * A run as a person sees it: the CLI under a pseudo-terminal (util-linux `script`), against the
 * real server. Its step lines and closing summary replace the JSON; the status file is written as
 * ever. Off a terminal the same job answers orchestrators exactly as before.
 */
let client: SparkConnectClient;
useClient((c) => (client = c));

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
// eslint-disable-next-line no-control-regex
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');

/** What the terminal shows at the end: carriage returns and erased lines applied, colours removed. */
function screen(typescript: string): string[] {
  return plain(typescript.replace(/\r\n/g, '\n'))
    .split('\n')
    .map((line) => line.split('\r').at(-1)!)
    .filter((l) => l.trim() !== '');
}

/** The CLI with `args` under a pseudo-terminal: stdout and stderr are the terminal. */
function underTerminal(args: string[]): Promise<{ code: number | null; output: string }> {
  const cli = [process.execPath, '--import', `file://${repoRoot}node_modules/tsx/dist/loader.mjs`, join(repoRoot, 'src/cli.ts'), ...args].map(quote).join(' ');
  return new Promise((resolve) => {
    execFile('script', ['-qfec', cli, '/dev/null'], { env: { ...process.env, COLUMNS: '120' }, maxBuffer: 16 * 1024 * 1024 }, (error, stdout) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, output: stdout }),
    );
  });
}

describe('a run on a terminal', () => {
  it('shows step n/N with times and a summary table; the status file is as ever; off a terminal JSON as before', async () => {
    const tenant = freshTenant();
    const dir = tempFiles({
      'job.conf': `
job    { template = "cdc-silver-merge", schema-version = 1, name = "tty-orders" }
tenant { id = "${tenant.id}", storage-root = "${tenant.root}" }
source { table = "events" }
cdc { primary-key = ["id"], sequence-by = "ts" }
target { table = "events", catalog = "lake" }
`,
      'platform.conf': `catalogs { lake { format = iceberg, default = true } }`,
    });
    const select = `SELECT id, TIMESTAMP'2026-07-05 08:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts, 'c' AS op FROM range(3)`;
    await client.execute(compileCommandPlan(testQuery(select).writeFiles(`${tenant.root}/bronze/events`, 'parquet', { mode: 'append' }), { reveal: true }));
    const statusFile = join(dir, 'status.json');
    const job = ['--config', join(dir, 'job.conf'), '--env', join(dir, 'platform.conf'), '--remote', remote()];

    const tty = await underTerminal([...job, '--status-file', statusFile]);
    const lines = screen(tty.output);
    expect(tty.code, lines.join('\n')).toBe(0);
    // N is the plan's own step count: the header, the numbering and the plan agree.
    const n = (await loadJob({ configFile: join(dir, 'job.conf'), envFile: join(dir, 'platform.conf'), overrides: [], env: {}, runId: 'tty' })).plan.steps
      .length;
    expect(n).toBeGreaterThan(10);
    expect(lines[0]).toBe(`cdc-silver-merge v1 · tenant ${tenant.id} · ${n} steps`);
    const steps = lines.filter((l) => new RegExp(`^[✓✗–] \\[\\d+/${n}\\] `).test(l));
    expect(steps.map((l) => Number(/\[(\d+)\//.exec(l)![1]))).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    for (const l of steps) expect(l).toMatch(new RegExp(`^(✓ \\[\\d+/${n}\\] [a-z-]+ {2}(\\d+m )?\\d+(\\.\\d)?m?s|– \\[\\d+/${n}\\] [a-z-]+ {2}not needed)$`));
    expect(steps).toContainEqual(expect.stringMatching(new RegExp(`^✓ \\[\\d+/${n}\\] merge {2}`)));
    // The summary instead of the JSON document: no line of JSON on the terminal.
    const summary = lines.slice(lines.findIndex((l) => l.startsWith('succeeded in ')));
    expect(summary[0]).toMatch(new RegExp(`^succeeded in (\\d+m )?\\d+(\\.\\d)?m?s · exit 0 · cdc-silver-merge v1 \\(tty-orders\\) · tenant ${tenant.id}$`));
    expect(summary).toContainEqual(expect.stringMatching(/^table +format +committed +inserted +updated +deleted +late$/));
    expect(summary).toContainEqual(expect.stringMatching(new RegExp(`^lake\\.${tenant.id}_silver\\.events +iceberg +yes +3 +0 +0 +0$`)));
    expect(summary.at(-1)).toMatch(/^rows read 3 · written 3 · \d+ steps completed$/);
    expect(lines.some((l) => l.startsWith('{'))).toBe(false);
    expect(JSON.parse(readFileSync(statusFile, 'utf8'))).toMatchObject({ status: 'succeeded', exitCode: 0, outputs: [{ metrics: { inserted: 3 } }] });

    // The same job off a terminal (a rerun, nothing to change): the status document on stdout, JSON lines on stderr.
    const piped = await runCli(job);
    expect(piped.code, piped.stderr).toBe(0);
    expect(JSON.parse(piped.stdout)).toMatchObject({ schema: 'lakehouse-jobs/status/v1', status: 'succeeded', outputs: [{ committed: false }] });
    const logged = piped.stderr.split('\n').filter(Boolean);
    expect(logged.length).toBeGreaterThan(10);
    for (const l of logged) expect(JSON.parse(l)).toMatchObject({ app: 'lakehouse-jobs', level: expect.any(String) });
    expect(piped.stderr).not.toMatch(/[✓▸]/);
  }, 240_000);
});
