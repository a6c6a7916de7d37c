import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { importsOf, layerOf, violations } from '../../../scripts/check-deps.mjs';
import { tempFiles } from '../../support/files.js';
import { repoRoot } from '../../support/stack.js';

describe('one direction of dependencies: core <- spark <- jobs <- app', () => {
  it('holds for src/', () => {
    expect(violations(join(repoRoot, 'src'))).toEqual([]);
  });

  it('finds an import up the layers, static or dynamic, and allows imports down', () => {
    const src = tempFiles({
      'core/a.ts': "import type { X } from '../jobs/template.js';\nexport const a = 1;\n",
      'spark/b.ts': "const m = await import('../runner/run.js');\nimport { a } from '../core/a.js';\n",
      'jobs/c.ts': "export { s } from '../spark/b.js';\nimport '../app/side-effect.js';\n",
      'runner/d.ts': "import { c } from '../jobs/c.js';\n",
    });
    expect(
      violations(src)
        .map((v: { from: string; to: string }) => `${v.from} -> ${v.to}`)
        .sort(),
    ).toEqual(['core/a.ts -> jobs/template.js', 'jobs/c.ts -> app/side-effect.js', 'spark/b.ts -> runner/run.js']);
  });

  it('puts the runner, the commands and the entry point in the app layer', () => {
    expect(['core/x.ts', 'spark/plan/y.ts', 'jobs/z.ts', 'runner/run.ts', 'app/main.ts', 'cli.ts', 'version.ts'].map(layerOf)).toEqual([
      'core',
      'spark',
      'jobs',
      'app',
      'app',
      'app',
      'core',
    ]);
    expect(importsOf("import { a } from 'zod';\nimport {\n  b,\n} from './b.js';\n")).toEqual(['./b.js']);
  });
});
