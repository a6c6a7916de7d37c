import { InternalError } from '../core/errors.js';
import { type TableName, comparableStorageUri, tableParts } from '../core/naming.js';
import type { DiffReport, OutputReport, StreamRead, TableChange } from '../core/status.js';
import type { Facts, Sample, Step, StepOf } from '../jobs/steps.js';
import type { Cmd } from '../spark/plan/commands.js';
import { type Expr, alias, cast, col, eq, fn, lit, or, and } from '../spark/plan/expressions.js';
import { formatExpr, name } from '../spark/plan/format.js';
import { Query } from '../spark/plan/query.js';
import type { OptionValue, Rel } from '../spark/plan/relations.js';
import { rewriteRel } from '../spark/plan/rewrite.js';
import { baseTable, cmdTouches } from '../spark/plan/touches.js';
import type { Field } from '../spark/types.js';
import { partitionText } from '../jobs/partition-spec.js';
import { pathExists } from './table-guards.js';
import type { DiffRun, StepRun } from './steps/kind.js';

/**
 * `diff`: what a run would do now, writing nothing (docs/diff.md). The executor runs every step's
 * `diff` operation instead of its `run`; this is the state they share. Reads are the run's own,
 * except that a table the run would create is read as the empty relation it would be created from
 * (and one that would gain columns, with them as NULL); a read of anything an earlier unsent write
 * changes is stale, and its step is predicted by the template (`predict`) or reported as not predicted.
 */

/** How many rows of a failing expectation a diff shows. */
export const SAMPLE_ROWS = 10;
/** How many partitions a dynamic overwrite's report names. */
const MAX_PARTITIONS = 20;
/** A sample's text values are cut here: a diff shows what fails, not whole documents. */
const SAMPLE_TEXT = 200;

const key = (parts: readonly string[]) => parts.map((p) => p.toLowerCase()).join('\u0000');
const pathKey = (path: string) => (comparableStorageUri(path) ?? path).replace(/\/+$/, '');
const within = (a: string, b: string) => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);

export class DiffState {
  readonly report: DiffReport = { changes: [], writes: [], notPredicted: [], streams: [] };
  /** Reads of these tables are answered by another relation (a table the run would create or widen). */
  readonly #substitutes = new Map<string, Rel>();
  /** Tables whose rows an unsent write changes. */
  readonly #rowsChanged = new Set<string>();
  /** Tables created or widened: their plain reads are substituted, any other read (SQL text, metadata) is stale. */
  readonly #reshaped = new Set<string>();
  /** Paths an unsent write writes. */
  readonly #paths: string[] = [];
  /** Rows a materialize step did not keep (it was not predicted): reading them is stale. */
  readonly #unkept = new Set<string>();
  #pending: { sample: Sample; rows: Record<string, unknown>[] }[] = [];

