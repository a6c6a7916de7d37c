// The Node the README promises is the Node package.json's engines names, and every locked package
// accepts it: `npm ci` on that Node prints no EBADENGINE warning (protoc-gen-es 2.14+ asks for
// Node 22, for instance).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../support/stack.js';

type Version = [number, number, number];

const compare = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** Does `version` satisfy an npm engines range? Only the syntax that engines fields use; anything else throws. */
function satisfies(version: Version, range: string): boolean {
  // Any version (dateformat's engines).
  if (range.trim() === '*' || range.trim() === '') return true;
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .replace(/([<>=^~]+)\s+/g, '$1')
      .split(/\s+/)
      .every((comparator) => {
        const m = /^(>=|<=|>|<|=|\^|~)?v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/.exec(comparator);
        if (!m) throw new Error(`unsupported engines range: ${range}`);
        const [, op = '', major, minor, patch] = m;
        const wild = (p: string | undefined) => p === undefined || p === 'x' || p === '*';
        const v: Version = [Number(major), wild(minor) ? 0 : Number(minor), wild(patch) ? 0 : Number(patch)];
        const c = compare(version, v);
        const upTo = (next: Version) => c >= 0 && compare(version, next) < 0;
        switch (op) {
          case '>=':
            return c >= 0;
          case '>':
            return c > 0;
          case '<=':
            return c <= 0;
          case '<':
            return c < 0;
          case '^':
            if (v[0] === 0) throw new Error(`unsupported engines range: ${range}`);
            return upTo([v[0] + 1, 0, 0]);
          case '~':
            return upTo([v[0], v[1] + 1, 0]);
          default: // '=' or bare, with x / * wildcards
            if (wild(minor)) return upTo([v[0] + 1, 0, 0]);
            if (wild(patch)) return upTo([v[0], v[1] + 1, 0]);
            return c === 0;
        }
      }),
  );
}

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { engines?: Record<string, string> | string[]; optional?: boolean }>;
};

describe('the Node toolchain', () => {
  const floorMatch = /^>=(\d+)\.(\d+)$/.exec(pkg.engines.node);

  it("package.json's engines is the README's promise", () => {
    expect(floorMatch, `package.json engines.node is ${pkg.engines.node}`).not.toBeNull();
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    expect(readme).toContain(`needs Node ${floorMatch![1]}.${floorMatch![2]}+`);
  });

  it('every locked package accepts that Node', () => {
    const floor: Version = [Number(floorMatch![1]), Number(floorMatch![2]), 0];
    const refusing = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.engines && !Array.isArray(p.engines) && p.engines.node)
      .filter(([, p]) => !satisfies(floor, (p.engines as Record<string, string>).node!))
      .map(([path, p]) => `${path.replace(/^.*node_modules\//, '')} wants node ${(p.engines as Record<string, string>).node}`);
    expect(refusing).toEqual([]);
  });

  it('reads engines ranges as npm does', () => {
    const v20: Version = [20, 19, 0];
    expect(satisfies(v20, '>=20')).toBe(true);
    expect(satisfies(v20, '>=22')).toBe(false);
    expect(satisfies(v20, '>= 12.0.0')).toBe(true);
    expect(satisfies(v20, '^20.19.0 || >=22.12.0')).toBe(true);
    expect(satisfies([20, 18, 0], '^20.19.0 || >=22.12.0')).toBe(false);
    expect(satisfies([21, 0, 0], '^20.19.0 || >=22.12.0')).toBe(false);
    expect(satisfies(v20, '^20.0.0 || ^22.0.0 || >=24.0.0')).toBe(true);
    expect(satisfies(v20, '6.* || 8.* || >= 10.*')).toBe(true);
    expect(satisfies([9, 0, 0], '6.* || 8.* || >= 10.*')).toBe(false);
    expect(satisfies(v20, '^10 || ^12 || ^13.7 || ^14 || >=15.0.1')).toBe(true);
    expect(satisfies(v20, '>=18 <20')).toBe(false);
    expect(satisfies(v20, '~20.19.0')).toBe(true);
    expect(() => satisfies(v20, 'lts/*')).toThrow(/unsupported/);
  });
});
