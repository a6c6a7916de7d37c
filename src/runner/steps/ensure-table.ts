import { displayTable } from '../../core/naming.js';
import type { StepOf } from '../../jobs/steps.js';
import { formatCmd } from '../../spark/plan/format.js';
import { adoptWinner, checkLocation, checkLocationEmpty, checkOtherCatalogs, mayBeLostCreateRace, ownTableExists } from '../table-guards.js';
import { type StepKindModule, indent } from './kind.js';

/**
 * Create a table unless it exists (probed by analysing its schema). A table that exists must be at
 * the step's location; a new one only where nothing else is (table-guards.ts). Another run may
 * create it between the probe and the create: its table is taken when it is this run's table, or
 * the run exits 75 while its create is under way (adoptWinner). Its plan is judged only when it is
 * sent: an existing table needs no check.
 */
export const ensureTable: StepKindModule<StepOf<'ensureTable'>> = {
  async run(step, run) {
    if (await ownTableExists(step, run)) {
      run.logger.debug({ table: displayTable(step.table) }, 'table exists');
      await checkLocation(step, run);
      return undefined;
    }
    await checkOtherCatalogs(step, run);
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
      return undefined;
    }
    // The run's guards, then what it would create: the columns of the relation it is created from.
    await checkOtherCatalogs(step, run);
    await checkLocationEmpty(step, run);
    const create = step.create;
    const from = create.kind === 'writeV2' || create.kind === 'write' ? create.input : undefined;
    run.wouldCreate(step, from ? await run.schema(from) : []);
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
