import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OUTPUT_METRICS, isOutputMetric } from '../../../src/core/metrics.js';
import { repoRoot } from '../../support/stack.js';

/** docs/contracts.md's table of output metrics is OUTPUT_METRICS, name for name and word for word. */
describe('output metrics', () => {
  it('are documented in docs/contracts.md exactly as defined', () => {
    const doc = readFileSync(join(repoRoot, 'docs/contracts.md'), 'utf8');
    const section = doc.slice(doc.indexOf('### Output metrics'));
    const table = section.slice(0, section.indexOf('\n## '));
    const rows = [...table.matchAll(/^\| `([^`]+)` \| (.*) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(rows)).toEqual(OUTPUT_METRICS);
  });

  it('match a name or a column pattern, nothing else', () => {
    expect(['inserted', 'vacuumFiles', 'nulled.amount', 'nulled.a.b'].filter((n) => !isOutputMetric(n))).toEqual([]);
    expect(['insertd', 'nulled.', 'nulled', 'rowsRead', 'toString', 'constructor', '__proto__'].filter(isOutputMetric)).toEqual([]);
  });
});
