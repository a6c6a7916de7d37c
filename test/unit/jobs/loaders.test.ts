import { describe, expect, it } from 'vitest';
import { loadTemplate, templateLoaders } from '../../../src/jobs/loaders.js';
import { templates } from '../../../src/jobs/registry.js';

/** src/jobs/loaders.ts: one template's module by name, the same objects as the catalog's. */
describe('template loaders', () => {
  it('has a loader for every template of the catalog, and only for those', () => {
    expect(Object.keys(templateLoaders).sort()).toEqual(templates.map((t) => t.name).sort());
  });

  it.each(templates.map((t) => [t.name, t] as const))('%s loads the very template of the catalog', async (name, template) => {
    expect(await loadTemplate(name)).toBe(template);
  });

  it('knows no other name, not even an object’s own keys', async () => {
    for (const name of ['no-such-job', '', 'constructor', '__proto__', 'toString', 'CDC-SILVER-MERGE']) expect(await loadTemplate(name)).toBeUndefined();
  });
});
