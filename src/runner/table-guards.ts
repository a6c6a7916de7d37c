import { ConfigError, TransientError } from '../core/errors.js';
import { displayTable, quoteName, sameLocation, tableParts } from '../core/naming.js';
import { type StepOf, sameColumnType } from '../jobs/steps.js';
import { alias, col, eq, fn, lit } from '../spark/plan/expressions.js';
import { Query } from '../spark/plan/query.js';
import { sql } from '../spark/plan/sql.js';
import type { StepRun } from './steps/kind.js';

/**
 * Where a table may be created and where a found one must be (docs/security.md, "One location
 * holds one kind"): the ensureTable step's guards, each a refusal before anything is written.
 */

type EnsureTable = StepOf<'ensureTable'>;

/** The files under `paths` as a relation whose analysis lists them and reads none (binaryFile's schema is fixed). */
export function listing(paths: readonly string[], options?: Record<string, string>): Query {
  return Query.read('binaryFile', { paths: [...paths], ...(options ? { options } : {}) });
}

export async function pathExists(run: StepRun, path: string): Promise<boolean> {
  try {
    await run.schema(listing([path]).rel, { reveal: false });
    return true;
  } catch (e) {
    if (run.errorClass(e)?.startsWith('PATH_NOT_FOUND')) return false;
    throw e;
  }
}

export async function tableExists(run: StepRun, parts: readonly string[]): Promise<boolean> {
  try {
    await run.schema(Query.table(parts).rel, { reveal: false });
    return true;
  } catch (e) {
    if (run.errorClass(e)?.startsWith('TABLE_OR_VIEW_NOT_FOUND')) return false;
    throw e;
  }
}

/**
 * Whether the step's own table exists. The tenant boundary refuses to read a table of the tenant's
 * namespace whose files lie outside the tenant's storage roots and never names that location (it
 * may be another tenant's): such a table exists elsewhere, the guard's refusal, at the step's path.
 */
