import { scrub } from '../../core/secrets.js';
import { type StatusDocument, statusText } from '../../core/status.js';
import type { Step } from '../../jobs/template.js';
import type { StepEvent } from '../../runner/executor.js';
import type { LoadedJob } from '../../runner/load-job.js';
import type { RunView } from '../../runner/view.js';
import type { SparkProgress } from '../../spark/execution.js';
import { paint } from './paint.js';
import { bytes, duration, statusSummary } from './summary.js';
import { diffSummary } from './diff.js';

/**
 * A run as a person watches it on a terminal (stderr): one line per step, `[n/N] id`, with its
 * elapsed time, kept live while the step runs (Spark's progress of its operations: stages, tasks,
 * bytes read), then the closing summary on stdout when stdout is the terminal too. Log lines (warn
 * and above by default) are written above the live line, never through it.
 */
export interface TerminalOptions {
  stdout(text: string): void;
  stderr(text: string): void;
  /** stdout is the terminal too: the summary in the status document's place. */
  summary: boolean;
  colorize: boolean;
  columns?: number;
  /** How often the live line's clock moves (ms). */
  tickMs?: number;
}

export class TerminalView implements RunView {
  readonly #o: TerminalOptions;
  readonly #p;
  #running?: { event: StepEvent; startedAt: number; progress?: SparkProgress };
  #drawn = false;
  #ticker?: NodeJS.Timeout;

  constructor(options: TerminalOptions) {
    this.#o = options;
    this.#p = paint(options.colorize);
  }

  /** A log line (already formatted for people): above the live line. */
  log(text: string): void {
    this.#clear();
    this.#o.stderr(text.endsWith('\n') ? text : `${text}\n`);
    this.#draw();
  }

  loaded(loaded: LoadedJob): void {
    const steps = loaded.plan.steps.length;
    this.#o.stderr(
      this.#p.bold(`${loaded.template.name} v${loaded.version.version} · tenant ${loaded.tenant.id} · ${steps} step${steps === 1 ? '' : 's'}`) + '\n',
    );
  }

  step(event: StepEvent): void {
    if (event.kind === 'started') {
      this.#running = { event, startedAt: performance.now() };
      this.#ticker ??= setInterval(() => this.#redraw(), this.#o.tickMs ?? 1000);
      this.#ticker.unref();
      this.#draw();
      return;
    }
    this.#stop();
    const p = this.#p;
    const mark = { done: p.green('✓'), failed: p.red('✗'), notNeeded: p.dim('–'), started: '' }[event.kind];
    const time = event.kind === 'notNeeded' ? p.dim('not needed') : p.dim(duration(event.ms ?? 0));
    // Spark's progress only on the live line: its last report may predate the step's end.
    this.#o.stderr(`${mark} ${position(event)} ${event.step.id}  ${time}\n`);
  }

  progress(step: Step, progress: SparkProgress): void {
    // An operation that has no stage yet reports nothing worth a line.
    if (this.#running?.event.step !== step || progress.stages.length === 0) return;
    this.#running.progress = progress;
    this.#redraw();
  }

  status(doc: StatusDocument): void {
    this.#stop();
    this.#o.stdout(this.#o.summary ? (doc.diff ? diffSummary(doc, this.#o.colorize) : statusSummary(doc, this.#o.colorize)) : `${statusText(doc)}\n`);
  }

  #line(): string {
    const r = this.#running!;
    const elapsed = duration(performance.now() - r.startedAt);
    const spark = r.progress ? ` · ${progressText(r.progress)}` : '';
    const text = scrub(`${this.#p.yellow('▸')} ${position(r.event)} ${r.event.step.id}  ${elapsed}${spark}`);
    // One terminal row: a line that wraps could not be cleared with a carriage return.
    const width = (this.#o.columns ?? 100) - 1;
    return visibleLength(text) > width ? `${text.slice(0, text.length - (visibleLength(text) - width) - 1)}…` : text;
  }

  #draw(): void {
    if (!this.#running || this.#drawn) return;
    this.#o.stderr(this.#line());
    this.#drawn = true;
  }

  #redraw(): void {
    this.#clear();
    this.#draw();
  }

  #clear(): void {
    if (!this.#drawn) return;
    this.#o.stderr('\r\x1b[2K');
    this.#drawn = false;
  }

  #stop(): void {
    this.#clear();
    this.#running = undefined;
    if (this.#ticker) clearInterval(this.#ticker);
    this.#ticker = undefined;
  }
}

const position = (e: StepEvent) => `[${e.index + 1}/${e.total}]`;

/** `stage 2/3 · tasks 150/200 · 1.2 GB read`, summed over the operation's stages so far. */
export function progressText(p: SparkProgress): string {
  const done = p.stages.filter((s) => s.done).length;
  const tasks = p.stages.reduce((n, s) => n + s.tasks, 0);
  const tasksDone = p.stages.reduce((n, s) => n + s.tasksDone, 0);
  const read = p.stages.reduce((n, s) => n + s.bytesRead, 0);
  const parts = [`stages ${done}/${p.stages.length}`, `tasks ${tasksDone}/${tasks}`];
  if (p.inflightTasks > 0) parts.push(`${p.inflightTasks} running`);
  if (read > 0) parts.push(`${bytes(read)} read`);
  return parts.join(' · ');
}

// eslint-disable-next-line no-control-regex
const visibleLength = (t: string) => t.replace(/\x1b\[[0-9;]*m/g, '').length;
