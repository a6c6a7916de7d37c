import { z } from 'zod';
import type { JobTemplate, TemplateVersion } from './template.js';

/** The JSON Schema of a template version's config, generated from its zod schema (the one source). */
export function jsonSchemaOf(t: JobTemplate, v: TemplateVersion): Record<string, unknown> {
  const schema = z.toJSONSchema(v.schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return {
    $schema: schema.$schema,
    $id: `lakehouse-jobs/schemas/${t.name}.v${v.version}.schema.json`,
    title: `${t.name} config, schema-version ${v.version}`,
    description: t.summary,
    ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== '$schema')),
  };
}
