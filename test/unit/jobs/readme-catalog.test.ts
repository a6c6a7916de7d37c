import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { templates } from '../../../src/jobs/registry.js';

/** README's "Job catalog" table: `| \`name\` | v1, v2 | what it does |` rows. */
function readmeCatalog(): { name: string; versions: string }[] {
  const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');
  const section = readme.split(/^## Job catalog$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/^\| `([a-z0-9-]+)` \| ([^|]+) \|/gm)].map((m) => ({ name: m[1]!, versions: m[2]!.trim() }));
}

describe("README's job catalog", () => {
  it('lists every template of the registry, in its order, with its schema versions, and nothing else', () => {
    expect(readmeCatalog()).toEqual(templates.map((t) => ({ name: t.name, versions: t.versions.map((v) => `v${v.version}`).join(', ') })));
  });
});
