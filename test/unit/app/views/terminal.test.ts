import { describe, expect, it } from 'vitest';
import { TerminalView, progressText } from '../../../../src/app/views/terminal.js';
import { bytes, duration, statusSummary } from '../../../../src/app/views/summary.js';
import type { StatusDocument } from '../../../../src/core/status.js';
import type { Step } from '../../../../src/jobs/template.js';
import { registerSecretValue } from '../../../../src/core/secrets.js';

const step = (id: string) => ({ kind: 'command', id, title: id }) as unknown as Step;
const steps = [step('read'), step('merge'), step('expire')];

function view(summary = true) {
  const out = { stdout: '', stderr: '' };
  const t = new TerminalView({
    stdout: (s) => void (out.stdout += s),
    stderr: (s) => void (out.stderr += s),
    summary,
    colorize: false,
    columns: 80,
    tickMs: 10,
  });
  return { t, out };
}

/** What a terminal shows of `text`: carriage return and erase-line applied. */
function screen(text: string): string[] {
  const lines: string[] = [];
  let current = '';
  const erase = '\r\x1b[2K';
  for (const part of text.split(new RegExp(`(${erase.replace('[', '\\[')}|\n)`))) {
    if (part === '\n') {
      lines.push(current);
      current = '';
    } else if (part === erase) current = '';
    else current += part;
  }
  if (current) lines.push(current);
  return lines;
}

const doc: StatusDocument = {
  schema: 'lakehouse-jobs/status/v1',
  status: 'succeeded',
  exitCode: 0,
  command: 'run',
  job: { template: 'cdc-silver-merge', schemaVersion: 1, name: 'acme-orders' },
  tenant: 'acme',
  runId: 'manual__1',
  startedAt: '2026-12-02T00:00:00.000Z',
  finishedAt: '2026-12-02T00:00:14.200Z',
  durationMs: 14_200,
  spark: { remote: 'sc://127.0.0.1:15002', operationIds: [] },
  outputs: [
    { table: 'lake.acme_silver.orders', format: 'iceberg', committed: true, metrics: { inserted: 4, updated: 1, deleted: 1200 } },
    { table: 'lake.acme_silver.orders__cdc_tombstones', format: 'iceberg', committed: false },
  ],
  metrics: { rowsRead: 6, rowsWritten: 5 },
  completedSteps: ['read', 'merge', 'expire'],
};

describe("a run on a person's terminal", () => {
  it('shows each step as n/N with its time, live while it runs, with Spark progress', async () => {
    const { t, out } = view();
    t.step({ kind: 'started', step: steps[0]!, index: 0, total: 3 });
    t.step({ kind: 'done', step: steps[0]!, index: 0, total: 3, ms: 850 });
    t.step({ kind: 'started', step: steps[1]!, index: 1, total: 3 });
    t.progress(steps[1]!, {
      stages: [
        { id: 1, tasks: 200, tasksDone: 150, bytesRead: 1_234_000_000, done: false },
        { id: 0, tasks: 4, tasksDone: 4, bytesRead: 0, done: true },
      ],
      inflightTasks: 2,
    });
    // An operation without stages yet changes nothing.
    t.progress(steps[1]!, { stages: [], inflightTasks: 0 });
    // The live line, redrawn in place by the clock.
    await new Promise((r) => setTimeout(r, 40));
    expect(screen(out.stderr).at(-1)).toMatch(/^▸ \[2\/3\] merge {2}\d+ms · stages 1\/2 · tasks 154\/204 · 2 running · 1.2 GB read$/);
    t.log('[00:00:01] WARN: retrying ExecutePlan\n');
    t.step({ kind: 'done', step: steps[1]!, index: 1, total: 3, ms: 12_345 });
    t.step({ kind: 'notNeeded', step: steps[2]!, index: 2, total: 3 });
    expect(screen(out.stderr)).toEqual(['✓ [1/3] read  850ms', '[00:00:01] WARN: retrying ExecutePlan', '✓ [2/3] merge  12.3s', '– [3/3] expire  not needed']);
  });

  it('marks a failed step, and ends with the summary instead of the status document', () => {
    const { t, out } = view();
    t.step({ kind: 'started', step: steps[1]!, index: 1, total: 3 });
    t.step({ kind: 'failed', step: steps[1]!, index: 1, total: 3, ms: 2100 });
    expect(screen(out.stderr)).toEqual(['✗ [2/3] merge  2.1s']);
    t.status(doc);
    expect(out.stdout).toBe(
      [
        'succeeded in 14.2s · exit 0 · cdc-silver-merge v1 (acme-orders) · tenant acme',
        'run manual__1 · sc://127.0.0.1:15002',
        '',
        'table                                    format   committed  inserted  updated  deleted',
        'lake.acme_silver.orders                  iceberg  yes               4        1    1,200',
        'lake.acme_silver.orders__cdc_tombstones  iceberg  no',
        '',
        'rows read 6 · written 5 · 3 steps completed',
        '',
      ].join('\n'),
    );
  });

  it('says what failed, with every config problem at its path, and scrubs secrets', () => {
    registerSecretValue('summary-secret-4711');
    const failed: StatusDocument = {
      ...doc,
      status: 'failed',
      exitCode: 78,
      outputs: [],
      completedSteps: ['read'],
      failedStep: 'merge',
      error: {
        code: 'CONFIG_INVALID',
        category: 'config',
        message: 'x',
        retryable: false,
        issues: [
          { path: 'cdc.primary-key', message: 'is required' },
          { path: 'source.where', message: 'names summary-secret-4711' },
        ],
      },
    };
    const text = statusSummary(failed);
    expect(text).toContain('failed in 14.2s · exit 78');
    expect(text).toContain('error CONFIG_INVALID (config, not retryable) in step merge:\n  cdc.primary-key: is required\n  source.where: names [redacted]\n');
    expect(text).not.toContain('summary-secret-4711');
  });

  it('formats durations, sizes and progress', () => {
    expect([duration(12), duration(999), duration(1000), duration(59_940), duration(125_000)]).toEqual(['12ms', '999ms', '1s', '59.9s', '2m 5s']);
    expect([bytes(0), bytes(999), bytes(12_345), bytes(340_000_000), bytes(1_234_567_890)]).toEqual(['0 B', '999 B', '12.3 kB', '340 MB', '1.2 GB']);
    expect(progressText({ stages: [], inflightTasks: 0 })).toBe('stages 0/0 · tasks 0/0');
  });

  it('keeps the live line to one row of the terminal', () => {
    const out = { stderr: '' };
    const t = new TerminalView({ stdout: () => undefined, stderr: (s) => void (out.stderr += s), summary: false, colorize: false, columns: 30 });
    t.step({ kind: 'started', step: step('a-step-with-a-very-long-name-indeed'), index: 0, total: 1 });
    expect([...screen(out.stderr).at(-1)!].length).toBeLessThanOrEqual(29);
    t.step({ kind: 'done', step: step('a-step-with-a-very-long-name-indeed'), index: 0, total: 1, ms: 1 });
  });
});
