/**
 * bench/passes: the committed baseline (bench/passes-baseline.json) and the comparison with it.
 * A run's counts are compared, not its time (which depends on the machine and its load); a run
 * with more jobs or more scans than its baseline is a regression line of the output (a benchmark
 * result, not a failing test: the counts come from a real server, outside the test suite).
 */
import type { RunCount } from './passes-count.js';

/** What the baseline keeps of a run. */
export const KEPT = ['ops', 'jobs', 'stages', 'tasks', 'scans', 'rows', 'analyses', 'analysisJobs'] as const;
export type Kept = Record<(typeof KEPT)[number], number> & {
  /** Jobs per step that ran (steps of no job left out). */
  stepJobs?: Record<string, number>;
};

/**
 * A case's budget of Spark jobs per run (both days): for each step the most jobs it may cause, how
 * many of them are its writes (a commit costs a job), and why it needs the jobs above its writes.
 * `jobs` is the budget of a whole run; a day need not run every step (day 1 creates, day 2 merges).
 */
export interface StepTarget {
  jobs: number;
  writes?: number;
  why?: string;
}
export interface Target {
  jobs: number;
  steps: Record<string, StepTarget>;
}

export interface Baseline {
  commit: string;
  date: string;
  runs: Record<string, Kept>;
  /** Per case (its name in bench/passes-cases.ts, without the day). */
  targets?: Record<string, Target>;
}

export const kept = (r: RunCount): Kept => {
  const out = Object.fromEntries(KEPT.map((k) => [k, k === 'analysisJobs' ? r.analysisJobs : r.total[k]])) as Record<(typeof KEPT)[number], number>;
  const stepJobs = Object.fromEntries(Object.entries(r.steps).flatMap(([s, c]) => (c.jobs ? [[s, c.jobs] as const] : [])));
  return { ...out, stepJobs };
};

/**
 * What is wrong with a target on its own: a step above its writes without a reason, a run budget
 * above what its steps add up to (a job no step accounts for), or a negative count.
 */
export function targetProblems(name: string, t: Target): string[] {
  const out: string[] = [];
  let sum = 0;
  for (const [step, s] of Object.entries(t.steps)) {
    sum += s.jobs;
    if (s.jobs < 0 || (s.writes ?? 0) < 0 || (s.writes ?? 0) > s.jobs) out.push(`${name} ${step}: jobs ${s.jobs}, writes ${s.writes ?? 0}`);
    if (s.jobs > (s.writes ?? 0) && !s.why?.trim()) out.push(`${name} ${step}: ${s.jobs - (s.writes ?? 0)} job(s) above one per write without a reason`);
  }
  if (t.jobs > sum) out.push(`${name}: a run's budget of ${t.jobs} jobs is more than its steps' ${sum}`);
  return out;
}

/** A run against its case's target: OVER TARGET lines for the run's jobs and for each step's, and for a step the target does not list. */
export function overTarget(run: string, k: Kept, t: Target | undefined): string[] {
  if (!t) return [`OVER TARGET ${run}: no target (add one to bench/passes-baseline.json)`];
  const out: string[] = [];
  if (k.jobs > t.jobs) out.push(`OVER TARGET ${run}: jobs ${k.jobs} > ${t.jobs}`);
  for (const [step, n] of Object.entries(k.stepJobs ?? {})) {
    const s = t.steps[step];
    if (!s) out.push(`OVER TARGET ${run}: step ${step} (${n} jobs) has no target`);
    else if (n > s.jobs) out.push(`OVER TARGET ${run}: step ${step} jobs ${n} > ${s.jobs}`);
  }
  return out;
}

const fmt = (k: Kept) => KEPT.map((x) => k[x]).join(' / ');
/** A run's name is "<day> <case>". */
export const caseOf = (run: string) => run.replace(/^\d{4}-\d{2}-\d{2} /, '');

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
