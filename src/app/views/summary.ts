import prettyBytes from 'pretty-bytes';
import prettyMs from 'pretty-ms';
import type { StatusDocument } from '../../core/status.js';
import { scrub } from '../../core/secrets.js';
import { paint, type Paint } from './paint.js';

/**
 * A run's status document as a person reads it at the end of a run on a terminal: the outcome, the
 * tables it wrote with their counts, and the error with its path. The document itself still goes
 * to --status-file, XCom and the termination message.
 */
export function statusSummary(doc: StatusDocument, colorize = false): string {
  const p = paint(colorize);
  const job = [doc.job.template && `${doc.job.template}${doc.job.schemaVersion ? ` v${doc.job.schemaVersion}` : ''}`, doc.job.name && `(${doc.job.name})`]
    .filter(Boolean)
    .join(' ');
  const outcome = { succeeded: p.green, skipped: p.yellow, failed: p.red, cancelled: p.yellow }[doc.status](doc.status);
  const lines = [
    `${p.bold(outcome)} in ${duration(doc.durationMs)} · exit ${doc.exitCode}${job ? ` · ${job}` : ''}${doc.tenant ? ` · tenant ${doc.tenant}` : ''}`,
    p.dim(`run ${doc.runId}${doc.logicalDate ? ` · logical date ${doc.logicalDate}` : ''}${doc.spark?.remote ? ` · ${doc.spark.remote}` : ''}`),
  ];
  if (doc.outputs.length) lines.push('', ...outputsTable(doc, p));
  const steps = doc.completedSteps ? `${doc.completedSteps.length} step${doc.completedSteps.length === 1 ? '' : 's'} completed` : '';
  if (doc.command === 'run')
    lines.push('', [`rows read ${count(doc.metrics.rowsRead)}`, `written ${count(doc.metrics.rowsWritten)}`, steps].filter(Boolean).join(' · '));
  if (doc.skipReason) lines.push(`skipped: ${doc.skipReason}`);
  if (doc.error) {
    const e = doc.error;
    const how = `${e.category}, ${e.retryable ? 'retryable' : 'not retryable'}`;
    lines.push('', p.red(`error ${e.code} (${how})${doc.failedStep ? ` in step ${doc.failedStep}` : ''}:`));
    const issues = e.issues?.length ? e.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)) : [e.path ? `${e.path}: ${e.message}` : e.message];
    lines.push(...issues.map((i) => `  ${i}`));
  }
  return scrub(lines.join('\n')) + '\n';
}

function outputsTable(doc: StatusDocument, p: Paint): string[] {
  const metricNames = [...new Set(doc.outputs.flatMap((o) => Object.keys(o.metrics ?? {})))];
  const header = ['table', 'format', 'committed', ...metricNames];
  const rows = doc.outputs.map((o) => [
    o.table ?? o.path ?? '',
    o.format,
    o.committed === undefined ? '' : o.committed ? 'yes' : 'no',
    ...metricNames.map((m) => (o.metrics?.[m] === undefined ? '' : count(o.metrics[m]!))),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  // Names left, numbers right, as a table of counts reads.
  const cell = (text: string, i: number) => (i < 3 ? text.padEnd(widths[i]!) : text.padStart(widths[i]!));
  return [p.dim(header.map(cell).join('  ').trimEnd()), ...rows.map((r) => r.map(cell).join('  ').trimEnd())];
}

/** `850ms`, `12.3s`, `2m 5s` (pretty-ms). */
export function duration(ms: number): string {
  return prettyMs(ms, { secondsDecimalDigits: 1 });
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** `12.3 kB`, `340 MB`, `1.2 GB` (pretty-bytes: powers of 1000, as Spark's UI shows input sizes). */
export function bytes(n: number): string {
  return prettyBytes(n, { maximumFractionDigits: 1 });
}
