import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QUICKSTART_ORDERS } from '../../support/shop-source.js';

const repoRoot = join(import.meta.dirname, '../../..');

describe("the tests' copy of the quickstart's source events", () => {
  it('is exactly what scripts/quickstart writes into the source database, day by day', () => {
    const script = readFileSync(join(repoRoot, 'scripts/quickstart'), 'utf8');
    const literal = /^events = (\{[\s\S]*?\n\})\[day\]$/m.exec(script)?.[1];
    expect(literal, 'scripts/quickstart no longer has its events literal').toBeDefined();
    const events = JSON.parse(
      execFileSync('python3', ['-c', 'import ast, json, sys; print(json.dumps(ast.literal_eval(sys.stdin.read())))'], { input: literal, encoding: 'utf8' }),
    );
    expect(events).toEqual(QUICKSTART_ORDERS);
  });
});
