import type { Logger } from '../../core/logger.js';
import type { LakehouseError } from '../../core/errors.js';
import type { LineageConfig } from '../../core/config/platform.js';
import type { OutputReport, RunState } from '../../core/status.js';
import type { DatasetRef, PlanLineage } from '../../jobs/template.js';
import type { LoadedJob } from '../load-job.js';
import type { Field } from '../../spark/types.js';
import { VERSION } from '../../version.js';
import { type NamingContext, type PlanDataset, planDatasets, refDataset, refKey } from './datasets.js';
import { type Assertion, type EventDataset, type EventType, type ParentRef, type Producer, type RunIdentity, runEvent } from './events.js';
import { type Transport, sendAll, transportsOf } from './transports.js';
import { UUID_PATTERN, uuidv7 } from './uuid.js';

/**
 * OpenLineage for every run (docs/lineage.md): a START event once the plan is built, then COMPLETE,
 * FAIL or ABORT (a cancelled run, 130/143) with the same UUIDv7 run id. Datasets come from the plan
 * steps (datasets.ts), schemas from the plan or, after a successful run, from the written tables;
 * column lineage from a template's optional hook. Lineage never fails a job: every send is bounded
 * by `lineage.timeout-ms` and a failure is a logged warning.
 */

export const PRODUCER: Producer = { uri: `https://github.com/lakehouse-jobs/lakehouse-jobs/tree/v${VERSION}`, version: VERSION };

/** Reads a dataset's columns as Spark sees them (the runner passes its session). */
export type SchemaReader = (ref: DatasetRef, format: string | undefined) => Promise<readonly Field[]>;

