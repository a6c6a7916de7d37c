// scripts/test's closing lines (scripts/test-summary.mjs) on a real vitest JSON report: a suite run
// on fixture files with a failing test, a file that does not load, a failing beforeAll hook and
// skipped tests; the ten slowest files; several reports of one run (its groups). CI parses the last
// line; a failed run must never say "0 failed".
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempFiles } from '../../support/files.js';
import { repoRoot } from '../../support/stack.js';

const summary = join(repoRoot, 'scripts/test-summary.mjs');

function run(args: string[], cwd: string): string[] {
  const r = spawnSync(process.execPath, [summary, ...args], { cwd, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trimEnd().split('\n');
}

function summarise(report: string, exitCode: number, cwd: string): string[] {
  return run([report, String(exitCode)], cwd);
}

/** The lines after the slowest-files block. */
const afterSlowest = (lines: string[]) =>
  lines[0] === 'slowest files:' ? lines.slice(lines.findIndex((l, i) => i > 0 && !/^ +\d+\.\d s {2}/.test(l))) : lines;

describe('scripts/test closing lines', () => {
  // Globals (--globals): the fixtures live outside the repository, where `vitest` is not resolvable.
  const dir = tempFiles({
    'test/math.test.ts': `describe('math', () => {
      it('adds', () => { expect(1 + 1).toBe(2); });
      it('breaks', () => { expect(1).toBe(2); });
      it.skip('later', () => {});
      it.todo('someday');
    });`,
    'test/broken-import.test.ts': `import './missing-module.js';\nit('never runs', () => {});`,
    'test/jdbc.test.ts': `beforeAll(() => { throw new Error('database unreachable'); });
      describe('jdbc', () => { it('reads', () => {}); it('writes', () => {}); });`,
    'test/fine.test.ts': `it('works', () => { expect(true).toBe(true); });`,
  });
  const report = join(dir, 'report.json');
  let vitestExit: number | null = null;
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // A report of one passed test, in vitest's JSON shape.
  const greenReport = (): string => {
    const path = join(dir, 'green.json');
    const result = {
      name: join(dir, 'test/fine.test.ts'),
      status: 'passed',
      message: '',
      assertionResults: [{ ancestorTitles: [], title: 'works', status: 'passed' }],
    };
    writeFileSync(path, JSON.stringify({ testResults: [result] }));
    return path;
  };

  beforeAll(() => {
    const r = spawnSync(
      process.execPath,
      [join(repoRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--root', dir, '--globals', '--reporter=json', `--outputFile.json=${report}`],
      { cwd: dir, encoding: 'utf8', env: { ...process.env, CI: '1' } },
    );
    vitestExit = r.status;
  });

  it('counts failed files as failures and names every failed and skipped test', () => {
    expect(vitestExit).toBe(1);
    const lines = afterSlowest(summarise(report, 1, dir));
    expect(lines.at(-1)).toBe('2 passed, 3 failed, 4 skipped');
    expect(lines.slice(0, -1).sort()).toEqual(
      [
        'failed: test/math.test.ts > math > breaks: AssertionError: expected 1 to be 2 // Object.is equality',
        "failed: test/broken-import.test.ts (the file failed: Cannot find module './missing-module.js' imported from " +
          `${join(dir, 'test/broken-import.test.ts')})`,
        'failed: test/jdbc.test.ts (the file failed: database unreachable)',
        'skipped: test/math.test.ts > math > later',
        'skipped: test/math.test.ts > math > someday',
        'skipped: test/jdbc.test.ts > jdbc > reads',
        'skipped: test/jdbc.test.ts > jdbc > writes',
      ].sort(),
    );
  });

  it('prints exactly `N passed, N failed` when all passed and none was skipped', () => {
    expect(summarise(greenReport(), 0, dir)).toEqual(['1 passed, 0 failed']);
  });

  it('never says "0 failed" for a non-zero exit: an unhandled error with every test passed', () => {
    const lines = summarise(greenReport(), 1, dir);
    expect(lines.at(-1)).toBe('1 passed, 1 failed');
    expect(lines[0]).toMatch(/^failed: vitest exited with 1 though no test failed/);
  });

  it('opens with the ten slowest files and their times, slowest first', () => {
    const path = join(dir, 'timed.json');
    const results = Array.from({ length: 12 }, (_, i) => ({
      name: join(dir, `test/f${i}.test.ts`),
      status: 'passed',
      startTime: 1_000_000,
      endTime: 1_000_000 + (i + 1) * 1500,
      assertionResults: [{ ancestorTitles: [], title: 't', status: 'passed' }],
    }));
    writeFileSync(path, JSON.stringify({ testResults: results }));
    const lines = summarise(path, 0, dir);
    expect(lines[0]).toBe('slowest files:');
    expect(lines.slice(1, 11)).toEqual(Array.from({ length: 10 }, (_, i) => `${((12 - i) * 1.5).toFixed(1).padStart(8)} s  test/f${11 - i}.test.ts`));
    expect(lines.slice(11)).toEqual(['12 passed, 0 failed']);
  });

  it("adds up a run's reports (one per group) and fails a file that was to run but no report holds", () => {
    const expected = join(dir, 'expected.txt');
    writeFileSync(expected, 'test/fine.test.ts\ntest/lost.test.ts\n');
    const lines = run(['--expect', expected, '--failed', 'an install step failed', greenReport(), '0', greenReport(), '0'], dir);
    expect(lines).toEqual(['failed: an install step failed', 'failed: test/lost.test.ts (the file did not run: no report holds it)', '2 passed, 2 failed']);
    // A group whose vitest died without a report fails the run, whatever the others say.
    expect(run([greenReport(), '0', join(dir, 'absent.json'), '1'], dir).at(-1)).toBe('1 passed, 1 failed');
  });

  it('reports a missing report as a failure', () => {
    const lines = summarise(join(dir, 'absent.json'), 1, dir);
    expect(lines.at(-1)).toBe('0 passed, 1 failed');
    expect(lines[0]).toMatch(/^failed: vitest wrote no readable report \(exit 1; ENOENT/);
  });
});
