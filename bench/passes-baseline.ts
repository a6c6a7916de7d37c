/**
 * bench/passes: the committed baseline (bench/passes-baseline.json) and the comparison with it.
 * A run's counts are compared, not its time (which depends on the machine and its load); a run
 * with more jobs or more scans than its baseline is a regression line of the output (a benchmark
 * result, not a failing test: the counts come from a real server, outside the test suite).
 */
import type { RunCount } from './passes-count.js';

/** What the baseline keeps of a run. */
export const KEPT = ['ops', 'jobs', 'stages', 'tasks', 'scans', 'rows', 'analyses', 'analysisJobs'] as const;
export type Kept = Record<(typeof KEPT)[number], number>;
export interface Baseline {
  commit: string;
  date: string;
  runs: Record<string, Kept>;
}

export const kept = (r: RunCount): Kept => Object.fromEntries(KEPT.map((k) => [k, k === 'analysisJobs' ? r.analysisJobs : r.total[k]])) as Kept;

const fmt = (k: Kept) => KEPT.map((x) => k[x]).join(' / ');

/** The summary (Markdown): per run its totals next to the baseline's, and a regression line for every run with more jobs or scans. */
export function summary(result: readonly RunCount[], baseline: Baseline | undefined): { table: string; regressions: string[] } {
  const regressions: string[] = [];
  let table = `| run | now (${KEPT.join(' / ')}) | baseline${baseline ? ` (${baseline.commit})` : ''} | |\n|---|---|---|---|\n`;
  for (const r of result) {
    const now = kept(r);
    const before = baseline?.runs[r.run];
    const worse = before ? (['jobs', 'scans'] as const).filter((k) => now[k] > before[k]) : [];
    const better = before ? (['jobs', 'scans'] as const).filter((k) => now[k] < before[k]) : [];
    const flag = !before ? 'new' : worse.length ? '**more passes**' : better.length ? 'fewer passes' : '';
    for (const k of worse) regressions.push(`REGRESSION ${r.run}: ${k} ${before![k]} -> ${now[k]}`);
    table += `| ${r.run} | ${fmt(now)} | ${before ? fmt(before) : '–'} | ${flag} |\n`;
  }
  return { table, regressions };
}
