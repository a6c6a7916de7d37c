import { ExitCode, UsageError } from '../../core/errors.js';
import { type LakehouseCommand, str } from '../command.js';

export const schemaCommand: LakehouseCommand = {
  command: 'schema <template>',
  describe: "JSON Schema of a template's config",
  usage: '$0 schema <template> [--schema-version N]',
  builder: (y) =>
    y

      .positional('template', { type: 'string', describe: 'a template of the catalog (lakehouse-jobs templates)' })
      .options({ 'schema-version': { type: 'string', requiresArg: true, describe: 'the schema version (default: the latest)' } }),
  async handler(argv, io) {
    const { findTemplate } = await import('../../jobs/registry.js');
    const { jsonSchemaOf } = await import('../../jobs/json-schema.js');
    const t = findTemplate(str(argv, 'template')!);
    const given = str(argv, 'schema-version');
    const wanted = given === undefined ? undefined : Number(given);
    if (wanted !== undefined && !Number.isInteger(wanted)) throw new UsageError(`--schema-version must be a whole number, got ${JSON.stringify(given)}`);
    const v = wanted === undefined ? t.versions.at(-1)! : t.versions.find((x) => x.version === wanted);
    if (!v) throw new UsageError(`${t.name} has no schema-version ${wanted} (has ${t.versions.map((x) => x.version).join(', ')})`);
    io.stdout(JSON.stringify(jsonSchemaOf(t, v), null, 2) + '\n');
    return ExitCode.succeeded;
  },
};
