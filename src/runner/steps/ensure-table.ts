import { displayTable } from '../../core/naming.js';
import type { StepOf } from '../../jobs/steps.js';
import { formatCmd } from '../../spark/plan/format.js';
import { adoptWinner, checkLocation, checkLocationEmpty, checkOtherCatalogs, mayBeLostCreateRace, ownTableExists } from '../table-guards.js';
import type { Field } from '../../spark/types.js';
import { partitionColumnProblems, readShape, setPropertiesCommand, shapeChanges } from '../table-shape.js';
import { type StepKindModule, type StepRun, indent } from './kind.js';

/**
 * Create a table unless it exists (probed by analysing its schema). A table that exists must be at
 * the step's location; a new one only where nothing else is (table-guards.ts). Another run may
 * create it between the probe and the create: its table is taken when it is this run's table, or
 * the run exits 75 while its create is under way (adoptWinner). Its plan is judged only when it is
 * sent: an existing table needs no check.
 */
/**
 * The new table's columns (those of the relation it is created from), its partition fields checked
 * against them; analysed only when there are fields to check or `columns` are wanted (diff).
 */
async function checkPartitionColumns(step: StepOf<'ensureTable'>, run: StepRun, want: 'columns' | 'check'): Promise<Field[]> {
  const create = step.create;
  const from = create.kind === 'writeV2' || create.kind === 'write' ? create.input : undefined;
  if (!from || (want === 'check' && !step.shape?.partitionBy.length)) return [];
  const columns = await run.schema(from);
  const problem = partitionColumnProblems(step, columns);
  if (problem) throw problem;
  return columns;
}

export const ensureTable: StepKindModule<StepOf<'ensureTable'>> = {
  async run(step, run) {
    if (await ownTableExists(step, run)) {
      run.logger.debug({ table: displayTable(step.table) }, 'table exists');
      await checkLocation(step, run);
      const set = shapeChanges(step, await readShape(step, run));
      if (Object.keys(set).length) {
        run.logger.info({ table: displayTable(step.table), properties: set }, 'setting the configured table properties');
        await run.send({ command: setPropertiesCommand(step, set) });
      }
      return undefined;
    }
    await checkOtherCatalogs(step, run);
    await checkPartitionColumns(step, run, 'check');
    try {
      await checkLocationEmpty(step, run);
      await run.send({ command: step.create });
    } catch (e) {
      if (!mayBeLostCreateRace(e)) throw run.at(e, step.configPath);
      await adoptWinner(step, run, run.at(e, step.configPath));
    }
    return undefined;
  },
  async diff(step, run) {
    if (await ownTableExists(step, run)) {
      await checkLocation(step, run);
      const set = shapeChanges(step, await readShape(step, run));
      if (Object.keys(set).length) run.wouldSetProperties(step, set);
      return undefined;
    }
    // The run's guards, then what it would create: the columns of the relation it is created from.
    await checkOtherCatalogs(step, run);
    const columns = await checkPartitionColumns(step, run, 'columns');
    await checkLocationEmpty(step, run);
    run.wouldCreate(step, columns);
    return undefined;
  },
  plan: (step) => ({ command: step.create }),
  view: (step) => `EnsureTable ${displayTable(step.table)} at ${step.location}, if missing:\n${indent(formatCmd(step.create), 3)}`,
  touches: (step) => {
    const format = step.create.kind === 'writeV2' ? step.create.provider : undefined;
    const parts = [step.table.catalog, step.table.namespace, step.table.table];
    return { reads: [], writes: [{ kind: 'table', parts, location: step.location, ...(format ? { format } : {}) }] };
  },
  explainable: () => undefined,
};
