import { ExitCode } from '../../core/errors.js';
import type { Command } from '../command.js';

export const templatesCommand: Command = {
  spec: { name: 'templates', summary: 'the job catalog with schema versions', usage: 'lakehouse-jobs templates', options: [] },
  async run() {
    const { templates } = await import('../../jobs/registry.js');
    const list = templates.map((t) => ({
      name: t.name,
      layer: t.layer,
      stability: t.stability,
      schemaVersions: t.versions.map((v) => v.version),
      summary: t.summary,
      examples: t.versions.map((v) => v.example),
    }));
    process.stdout.write(JSON.stringify(list, null, 2) + '\n');
    return ExitCode.succeeded;
  },
};
