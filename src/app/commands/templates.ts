import { ExitCode } from '../../core/errors.js';
import type { LakehouseCommand } from '../command.js';

export const templatesCommand: LakehouseCommand = {
  command: 'templates',
  describe: 'the job catalog with schema versions',
  usage: '$0 templates',
  builder: (y) => y,
  async handler(_argv, io) {
    const { templates } = await import('../../jobs/registry.js');
    const list = templates.map((t) => ({
      name: t.name,
      layer: t.layer,
      stability: t.stability,
      schemaVersions: t.versions.map((v) => v.version),
      summary: t.summary,
      examples: t.versions.map((v) => v.example),
    }));
    io.stdout(JSON.stringify(list, null, 2) + '\n');
    return ExitCode.succeeded;
  },
};
