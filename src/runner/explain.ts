import type { Rel } from '../spark/plan/relations.js';
import type { Step } from '../jobs/template.js';

/** The relation of a step that Spark can explain without running anything, if it has one (`plan --explain`). */
export function explainableRel(step: Step): Rel | undefined {
  switch (step.kind) {
    case 'query':
    case 'materialize':
      return step.query.rel;
    case 'compareSchemas':
    case 'checkColumns':
      return step.source.rel;
    case 'stream':
      return step.command.input;
    case 'command': {
      const c = step.command;
      return c.kind === 'merge' ? c.source : c.kind === 'sqlCommand' || c.kind === 'extension' ? undefined : c.input;
    }
    default:
      return undefined;
  }
}
