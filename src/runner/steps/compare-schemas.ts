import { displayTable, tableParts } from '../../core/naming.js';
import { type SchemaDiff, type StepOf, sameColumnType } from '../../jobs/steps.js';
import { formatRel } from '../../spark/plan/format.js';
import { Query } from '../../spark/plan/query.js';
import { relTouches } from '../../spark/plan/touches.js';
import { type StepKindModule, type StepRun, indent } from './kind.js';

/** Compare the columns a query produces with a table's (both analysed, nothing read); the step's function decides. */
export const compareSchemas: StepKindModule<StepOf<'compareSchemas'>> = {
  async run(step, run) {
    const { decision } = await compare(step, run);
    if (decision.fail) throw decision.fail;
    for (const command of decision.commands ?? []) await run.send({ command });
    return undefined;
  },
  async diff(step, run) {
    const stale = [...run.stale(step.source.rel), ...run.stale(Query.table(tableParts(step.table)).rel)];
    if (stale.length) {
      run.notPredicted(step, `it analyses ${[...new Set(stale)].join(', ')}, which this run writes before it`);
      return undefined;
    }
    const { decision, diff } = await compare(step, run);
    if (decision.fail) throw decision.fail;
    // The commands add the columns the table lacks (schema evolution): later reads see them, NULL.
    if (decision.commands?.length) run.wouldAddColumns(step, step.table, diff.added);
    return undefined;
  },
  plan: (step) => ({ relation: step.source.rel }),
  view: (step) => `CompareSchemas ${displayTable(step.table)} with:\n${indent(formatRel(step.source.rel), 3)}`,
  touches: (step) => ({ reads: relTouches(step.source.rel), writes: [] }),
  explainable: (step) => step.source.rel,
};

/** Both schemas (analysed, nothing read), their difference, and the step's decision on it. */
async function compare(
  step: StepOf<'compareSchemas'>,
  run: StepRun,
): Promise<{ diff: SchemaDiff; decision: ReturnType<StepOf<'compareSchemas'>['interpret']> }> {
  const [incoming, table] = await Promise.all([run.schema(step.source.rel), run.schema(Query.table(tableParts(step.table)).rel, { reveal: false })]);
  const have = new Map(table.map((f) => [f.name.toLowerCase(), f]));
  const names = new Set(incoming.map((f) => f.name.toLowerCase()));
  const diff: SchemaDiff = {
    added: incoming.filter((f) => !have.has(f.name.toLowerCase())),
    missing: [...have.values()].filter((f) => !names.has(f.name.toLowerCase())).map((f) => f.name),
    changed: incoming.flatMap((f) => {
      const t = have.get(f.name.toLowerCase());
      return t && !sameColumnType(t.type, f.type) ? [{ name: f.name, tableType: t.type, sourceType: f.type }] : [];
    }),
  };
  return { diff, decision: step.interpret(diff) };
}