  /** A relation as the diff sends it: reads of created or widened tables replaced. */
  substitute(rel: Rel): Rel {
    return rewriteRel(rel, (node) => (node.kind === 'table' ? this.#substitutes.get(key(node.parts)) : undefined));
  }

  /** What `rel` reads that an earlier unsent write changes (tables, paths, kept rows), by name. */
  stale(rel: Rel): string[] {
    const tableStale = (parts: readonly string[], plain: boolean): boolean => {
      const base = key(baseTable(parts));
      if (this.#rowsChanged.has(base)) return true;
      if (plain && this.#substitutes.has(key(parts))) return false;
      return this.#reshaped.has(base);
    };
    const walk = (r: Rel): string[] => {
      switch (r.kind) {
        case 'table':
          return tableStale(r.parts, true) ? [name(baseTable(r.parts))] : [];
        case 'sql':
        case 'extension':
          return r.reads.filter((parts) => tableStale(parts, false)).map((parts) => name(baseTable(parts)));
        case 'source':
          return r.paths.filter((p) => this.#paths.some((w) => within(pathKey(p), w)));
        case 'materialized':
          return this.#unkept.has(r.name) ? [`the rows of ${r.name}`] : [];
        case 'range':
          return [];
        case 'join':
        case 'union':
          return [...walk(r.left), ...walk(r.right)];
        default:
          return walk(r.input);
      }
    };
    return [...new Set(walk(rel))];
  }

  /** The change of a table (or path), added in the order the run first touches it. */
  #change(target: { table?: readonly string[]; path?: string; format?: string | undefined; location?: string | undefined }): TableChange {
    const table = target.table ? name(target.table) : undefined;
    const path = target.path;
    let c = this.report.changes.find((x) => (table !== undefined ? x.table === table : x.path === path));
    if (!c) {
      c = { ...(table !== undefined ? { table } : { path: path! }), writes: [] };
      this.report.changes.push(c);
    }
    if (target.format && !c.format) c.format = target.format;
    if (target.location && !c.location) c.location = target.location;
    return c;
  }

  #wrote(step: Step): void {
    if (!this.report.writes.includes(step.id)) this.report.writes.push(step.id);
  }

  created(step: StepOf<'ensureTable'>, columns: readonly Field[]): void {
    const create = step.create;
    if (create.kind !== 'writeV2' && create.kind !== 'write') throw new InternalError(`step ${step.id}: a table created by ${create.kind} cannot be diffed`);
    const input = create.input;
    const parts = tableParts(step.table);
    // The relation it is created from, without rows: what every plain read of it sees until the run writes it.
    this.#substitutes.set(key(parts), Object.freeze({ kind: 'limit', input, n: 0 }));
    this.#reshaped.add(key(parts));
    const c = this.#change({ table: parts, format: create.kind === 'writeV2' ? create.provider : create.format, location: step.location });
    const properties = step.shape?.properties ?? {};
    c.create = {
      columns: columns.map((f) => ({ name: f.name, type: f.type })),
      partitionBy: step.shape
        ? step.shape.partitionBy.map((f) => partitionText(f.field))
        : create.kind === 'writeV2'
          ? create.partitionBy.map(formatExpr)
          : [...create.partitionBy],
      ...(Object.keys(properties).length ? { properties: { ...properties } } : {}),
    };
    c.writes.push({ step: step.id, title: step.title });
    this.#wrote(step);
  }

  propertiesSet(step: StepOf<'ensureTable'>, properties: Readonly<Record<string, string>>): void {
    const c = this.#change({ table: tableParts(step.table), location: step.location });
    c.setProperties = { ...c.setProperties, ...properties };
    c.writes.push({ step: step.id, title: `Set table properties ${Object.keys(properties).join(', ')}` });
    this.#wrote(step);
  }

  widened(step: Step, table: TableName, columns: readonly Field[]): void {
    const parts = tableParts(table);
    const nulls = columns.map((f) => [f.name, cast(lit(null), f.type)] as const);
    this.#substitutes.set(key(parts), Query.table(parts).withColumns(nulls).rel);
    this.#reshaped.add(key(parts));
    const c = this.#change({ table: parts });
    c.addColumns = [...(c.addColumns ?? []), ...columns.map((f) => ({ name: f.name, type: f.type }))];
    c.writes.push({ step: step.id, title: step.title });
    this.#wrote(step);
  }

  wrote(step: Step, command: Cmd, detail?: { replaces?: string; rowsReplaced?: number }): void {
    for (const w of cmdTouches(command).writes) {
      if (w.kind === 'table') {
        this.#rowsChanged.add(key(baseTable(w.parts)));
        this.#change({ table: baseTable(w.parts), format: w.format, location: w.location }).writes.push({ step: step.id, title: step.title, ...detail });
      } else if (w.kind === 'source')
        for (const p of w.paths) {
          this.#paths.push(pathKey(p));
          this.#change({ path: p, format: w.format, location: p }).writes.push({ step: step.id, title: step.title, ...detail });
        }
    }
    this.#wrote(step);
  }

  streamed(read: StreamRead): void {
    this.report.streams.push(read);
  }

  notPredicted(step: Step, reason: string): void {
    if (step.kind === 'materialize') this.#unkept.add(step.name);
    this.report.notPredicted.push({ step: step.id, reason });
  }

  /**
   * Whether a step's `when` cannot be told: it reads the facts of a step that was not predicted
   * (its rows would count as none). Such a step is reported as not predicted, and not run.
   */
  whenUnknown(step: Step, facts: Facts): boolean {
    if (!step.when) return false;
    const unknown = new Set(this.report.notPredicted.map((n) => n.step));
    const read = new Set<string>();
    step.when({
      rows: (s) => (read.add(s.id), facts.rows(s)),
      count: (ref) => (read.add(ref.step), facts.count(ref)),
    });
    const missing = [...read].filter((id) => unknown.has(id));
    if (!missing.length) return false;
    this.notPredicted(step, `whether it runs depends on ${missing.join(', ')}, which was not predicted`);
    return true;
  }

  /** Samples read for the step now running: put into their outputs' expectations once its effect is applied. */
  keepSamples(sampled: { sample: Sample; rows: Record<string, unknown>[] }[]): void {
    this.#pending.push(...sampled);
  }

  attachSamples(outputs: readonly OutputReport[]): void {
    for (const { sample, rows } of this.#pending) {
      const e = outputs.find((o) => o.table === sample.table)?.expectations?.find((x) => x.name === sample.expectation);
      if (e) e.samples = rows;
    }
    this.#pending = [];
  }
}

/** The diff's view of a step's session: the run's reads (with the diff's substitutions), no write, and the recorder. */
export function diffRun(step: Step, base: StepRun, state: DiffState, facts: DiffRun['facts'], outputs: () => readonly OutputReport[]): DiffRun {
  const sub = (rel: Rel) => state.substitute(rel);
  const run: DiffRun = {
    ...base,
    facts,
    send: (node) => {
      // The guarantee: whatever a kind module asks, a diff sends no command (a checkpoint only keeps rows in memory).
      if ('command' in node) throw new InternalError(`diff: step ${step.id} tried to send a command`);
      return base.send('relation' in node ? { relation: sub(node.relation) } : { checkpoint: sub(node.checkpoint) });
    },
    rows: (rel, o) => base.rows(sub(rel), o),
    schema: (rel, o) => base.schema(sub(rel), o),
    inputFiles: (rel) => base.inputFiles(sub(rel)),
    streaming: () => Promise.reject(new InternalError(`diff: step ${step.id} tried to run a streaming query`)),
    effect: (effect) => {
      try {
        return base.effect(effect);
      } finally {
        state.attachSamples(outputs());
      }
    },
    stale: (rel) => state.stale(rel),
    wouldCreate: (s, columns) => state.created(s, columns),
    wouldAddColumns: (s, table, columns) => state.widened(s, table, columns),
    wouldSetProperties: (s, properties) => state.propertiesSet(s, properties),
    wouldWrite: (s, command, detail) => state.wrote(s, command, detail),
    wouldRead: (read) => state.streamed(read),
    notPredicted: (s, reason) => {
      base.logger.info({ step: s.id, reason }, `${s.id} not predicted: ${reason}`);
      state.notPredicted(s, reason);
    },
    sample: async (samples) => {
      const sampled = [];
      for (const sample of samples) {
        if (state.stale(sample.rows.rel).length) continue;
        const { rows } = await run.rows(sample.rows.limit(SAMPLE_ROWS).rel);
        sampled.push({ sample, rows: rows.map((r) => jsonRow(r)) });
      }
      state.keepSamples(sampled);
    },
  };
  return run;
}

/** A sample row as the status document can carry it: plain JSON values, long text cut. */
function jsonRow(row: Record<string, unknown>): Record<string, unknown> {
  const plain = (v: unknown): unknown => {
    if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
    if (typeof v === 'string') return v.length > SAMPLE_TEXT ? `${v.slice(0, SAMPLE_TEXT)}…` : v;
    if (v instanceof Uint8Array) return `<${v.length} bytes>`;
    if (Array.isArray(v)) return v.map(plain);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
    return v;
  };
  return plain(row) as Record<string, unknown>;
}

const optionText = (v: OptionValue | undefined) => (typeof v === 'string' ? v : undefined);
const count = (q: Query) => q.aggregate([], [alias(fn('count', lit(1)), 'rows')]);

/**
 * What a write replaces, where its command says (an overwrite's condition, a dynamic overwrite's
 * partitions), and how many rows are there now: counted in the table or files, never by running
 * the write. Appends and MERGEs replace nothing the command can say; the template's own measure
 * counts what they change.
 */
export async function writeDetail(cmd: Cmd, run: DiffRun): Promise<{ replaces?: string; rowsReplaced?: number } | undefined> {
  if (cmd.kind === 'writeV2') {
    const scope: Expr | undefined =
      cmd.mode === 'overwrite' ? (cmd.overwriteCondition ?? lit(true)) : cmd.mode === 'replace' || cmd.mode === 'create_or_replace' ? lit(true) : undefined;
    if (cmd.mode === 'overwrite_partitions') return { replaces: 'the partitions its rows fall in' };
    if (!scope) return undefined;
    const replaces = scope.kind === 'lit' && scope.value === true ? 'every row' : formatExpr(scope);
    const table = Query.table(cmd.table);
    if (run.stale(table.rel).length) return { replaces };
    const { rows } = await run.rows(count(table.filter(scope)).rel, { reveal: false });
    return { replaces, rowsReplaced: Number(rows[0]?.rows ?? 0) };
  }
  if (cmd.kind !== 'write' || cmd.path === undefined || cmd.mode !== 'overwrite') return undefined;
  if (optionText(cmd.options.partitionOverwriteMode) !== 'dynamic' || cmd.partitionBy.length === 0) {
    // A static overwrite replaces the folder whole (parquet bronze's date folder): the rows there now.
    const replaces = `every file at ${cmd.path}`;
    const files = Query.read(cmd.format, { paths: [cmd.path] });
    if (run.stale(files.rel).length) return { replaces };
    if (!(await pathExists(run, cmd.path))) return { replaces, rowsReplaced: 0 };
    const { rows } = await run.rows(count(files).rel, { reveal: false });
    return { replaces, rowsReplaced: Number(rows[0]?.rows ?? 0) };
  }
  // The partitions the rows fall in: what a dynamic overwrite replaces, and nothing else.
  const values = await run.rows(
    Query.of(cmd.input)
      .select(...cmd.partitionBy.map((c) => alias(cast(col(c), 'string'), c)))
      .deduplicate()
      .limit(MAX_PARTITIONS + 1).rel,
  );
  const partitions = values.rows.map((r) => cmd.partitionBy.map((c) => [c, r[c] === null || r[c] === undefined ? null : String(r[c])] as const));
  const shown = partitions.slice(0, MAX_PARTITIONS).map((p) => p.map(([c, v]) => `${c}=${v ?? '__HIVE_DEFAULT_PARTITION__'}`).join('/'));
  const replaces = `${shown.join(', ')}${partitions.length > MAX_PARTITIONS ? ', …' : ''}`;
  if (partitions.length === 0 || partitions.length > MAX_PARTITIONS || run.stale(Query.read(cmd.format, { paths: [cmd.path] }).rel).length) return { replaces };
  if (!(await pathExists(run, cmd.path))) return { replaces, rowsReplaced: 0 };
  const inPartition = or(...partitions.map((p) => and(...p.map(([c, v]) => (v === null ? fn('isnull', col(c)) : eq(cast(col(c), 'string'), lit(v)))))));
  const { rows } = await run.rows(count(Query.read(cmd.format, { paths: [cmd.path], options: { basePath: cmd.path } }).filter(inPartition)).rel, {
    reveal: false,
  });
  return { replaces, rowsReplaced: Number(rows[0]?.rows ?? 0) };
}
