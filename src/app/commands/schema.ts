import { ExitCode, UsageError } from '../../core/errors.js';
import type { Command } from '../command.js';

export const schemaCommand: Command = {
  spec: {
    name: 'schema',
    summary: "JSON Schema of a template's config",
    usage: 'lakehouse-jobs schema <template> [--schema-version N]',
    positionals: [{ name: 'template', required: true }],
    options: [{ name: 'schema-version', type: 'string', arg: '<N>', describe: 'the schema version (default: the latest)' }],
  },
  async run(inv) {
    const { findTemplate } = await import('../../jobs/registry.js');
    const { jsonSchemaOf } = await import('../../jobs/json-schema.js');
    const t = findTemplate(inv.positionals.template!);
    const given = inv.values['schema-version'];
    const wanted = given === undefined ? undefined : Number(given);
    if (wanted !== undefined && !Number.isInteger(wanted)) throw new UsageError(`--schema-version must be a whole number, got ${JSON.stringify(given)}`);
    const v = wanted === undefined ? t.versions.at(-1)! : t.versions.find((x) => x.version === wanted);
    if (!v) throw new UsageError(`${t.name} has no schema-version ${wanted} (has ${t.versions.map((x) => x.version).join(', ')})`);
    process.stdout.write(JSON.stringify(jsonSchemaOf(t, v), null, 2) + '\n');
    return ExitCode.succeeded;
  },
};
