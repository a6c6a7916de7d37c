import type { Logger } from '../core/logger.js';
import { DataError } from '../core/errors.js';
import type { Step } from '../jobs/steps.js';
import { rows as arrowRows } from '../spark/arrow.js';
import { SparkError } from '../spark/errors.js';
import { compileRelationPlan } from '../spark/plan/compile.js';
import { Query } from '../spark/plan/query.js';
import { type SparkType, structFields } from '../spark/types.js';
import type { SparkSession } from './executor.js';

/**
 * Which bad source file: a failed step's error, made to name the file and column when Spark named
 * neither (docs/contracts.md, exit 65). Only an error message is improved here; nothing is decided.
 */

interface ForensicsOptions {
  readonly session: SparkSession;
  readonly logger: Logger;
  readonly tags: string[];
  readonly signal: AbortSignal;
}

/** Source failures where Spark names neither the file nor (always) the column. */
const UNLOCATED = new Set(['SOURCE_TYPE_MISMATCH', 'SOURCE_TYPE_UNSUPPORTED']);
/** The search reads one footer per file: bounded, it is only there to improve an error message. */
const DIAGNOSE_MAX_FILES = 200;
const DIAGNOSE_MAX_MS = 30_000;
const NANOS_AS_LONG = 'spark.sql.legacy.parquet.nanosAsLong';

/**
 * A schema merge across bronze files fails without saying which file is odd, and an illegal Parquet
 * type (nanosecond timestamps) names neither file nor column. Then look at the step's Parquet
 * sources file by file (their schemas, footers only) and name the file and the column; any other
 * error, or a search that finds nothing within its bounds, is returned as it was.
 */
export async function findBadSourceFile(step: Step, error: unknown, opts: ForensicsOptions): Promise<unknown> {
  if (!(error instanceof SparkError) || !UNLOCATED.has(error.code) || error.messageParameters.path || opts.signal.aborted) return error;
  const started = performance.now();
  try {
    const paths = parquetSourcePaths(step);
    if (paths.length === 0) return error;
    // binaryFile lists the files; without its `content` column it reads none of them.
    const listing = Query.read('binaryFile', { paths, options: { pathGlobFilter: '*.parquet', recursiveFileLookup: 'true' } })
      .select('path')
      .limit(DIAGNOSE_MAX_FILES + 1);
    const files = (await opts.session.execute(compileRelationPlan(listing.rel, { reveal: true }), { tags: opts.tags, signal: opts.signal })).table;
    const names = (files ? arrowRows(files) : []).map((r) => String(r.path)).sort();
    if (names.length === 0 || names.length > DIAGNOSE_MAX_FILES) return error;
    const schemas = new Map<string, Map<string, string>>();
    const unreadable: string[] = [];
    for (const file of names) {
      if (performance.now() - started > DIAGNOSE_MAX_MS) return error;
      try {
        const t = await opts.session.analyze.schema(compileRelationPlan(Query.read('parquet', { paths: [file] }).rel, { reveal: true }));
        schemas.set(file, new Map(structFields(t as SparkType).map((f) => [f.name.toLowerCase(), f.type])));
      } catch (e) {
        if (e instanceof SparkError && e.code === 'SOURCE_TYPE_UNSUPPORTED') unreadable.push(file);
        else throw e;
      }
    }
    const located = error.code === 'SOURCE_TYPE_UNSUPPORTED' ? await illegalTypeColumn(unreadable, schemas, opts) : typeClash(schemas);
    if (!located) return error;
    opts.logger.info(
      { step: step.id, file: located.file, column: located.column, durationMs: Math.round(performance.now() - started) },
      'found the bad source file',
    );
    return new DataError(`source file ${located.file}: ${located.what}. Fix: ${error.hint ?? 'rewrite the file'}`, {
      cause: error,
      code: error.code,
      ...(error.hint ? { hint: error.hint } : {}),
    });
  } catch (e) {
    opts.logger.debug({ step: step.id, err: e instanceof Error ? e.message : String(e) }, 'looking for the bad source file failed');
    return error;
  }
}

/** The column whose type differs between files, and the file(s) of the minority type. */
function typeClash(schemas: Map<string, Map<string, string>>): { file: string; column: string; what: string } | undefined {
  const columns = new Set([...schemas.values()].flatMap((m) => [...m.keys()]));
  for (const column of columns) {
    const byType = new Map<string, string[]>();
    for (const [file, fields] of schemas) {
      const type = fields.get(column);
      if (type !== undefined) byType.set(type, [...(byType.get(type) ?? []), file]);
    }
    if (byType.size < 2) continue;
    const ranked = [...byType].sort((a, b) => b[1].length - a[1].length);
    const [common, odd] = [ranked[0]!, ranked[1]!];
    return {
      file: odd[1][0]!,
      column,
      what: `column ${column} is ${odd[0]} in this file${odd[1].length > 1 ? ` (and ${odd[1].length - 1} more)` : ''}, ${common[0]} in ${common[1].length} other file${common[1].length > 1 ? 's' : ''} of the source`,
    };
  }
  return undefined;
}

/**
 * The file Spark cannot read, and its column: read again with nanosecond timestamps as longs, the
 * column is the one that is a bigint there and a timestamp in the readable files (or any
 * nanosecond column when there is no readable file to compare with).
 */
async function illegalTypeColumn(
  unreadable: string[],
  readable: Map<string, Map<string, string>>,
  opts: ForensicsOptions,
): Promise<{ file: string; column: string; what: string } | undefined> {
  const file = unreadable[0];
  if (!file) return undefined;
  const more = unreadable.length > 1 ? ` (and ${unreadable.length - 1} more file${unreadable.length > 2 ? 's' : ''})` : '';
  let column: string | undefined;
  const unset = opts.session.config.unset?.bind(opts.session.config);
  if (unset) {
    await opts.session.config.set({ [NANOS_AS_LONG]: 'true' });
    try {
      const t = await opts.session.analyze.schema(compileRelationPlan(Query.read('parquet', { paths: [file] }).rel, { reveal: true }));
      const other = readable.values().next().value as Map<string, string> | undefined;
      column = structFields(t as SparkType).find((f) => f.type === 'bigint' && other?.get(f.name.toLowerCase())?.startsWith('timestamp'))?.name;
    } finally {
      await unset([NANOS_AS_LONG]);
    }
  }
  return {
    file,
    column: column ?? '?',
    what: `${column ? `column ${column} holds` : 'it holds'} a Parquet type Spark cannot read (nanosecond timestamps)${more}`,
  };
}

/** Every path a step reads as Parquet, wherever it sits in the step's plan. */
function parquetSourcePaths(step: Step): string[] {
  const out = new Set<string>();
  const seen = new Set<unknown>();
  const walk = (node: unknown, depth: number): void => {
    if (depth > 200 || typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    const n = node as { kind?: unknown; format?: unknown; paths?: unknown };
    if (n.kind === 'source' && n.format === 'parquet' && Array.isArray(n.paths)) for (const p of n.paths) out.add(String(p));
    for (const v of Array.isArray(node) ? node : Object.values(node)) walk(v, depth + 1);
  };
  walk(step, 0);
  return [...out];
}
