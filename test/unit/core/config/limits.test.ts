import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOCON_LIMITS, parseHocon } from '../../../../src/core/config/hocon.js';
import { ConfigError } from '../../../../src/core/errors.js';

/**
 * Every resource limit of the HOCON reader against a hostile input, each parsed in a child process
 * with a 200 MB heap: the outcome must be a config error (78) naming the limit, within 1 s of CPU
 * and without growing the process by 200 MB, never a crash (70), a stack overflow or a slow grind.
 */

const run = promisify(execFile);
const script = fileURLToPath(new URL('./hostile-input.ts', import.meta.url));
const repo = fileURLToPath(new URL('../../../../', import.meta.url));
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'hocon-limits-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

interface Outcome {
  exitCode: number;
  messages: string[];
  ms: number;
  cpuMs: number;
  rssBeforeMiB: number;
  maxRssMiB: number;
}

async function hostile(name: string): Promise<Outcome> {
  const dir = await mkdtemp(path.join(tmp, `${name}-`));
  const { stdout } = await run(process.execPath, ['--max-old-space-size=200', '--import', 'tsx', script, name, dir], {
    cwd: repo,
    maxBuffer: 16 << 20,
    timeout: 30_000,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Outcome;
}

const cases: [string, RegExp][] = [
  ['dotted-key', /path has 10000 segments, more than the nesting limit of 64/],
  ['dotted-key-in-substitution', /path has 10000 segments, more than the nesting limit of 64/],
  ['nested-objects', /nested deeper than 64 levels/],
  ['nested-arrays', /nested deeper than 64 levels/],
  ['nested-dotted-keys-in-objects', /nested deeper than 64 levels \(dotted-key segments count as levels\)/],
  ['file-20mb', /config file is larger than 1 MiB \(the limit for one file\)/],
  ['text-20mb', /larger than 1 MiB \(the limit for one file\)/],
  ['many-values', /more than 100000 values \(the limit for a config and its includes\)/],
  ['many-fields', /more than 100000 values \(the limit for a config and its includes\)/],
  ['exponential-objects', /resolves to more than 100000 values \(limit/],
  // Lists are copied when concatenated: the copy limit stops them before the size limit would.
  ['exponential-lists', /copy more than 500000 values or 16777216 characters \(limit/],
  ['nested-self-concatenation', /copy more than 500000 values or 16777216 characters \(limit/],
  ['string-doubling', /value longer than 1048576 characters \(limit\)/],
  ['wide-string-copies', /value longer than 1048576 characters \(limit\)/],
  ['substitution-chain', /substitutions depend on each other more than 256 levels deep \(limit\)/],
  ['object-substitution-chain', /substitutions depend on each other more than 256 levels deep \(limit\)/],
  ['self-reference-chain', /copy more than 500000 values or 16777216 characters \(limit/],
  ['append-chain', /copy more than 500000 values or 16777216 characters \(limit/],
  ['long-substitution-chain', /more than 100000 values \(the limit for a config and its includes\)/],
  ['list-copies', /copy more than 500000 values or 16777216 characters \(limit/],
  ['string-copies', /copy more than 500000 values or 16777216 characters \(limit/],
  ['shared-strings', /resolves to more than 8388608 characters of strings \(limit/],
  ['deep-by-substitution', /resolves to values nested deeper than 64 levels \(limit\)/],
  ['frozen-copies', /copy more than 500000 values or 16777216 characters \(limit/],
  ['many-includes', /refused: more than 64 includes \(limit\)/],
  ['deep-includes', /refused: includes nest deeper than 16 \(limit\)/],
  ['large-includes', /the config and its includes are larger than 4 MiB together/],
  ['large-include', /refused: larger than 1 MiB \(the limit for one file\)/],
];

describe('HOCON resource limits against hostile input (child process, 200 MB heap)', () => {
  it.each(cases)('%s: 78 naming the limit, under 1 s of CPU and 200 MB', async (name, message) => {
    const o = await hostile(name);
    expect(o.exitCode).toBe(78);
    expect(o.messages.join('\n')).toMatch(message);
    expect(o.messages.length).toBeLessThanOrEqual(2); // one clear error, not one per value past the limit
    expect(o.cpuMs).toBeLessThan(1000);
    expect(o.ms).toBeLessThan(10_000); // wall time on a shared, loaded machine: no runaway either
    expect(o.maxRssMiB - o.rssBeforeMiB).toBeLessThan(200);
  });
});

describe('HOCON limits in process', () => {
  it('are the numbers docs/security.md promises', () => {
    // The contract is the docs page: each limit must appear there as written for people.
    const docs = readFileSync(fileURLToPath(new URL('../../../../docs/security.md', import.meta.url)), 'utf8').replace(/\s+/g, ' ');
    const human = (n: number) => (n % (1 << 20) === 0 ? `${n / (1 << 20)} MiB` : n.toLocaleString('en-US'));
    for (const [name, value] of Object.entries(HOCON_LIMITS)) expect(docs, name).toContain(human(value));
  });

  it('accepts configs right at the limits', async () => {
    const key = Array.from({ length: HOCON_LIMITS.depth }, () => 'a').join('.');
    expect(await parseHocon([{ text: `${key} = 1` }])).toBeTruthy();
    const chain = ['a0 = 1', ...Array.from({ length: 200 }, (_, i) => `a${i + 1} = \${a${i}}`)].join('\n');
    expect((await parseHocon([{ text: chain }])).a200).toBe(1);
    const wide = `a = [${Array.from({ length: 40_000 }, () => '1').join(',')}]`;
    expect(((await parseHocon([{ text: wide }])).a as unknown[]).length).toBe(40_000);
  });

  it('counts a key one past the depth limit, with its path', async () => {
    const key = Array.from({ length: HOCON_LIMITS.depth + 1 }, () => 'a').join('.');
    const e = await parseHocon([{ text: `${key} = 1`, file: 'deep.conf' }]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).exitCode).toBe(78);
    expect((e as ConfigError).issues[0]!.message).toMatch(/^deep\.conf:1:1: path has 65 segments, more than the nesting limit of 64$/);
  });

  it('reports at most 100 problems, each clipped, however many the config has', async () => {
    const text = Array.from({ length: 5000 }, (_, i) => `k${i} = \${HOME}`).join('\n');
    const e = (await parseHocon([{ text }], { env: { HOME: '/h' } }).catch((x: unknown) => x)) as ConfigError;
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.issues).toHaveLength(101);
    expect(e.issues.at(-1)!.message).toBe('more problems not shown (only the first 100 are reported)');
    const long = (await parseHocon([{ text: `a = 1\n${'k'.repeat(100_000)} x` }]).catch((x: unknown) => x)) as ConfigError;
    expect(long.issues[0]!.message.length).toBeLessThanOrEqual(1000);
    expect(long.issues[0]!.message).toMatch(/expected "=", ":" or "\{" after the key, found the end of the file$/);
    const quotedKey = (await parseHocon([{ text: `"${'q'.repeat(100_000)}" = \${nowhere}` }]).catch((x: unknown) => x)) as ConfigError;
    expect(quotedKey.issues[0]!.path.length).toBeLessThanOrEqual(300);
    const huge = (await parseHocon([{ text: `a = ${'9'.repeat(400)}` }]).catch((x: unknown) => x)) as ConfigError;
    expect(huge.issues[0]!.message).toMatch(/^9{39}… is out of the range of a number; quote it$/);
  });
});
