import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { importsOf, LAYERS, layerOf, violations } from '../../../scripts/check-deps.mjs';
import { tempFiles } from '../../support/files.js';
import { repoRoot } from '../../support/stack.js';

describe('one direction of dependencies: core <- spark <- jobs <- runner <- app', () => {
  it('holds for src/', () => {
    expect(violations(join(repoRoot, 'src'))).toEqual([]);
  });

  it('finds an import up the layers, static or dynamic, and allows imports down', () => {
    const src = tempFiles({
      'core/a.ts': "import type { X } from '../jobs/template.js';\nexport const a = 1;\n",
      'spark/b.ts': "const m = await import('../runner/run.js');\nimport { a } from '../core/a.js';\n",
      'jobs/c.ts': "export { s } from '../spark/b.js';\nimport '../app/side-effect.js';\n",
      'runner/d.ts': "import { c } from '../jobs/c.js';\nimport type { View } from '../app/views/job.js';\n",
      'runner/e.ts': "const { main } = await import('../cli.js');\n",
      'app/f.ts': "import { runJob } from '../runner/run.js';\nimport { c } from '../jobs/c.js';\n",
      'cli.ts': "import { main } from './app/main.js';\n",
    });
    expect(
      violations(src)
        .map((v: { from: string; to: string }) => `${v.from} -> ${v.to}`)
        .sort(),
    ).toEqual([
      'core/a.ts -> jobs/template.js',
      'jobs/c.ts -> app/side-effect.js',
      'runner/d.ts -> app/views/job.js',
      'runner/e.ts -> cli.js',
      'spark/b.ts -> runner/run.js',
    ]);
  });

  it('has five layers: the runner below the commands and the entry point', () => {
    expect(LAYERS).toEqual(['core', 'spark', 'jobs', 'runner', 'app']);
    expect(
      ['core/x.ts', 'spark/plan/y.ts', 'jobs/z.ts', 'runner/run.ts', 'runner/lineage/index.ts', 'app/main.ts', 'cli.ts', 'version.ts'].map(layerOf),
    ).toEqual(['core', 'spark', 'jobs', 'runner', 'runner', 'app', 'app', 'core']);
    expect(importsOf("import { a } from 'zod';\nimport {\n  b,\n} from './b.js';\n")).toEqual(['./b.js']);
  });
});