export async function ownTableExists(step: EnsureTable, run: StepRun): Promise<boolean> {
  try {
    return await tableExists(run, tableParts(step.table));
  } catch (e) {
    // By its class and reason, not instanceof: validate and plan load no gRPC (spark/errors.ts does).
    const reason = (e as { messageParameters?: Record<string, string> }).messageParameters?.reason ?? '';
    if (run.errorClass(e) !== 'LAKEHOUSE_TENANT_POLICY' || !/outside the tenant's storage roots/.test(reason)) throw e;
    throw new ConfigError(
      [
        {
          path: step.configPath,
          message: `table ${displayTable(step.table)} already exists outside the tenant's storage roots, not at ${step.location} where the tenant's storage layout puts it; nothing was written to it (the server's log names its location; move or drop the table, or fix tenant.storage-root)`,
        },
      ],
      { cause: e },
    );
  }
}

/** A row of DESCRIBE TABLE EXTENDED (`Location`, `Provider`), if Spark reports it. */
async function describeRow(run: StepRun, parts: readonly string[], name: string): Promise<unknown> {
  const describe = Query.sql(sql`DESCRIBE TABLE EXTENDED ${sql.table(parts)}`).filter(eq(col('col_name'), lit(name)));
  return (await run.rows(describe.rel, { reveal: false })).rows[0]?.data_type;
}

/** Where Spark says a table is, if it says. */
const locationOf = (run: StepRun, parts: readonly string[]) => describeRow(run, parts, 'Location');

/**
 * The catalog finds tables by name; the name alone would let a job write to a table left at an old
 * lake home or at another tenant's path, and report the path it expected.
 */
export async function checkLocation(step: EnsureTable, run: StepRun): Promise<void> {
  const actual = await locationOf(run, tableParts(step.table));
  if (typeof actual === 'string' && sameLocation(actual, step.location)) return;
  const where = typeof actual === 'string' && actual !== '' ? `at ${actual}` : 'without a location Spark reports';
  throw new ConfigError([
    {
      path: step.configPath,
      message: `table ${displayTable(step.table)} already exists ${where}, not at ${step.location} where the tenant's storage layout puts it; nothing was written to it (move or drop the table, or fix tenant.storage-root)`,
    },
  ]);
}

/**
 * Before a table is created: the same namespace and name in the platform's other catalogs. The
 * tenant's layout puts a layer's table at one location whatever its catalog, and Spark creates an
 * Iceberg table on a directory holding a Delta table (or another catalog's Iceberg table) without
 * complaint; both then write there, and one's maintenance deletes the other's files. Refused (78,
 * TABLE_LOCATION_TAKEN) when such a table is at this location; a catalog the server does not have
 * holds no table. A view there has no location and is no obstacle.
 */
export async function checkOtherCatalogs(step: EnsureTable, run: StepRun): Promise<void> {
  for (const catalog of run.catalogs) {
    if (catalog === step.table.catalog) continue;
    const parts = [catalog, step.table.namespace, step.table.table];
    let exists: boolean;
    try {
      exists = await tableExists(run, parts);
    } catch (e) {
      // Not a catalog of this server: Spark reads the name as a namespace of its session catalog.
      if (run.errorClass(e)?.startsWith('REQUIRES_SINGLE_PART_NAMESPACE')) continue;
      throw run.at(e, step.configPath);
    }
    if (!exists) continue;
    const actual = await locationOf(run, parts);
    if (typeof actual !== 'string' || !sameLocation(actual, step.location)) continue;
    const other = quoteName(parts);
    throw new ConfigError(
      [
        {
          path: step.configPath,
          message: `table ${displayTable(step.table)} cannot be created at ${step.location}: ${other} of catalog ${catalog} is there (the tenant's layout puts a layer's table at one location whatever its catalog, and two tables in one directory delete each other's files); nothing was written (name this table differently, or drop the other)`,
        },
      ],
      { code: 'TABLE_LOCATION_TAKEN' },
    );
  }
}

/**
 * Before a table is created: nothing else is at its location. A table created over files it does
 * not own takes them for its own to delete (Iceberg's orphan-file removal, Delta's VACUUM), so a new
 * table starts at an empty location: no `_delta_log` and no file Spark lists (hidden files, `_…`
 * and `.…`, are not listed and do not count). Refused (78, TABLE_LOCATION_TAKEN); nothing is written.
 */
export async function checkLocationEmpty(step: EnsureTable, run: StepRun): Promise<void> {
  const taken = (what: string) =>
    new ConfigError(
      [
        {
          path: step.configPath,
          message: `table ${displayTable(step.table)} cannot be created at ${step.location}: ${what} already there (another format's table, a table dropped from its catalog without its files, or bronze parquet files), which the new table would take for its own and delete in its maintenance; a new table starts at an empty location, and nothing was written (move the files away, or name the table differently)`,
        },
      ],
      { code: 'TABLE_LOCATION_TAKEN' },
    );
  if (await pathExists(run, `${step.location}/_delta_log`)) throw taken('a Delta table (_delta_log)');
  const files = await filesUnder(run, step.location, step.configPath);
  if (files.length > 0) throw taken(`${files.length} file(s)`);
}

/** The files Spark lists under `path`, recursively (none when it does not exist). */
async function filesUnder(run: StepRun, path: string, configPath: string): Promise<string[]> {
  try {
    return await run.inputFiles(listing([path], { recursiveFileLookup: 'true' }).rel);
  } catch (e) {
    if (run.errorClass(e)?.startsWith('PATH_NOT_FOUND')) return [];
    throw run.at(e, configPath);
  }
}

/**
 * Failures another run's create of the same table can cause in this run's create (docs/catalogs.md,
 * "Concurrent first runs"): the catalog's AlreadyExists (CREATE_RACE), Delta's protocol conflict of
 * two first commits (COMMIT_CONFLICT), and the winner's files found at the location, by our listing
 * or by Delta (TABLE_LOCATION_TAKEN). By code, not instanceof: validate and plan load no gRPC.
 */
export function mayBeLostCreateRace(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'CREATE_RACE' || code === 'COMMIT_CONFLICT' || code === 'TABLE_LOCATION_TAKEN';
}

/** How recent the files of a location must be to be a create under way (its catalog entry follows them). */
const CREATE_UNDER_WAY_SECONDS = 300;

/** How long a run waits for the catalog entry of a create under way: its probes' pauses, about 10 s in all. */
export const CREATE_WAIT_MS: readonly number[] = [500, 1000, 2000, 3000, 3500];

/**
 * After a create that may have lost a race: go on with the winner's table when the catalog has it
 * and it is the table this run would have created (its location, its format, no column of another
 * type; columns one side lacks are the template's schema step's to decide). The winner's catalog
 * entry may follow its commit by a moment: the run waits about 10 s for it, then exits 75. Files
 * at the location that no catalog names (the guard's or Delta's refusal) are waited for only when
 * they may be a create under way; otherwise, or when no catalog names them by then, they are what
 * the guard said (78).
 */
export async function adoptWinner(step: EnsureTable, run: StepRun, lost: unknown): Promise<void> {
  const adopt = async () => {
    await checkLocation(step, run);
    await checkSameTable(step, run);
    run.logger.info({ table: displayTable(step.table) }, 'another run created the table first: going on with it');
  };
  if (await ownTableExists(step, run)) return adopt();
  const taken = (lost as { code?: unknown } | null)?.code === 'TABLE_LOCATION_TAKEN';
  if (taken && !(await createUnderWay(step, run))) throw lost;
  for (const ms of CREATE_WAIT_MS) {
    await pause(ms, run.signal);
    if (await ownTableExists(step, run)) return adopt();
  }
  if (taken) throw lost;
  throw new TransientError(
    `${step.configPath}: table ${displayTable(step.table)} was created at the same moment by another run, and is not visible to this one yet; retry the run`,
    { code: 'CREATE_RACE', cause: lost },
  );
}

/**
 * Whether the files at a location may be another run's create of this table under way: written in
 * the last minutes, and for an Iceberg table only metadata (a runner's create writes no data file;
 * Delta's writes an empty one before its log).
 */
async function createUnderWay(step: EnsureTable, run: StepRun): Promise<boolean> {
  if (step.create.kind === 'writeV2' && step.create.provider === 'iceberg') {
    const files = await filesUnder(run, step.location, step.configPath);
    if (files.some((f) => !/\/metadata\/[^/]+$/.test(f))) return false;
  }
  return recentFilesAt(run, step.location);
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** The table another run created is of this step's format, and shares no column with it under another type. */
async function checkSameTable(step: EnsureTable, run: StepRun): Promise<void> {
  const parts = tableParts(step.table);
  const refuse = (what: string) =>
    new ConfigError([
      {
        path: step.configPath,
        message: `table ${displayTable(step.table)} was created at ${step.location} by another run at the same time, ${what}; nothing was written to it (give the jobs of one table one config)`,
      },
    ]);
  const create = step.create;
  if (create.kind !== 'writeV2') return;
  const provider = await describeRow(run, parts, 'Provider');
  if (create.provider && typeof provider === 'string' && provider.toLowerCase() !== create.provider.toLowerCase())
    throw refuse(`as a ${provider} table, not ${create.provider}`);
  const [ours, theirs] = await Promise.all([run.schema(create.input), run.schema(Query.table(parts).rel, { reveal: false })]);
  const have = new Map(theirs.map((f) => [f.name.toLowerCase(), f.type]));
  const clashes = ours.filter((f) => have.has(f.name.toLowerCase()) && !sameColumnType(have.get(f.name.toLowerCase())!, f.type));
  if (clashes.length > 0) throw refuse(`with ${clashes.map((f) => `column ${f.name} as ${have.get(f.name.toLowerCase())} (this run: ${f.type})`).join(', ')}`);
}

/** Whether a file under `location` (its `_delta_log` included) was written within the last minutes, by the server's clock. */
async function recentFilesAt(run: StepRun, location: string): Promise<boolean> {
  for (const path of [`${location}/_delta_log`, location]) {
    const newest = listing([path], { recursiveFileLookup: 'true' }).select(
      alias(fn('-', fn('unix_timestamp'), fn('max', fn('unix_timestamp', col('modificationTime')))), 'age'),
    );
    try {
      const age = (await run.rows(newest.rel, { reveal: false })).rows[0]?.age;
      if (age !== null && age !== undefined && Number(age) <= CREATE_UNDER_WAY_SECONDS) return true;
    } catch (e) {
      if (!run.errorClass(e)?.startsWith('PATH_NOT_FOUND')) throw e;
    }
  }
  return false;
}
