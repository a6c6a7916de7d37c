import type { ConfigError } from '../../core/errors.js';
import { scrub } from '../../core/secrets.js';
import type { LoadedJob } from '../../runner/load-job.js';
import type { RunView } from '../../runner/view.js';
import { formatAccess, formatPlan, planAccess } from '../plan-view.js';

/**
 * What `validate` and `plan` show, on any output (docs/contracts.md): validate's lines for people on
 * stderr (the status document stays on stdout), the plans on stdout. Every text is scrubbed of
 * registered secrets.
 */
export interface JobViewOptions {
  /** The files named in validate's lines. */
  config: string;
  envFile?: string;
  planFormat?: 'text' | 'json';
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export function jobView(opts: JobViewOptions): RunView {
  return {
    valid(loaded) {
      // What a run would touch, for the person who reviews the config.
      const access = formatAccess(planAccess(loaded.plan));
      const head = `${opts.config}: valid (${loaded.template.name} v${loaded.version.version}, ${loaded.plan.steps.length} steps)`;
      opts.stderr(scrub(`${head}${access ? `; a run would:\n${access}` : ''}\n`));
    },
    invalid(error) {
      for (const line of problemLines(error, opts.config, opts.envFile)) opts.stderr(scrub(`${line}\n`));
    },
    plan: (loaded, explained) => printPlan(loaded, opts.planFormat ?? 'text', opts.stdout, explained),
  };
}

/** One line per problem, with its path; a platform config's problem names the platform config's file. */
export function problemLines(error: ConfigError, config: string, envFile: string | undefined): string[] {
  return error.issues.map((i, n) => {
    const platformIssue = /^\(platform\)( |$)/.test(i.path) && envFile !== undefined;
    const file = platformIssue ? envFile : config;
    const path = platformIssue ? i.path.replace(/^\(platform\) ?/, '') : i.path;
    return validateLine(error.locations[n], file, path, i.message);
  });
}

/**
 * One line of `validate`'s report: where the problem was written (file:line:col when known, an
 * include's own file), its config path, the problem. The HOCON reader writes its location into the
 * message itself (the status document keeps it there) and names a problem outside any key by the
 * file: the line takes the location out of the message and says each thing once.
 */
export function validateLine(location: string | undefined, file: string | undefined, path: string, message: string): string {
  const written = location === undefined ? /^(.*?):(\d+):(\d+): ([^]*)$/.exec(message) : null;
  if (!written) return `${location ?? file}: ${path ? `${path}: ` : ''}${message}`;
  const [, source, line, col, rest] = written;
  const keyless = path === '' || path === source || path === file;
  return `${source}:${line}:${col}: ${keyless ? '' : `${path}: `}${rest}`;
}

/**
 * The plans a run would send (secrets redacted): as text, one operator tree per step with its id and
 * title; as JSON, exactly the protobuf plans, one entry per step.
 */
async function printPlan(loaded: LoadedJob, format: 'text' | 'json', out: (t: string) => void, explained?: ReadonlyMap<string, string>): Promise<void> {
  if (format === 'text') {
    const head = `${loaded.template.name} v${loaded.version.version}, tenant ${loaded.tenant.id}: ${loaded.plan.steps.length} steps`;
    out(scrub(`${head}\n\n${formatPlan(loaded.plan, explained)}\n`));
    return;
  }
  // The protobuf side loads only for the JSON plans.
  const [{ planToJson }, { stepPlan }, { tenantLogicOf }] = await Promise.all([
    import('../../spark/plan/json.js'),
    import('../../runner/executor.js'),
    import('../../runner/tenant-logic.js'),
  ]);
  const steps = loaded.plan.steps.map((s) => ({
    id: s.id,
    kind: s.kind,
    title: s.title,
    // As the executor sends it: config logic wrapped as tenant logic for the server to judge.
    plan: planToJson(stepPlan(tenantLogicOf(s), { reveal: false })),
    ...(explained?.has(s.id) ? { explain: explained.get(s.id) } : {}),
  }));
  const doc = { job: { template: loaded.template.name, schemaVersion: loaded.version.version }, tenant: loaded.tenant.id, steps };
  out(scrub(JSON.stringify(doc, null, 2)) + '\n');
}
