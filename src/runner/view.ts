import type { ConfigError } from '../core/errors.js';
import type { StatusDocument } from '../core/status.js';
import type { SparkProgress } from '../spark/execution.js';
import type { Step } from '../jobs/template.js';
import type { StepEvent } from './executor.js';
import type { LoadedJob } from './load-job.js';

/**
 * What a run shows besides its log and status files: the runner reports, the app layer presents
 * (src/app/views/): validate's lines for people, the plans, a terminal's step lines and summary.
 * Every member is optional; without a view a run writes the status document to stdout.
 */
export interface RunView {
  /** `validate`: the job is valid (what a run would read and write). */
  valid?(loaded: LoadedJob): void;
  /** `validate`: the config's problems, all at once, instead of log lines. */
  invalid?(error: ConfigError): void;
  /** `plan`: the plans (with Spark's explain of each step, when asked for). */
  plan?(loaded: LoadedJob, explained?: ReadonlyMap<string, string>): Promise<void> | void;
  /** `run`: the job is loaded and about to connect. */
  loaded?(loaded: LoadedJob): void;
  /** `run`: a step started or ended. */
  step?(event: StepEvent): void;
  /** `run`: Spark's progress of the running step. */
  progress?(step: Step, progress: SparkProgress): void;
  /** The status document, in stdout's place (the files are written all the same). */
  status?(doc: StatusDocument): void;
}