export interface LineageRunOptions {
  readonly loaded: LoadedJob;
  /** The orchestrator's run id (`--run-id`), a tag of the run. */
  readonly orchestratorRunId: string;
  readonly logicalDate?: string;
  readonly env: Record<string, string | undefined>;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export class LineageRun {
  readonly identity: RunIdentity;
  readonly #config: LineageConfig;
  readonly #transports: readonly Transport[];
  readonly #naming: NamingContext;
  readonly #plan: { inputs: readonly PlanDataset[]; outputs: readonly PlanDataset[] };
  readonly #hook: PlanLineage | undefined;
  readonly #logger: Logger;
  readonly #now: () => Date;
  #ended = false;

  /** `undefined` when the platform config asks for no lineage. */
  static create(opts: LineageRunOptions): LineageRun | undefined {
    const config = opts.loaded.platform.lineage;
    if (!config || config.transports.length === 0) return undefined;
    return new LineageRun(config, transportsOf(config, opts.env, opts.logger), opts);
  }

  constructor(config: LineageConfig, transports: readonly Transport[], opts: LineageRunOptions) {
    const { loaded } = opts;
    this.#config = config;
    this.#transports = transports;
    this.#logger = opts.logger;
    this.#now = opts.now ?? (() => new Date());
    this.#naming = { tenant: loaded.tenant, catalogNamespaces: config['catalog-namespaces'] };
    this.#plan = planDatasets(loaded.plan, this.#naming);
    this.#hook = loaded.plan.lineage;
    const name: unknown = loaded.config.job?.name;
    const parent = parentFromEnv(opts.env, 'OPENLINEAGE_PARENT', opts.logger);
    const root = parent ? parentFromEnv(opts.env, 'OPENLINEAGE_ROOT_PARENT', opts.logger) : undefined;
    const nominal = nominalTime(opts.logicalDate);
    this.identity = {
      runId: uuidv7(this.#now().getTime()),
      job: {
        namespace: `${config.namespace}.${loaded.tenant.id}`,
        name: typeof name === 'string' && name ? `${loaded.template.name}.${name}` : loaded.template.name,
      },
      ...(parent ? { parent } : {}),
      ...(root ? { root } : {}),
      ...(nominal ? { nominalTime: nominal } : {}),
      tags: [
        { key: 'template', value: loaded.template.name },
        { key: 'schema-version', value: String(loaded.version.version) },
        { key: 'tenant', value: loaded.tenant.id },
        { key: 'orchestrator-run-id', value: opts.orchestratorRunId },
      ],
    };
  }

  /** The datasets the plan names, for START (and for an end without a readable schema). */
  planned(): { inputs: EventDataset[]; outputs: EventDataset[] } {
    return { inputs: this.#plan.inputs.map((d) => toEvent(d)), outputs: this.#plan.outputs.map((d) => toEvent(d)) };
  }

  async start(): Promise<void> {
    await this.#send('START', this.planned());
  }

  /**
   * The end event of an outcome. After a success the written tables' schemas are read (bounded by
   * the same timeout) and the template's column hook applied; after a failure the plan's datasets
   * are reported as they are.
   */
  async finish(
    outcome: { state: RunState; error?: LakehouseError; report?: { readonly outputs: readonly OutputReport[] } },
    readSchema?: SchemaReader,
  ): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    const type: EventType = outcome.state === 'cancelled' ? 'ABORT' : outcome.state === 'failed' ? 'FAIL' : 'COMPLETE';
    let datasets = this.planned();
    if (type === 'COMPLETE' && readSchema) datasets = await this.#withSchemas(readSchema);
    // The checks the run made of its inputs (freshness-check): also on a FAIL, which they caused.
    if (outcome.report) datasets = { ...datasets, inputs: withAssertions(datasets.inputs, this.#plan.inputs, outcome.report.outputs) };
    const error = outcome.error ? { message: errorSummary(outcome.error) } : undefined;
    await this.#send(type, datasets, error, outcome.error?.exitCode ?? (outcome.state === 'skipped' ? 99 : 0));
  }

  /** The ABORT of a run that must exit now (its grace period is over): sent, not awaited. */
  abortNow(error: LakehouseError): void {
    if (this.#ended) return;
    this.#ended = true;
    void this.#send('ABORT', this.planned(), { message: errorSummary(error) }, error.exitCode);
  }

  async #withSchemas(readSchema: SchemaReader): Promise<{ inputs: EventDataset[]; outputs: EventDataset[] }> {
    const timeoutMs = this.#config['timeout-ms'];
    const read = async (d: PlanDataset): Promise<readonly Field[] | undefined> => {
      if (d.fields || !d.ref) return d.fields;
      try {
        return await withTimeout(readSchema(d.ref, d.format), timeoutMs);
      } catch (e) {
        this.#logger.warn(
          { dataset: `${d.id.namespace}/${d.id.name}` },
          `lineage: no schema for the dataset (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`,
        );
        return undefined;
      }
    };
    const [inFields, outFields] = await Promise.all([Promise.all(this.#plan.inputs.map(read)), Promise.all(this.#plan.outputs.map(read))]);
    const inputs = this.#plan.inputs.map((d, i) => toEvent(d, inFields[i]));
    const outputs = this.#plan.outputs.map((d, i) => {
      const fields = outFields[i];
      const columns = fields && d.ref ? this.#columns(d.ref, fields) : undefined;
      return { ...toEvent(d, fields), ...(columns ? { columns } : {}) };
    });
    return { inputs, outputs };
  }

  #columns(ref: DatasetRef, fields: readonly Field[]): EventDataset['columns'] {
    let map;
    try {
      map = this.#hook?.columns?.(
        ref,
        fields.map((f) => f.name),
      );
    } catch (e) {
      this.#logger.warn({ err: String(e) }, 'lineage: the template could not say its column lineage');
      return undefined;
    }
    if (!map) return undefined;
    const known = new Map([...this.#plan.inputs, ...this.#plan.outputs].filter((d) => d.ref).map((d) => [refKey(d.ref!), d.id]));
    return Object.fromEntries(
      Object.entries(map).map(([field, sources]) => [
        field,
        sources.map((s) => ({ dataset: known.get(refKey(s.input)) ?? refDataset(s.input, this.#naming).id, field: s.field, transformation: s.transformation })),
      ]),
    );
  }

  async #send(type: EventType, datasets: { inputs: EventDataset[]; outputs: EventDataset[] }, error?: { message: string }, exitCode?: number): Promise<void> {
    try {
      const identity =
        exitCode === undefined ? this.identity : { ...this.identity, tags: [...this.identity.tags, { key: 'exit-code', value: String(exitCode) }] };
      const event = runEvent(type, this.#now(), identity, datasets, PRODUCER, error ? { error } : {});
      await sendAll(this.#transports, event, this.#config['timeout-ms'], this.#logger);
    } catch (e) {
      // Building an event is our code: a bug there is still only a warning for the job.
      this.#logger.warn({ err: String(e) }, `lineage: the ${type} event could not be built`);
    }
  }
}

/**
 * An input's checks as OpenLineage assertions: the expectations the status reports for a table the
 * run read (not wrote), by their names, with the column a check judges.
 */
function withAssertions(events: EventDataset[], planned: readonly PlanDataset[], outputs: readonly OutputReport[]): EventDataset[] {
  return events.map((e, i) => {
    const ref = planned[i]?.ref;
    const checked = ref?.kind === 'table' ? outputs.find((o) => o.table === ref.table && o.committed === false && o.expectations?.length) : undefined;
    if (!checked) return e;
    const assertions: Assertion[] = checked.expectations!.map((x) => ({
      assertion: x.name,
      success: x.outcome === 'passed',
      ...(x.column ? { column: x.column } : {}),
    }));
    return { ...e, assertions };
  });
}

function toEvent(d: PlanDataset, fields?: readonly Field[]): EventDataset {
  const f = fields ?? d.fields;
  return { id: d.id, ...(d.symlink ? { symlink: d.symlink } : {}), ...(f ? { fields: f } : {}) };
}

/**
 * The code, exit code, config path and Spark error class of a failure: enough to find it in the
 * status document and the logs, without the message (a data error's message quotes the offending
 * key, a config error's the tenant's text).
 */
export function errorSummary(error: LakehouseError): string {
  const r = error.report();
  return `${r.code} (exit ${error.exitCode}, ${r.category})${r.path ? ` at ${r.path}` : ''}${r.sparkErrorClass ? ` [${r.sparkErrorClass}]` : ''}`;
}

/**
 * The parent run the orchestrator passed: `<PREFIX>_ID = namespace/name/runId` (the form of the
 * Airflow OpenLineage provider's `lineage_parent_id` macro), or the three variables
 * `<PREFIX>_JOB_NAMESPACE`, `<PREFIX>_JOB_NAME`, `<PREFIX>_RUN_ID`. The run id must be a UUID.
 */
export function parentFromEnv(env: Record<string, string | undefined>, prefix: string, logger?: Logger): ParentRef | undefined {
  let ref: ParentRef | undefined;
  const id = env[`${prefix}_ID`];
  if (id) {
    const first = id.indexOf('/');
    const last = id.lastIndexOf('/');
    if (first > 0 && last > first + 1) ref = { namespace: id.slice(0, first), name: id.slice(first + 1, last), runId: id.slice(last + 1) };
  } else {
    const [namespace, name, runId] = [env[`${prefix}_JOB_NAMESPACE`], env[`${prefix}_JOB_NAME`], env[`${prefix}_RUN_ID`]];
    if (namespace && name && runId) ref = { namespace, name, runId };
    else if (!namespace && !name && !runId) return undefined;
  }
  if (!ref || !UUID_PATTERN.test(ref.runId)) {
    logger?.warn(
      { variable: `${prefix}_ID` },
      `lineage: ${prefix}_* does not name a parent run as namespace/name/<uuid>; the events have no ${prefix === 'OPENLINEAGE_PARENT' ? 'parent' : 'root'}`,
    );
    return undefined;
  }
  return ref;
}

/** A logical date (`2026-07-05` or an ISO time) as an ISO time; anything else is not one. */
function nominalTime(logicalDate: string | undefined): string | undefined {
  if (!logicalDate) return undefined;
  const t = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(logicalDate) ? `${logicalDate}T00:00:00Z` : logicalDate);
  return Number.isNaN(t) ? undefined : new Date(t).toISOString();
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      timer.unref();
    }),
  ]);
}
