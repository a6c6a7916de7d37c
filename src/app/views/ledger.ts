import type { StatusDocument } from '../../core/status.js';
import { scrub } from '../../core/secrets.js';
import type { LedgerCommit, RollbackReport } from '../../runner/ledger.js';

/** What a person reads of `history` (one line per commit) and `rollback` (one line per table). */
export function ledgerSummary(doc: StatusDocument): string {
  const lines: string[] = [];
  const h = doc.history as { table: string; format: string; commits: LedgerCommit[] } | undefined;
  if (h) {
    lines.push(`${h.table} (${h.format}): ${h.commits.length} commits, newest first`);
    const rows = h.commits.map((c) => [
      c.current ? '' : '(undone)',
      c.id,
      c.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
      c.operation,
      c.writer === 'lakehouse-jobs' ? (c.rollbackOf ? `rollback of ${c.rollbackOf}` : (c.runId ?? '')) : '(not lakehouse-jobs)',
      c.job ?? '',
      c.configHash ?? '',
      Object.entries(c.counts)
        .filter(([, v]) => v !== 0)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
    ]);
    lines.push(...table([['', 'commit', 'at', 'operation', 'run', 'job', 'config', 'counts'], ...rows]));
  }
  const r = doc.rollback as RollbackReport | undefined;
  if (r) {
    lines.push(`rollback of ${r.runs.join(', ')}${r.dryRun ? ' (dry run: nothing changed)' : ''}`);
    lines.push(...table([['table', 'state', 'from', 'to', 'mode'], ...r.tables.map((t) => [t.table, t.state, t.from ?? '', t.to ?? '', t.mode])]));
    for (const b of r.blockedBy) lines.push(`  blocked by ${b.table} commit ${b.id} (${b.operation}) of ${b.runId ?? 'a writer other than lakehouse-jobs'}`);
  }
  if (doc.error) lines.push(`error (${doc.exitCode} ${doc.error.code}): ${doc.error.message}`);
  return scrub(`${lines.join('\n')}\n`);
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd());
}
