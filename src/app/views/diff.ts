import type { StatusDocument } from '../../core/status.js';
import { scrub } from '../../core/secrets.js';
import { paint } from './paint.js';
import { count, statusSummary } from './summary.js';

/**
 * What a person reads of a `diff`: per table, whether it would be created (and with which
 * columns), the columns it would gain, what its writes replace, the predicted counts; the
 * expectations that would fail with their sample rows; the steps the diff could not predict.
 */
export function diffSummary(doc: StatusDocument, colorize = false): string {
  const p = paint(colorize);
  const d = doc.diff;
  const predicted = doc.status === 'failed' && d ? 'the run would fail' : doc.status === 'skipped' ? 'the run would skip' : undefined;
  const headline = !d ? 'could not tell what the run would do' : (predicted ?? (d.writes.length ? 'the run would write' : 'the run would change nothing'));
  const lines = [p.bold(`diff: ${headline}`)];
  for (const c of d?.changes ?? []) {
    const name = c.table ?? c.path ?? '';
    const out = doc.outputs.find((o) => (c.table ? o.table === c.table : o.path === c.path));
    const metrics = Object.entries(out?.metrics ?? {})
      .map(([k, v]) => `${k} ${count(v)}`)
      .join(', ');
    lines.push(`  ${p.bold(name)}${c.format ? ` (${c.format})` : ''}${metrics ? `: ${metrics}` : ''}`);
    if (c.create)
      lines.push(
        `    would be created: ${c.create.columns.map((f) => `${f.name} ${f.type}`).join(', ')}${c.create.partitionBy.length ? `; partitioned by ${c.create.partitionBy.join(', ')}` : ''}`,
      );
    if (c.addColumns?.length) lines.push(`    would gain columns: ${c.addColumns.map((f) => `${f.name} ${f.type}`).join(', ')}`);
    for (const w of c.writes.filter((x) => x.replaces))
      lines.push(`    ${w.step} replaces ${w.replaces}${w.rowsReplaced === undefined ? '' : ` (${count(w.rowsReplaced)} rows now)`}`);
  }
  for (const o of doc.outputs)
    for (const e of o.expectations ?? [])
      if (e.outcome !== 'passed') {
        lines.push(p.red(`  expectation ${e.name} on ${o.table ?? o.path} would be ${e.outcome}: ${count(e.failedRows)} rows`));
        for (const r of e.samples ?? []) lines.push(`    ${JSON.stringify(r)}`);
      }
  for (const s of d?.streams ?? [])
    lines.push(`  stream ${s.step}: would read ${count(s.rows)} rows from ${JSON.stringify(s.from)} to ${JSON.stringify(s.to)}`);
  for (const n of d?.notPredicted ?? []) lines.push(p.dim(`  not predicted: ${n.step}: ${n.reason}`));
  return scrub(`${lines.join('\n')}\n\n`) + statusSummary(doc, colorize);
}
