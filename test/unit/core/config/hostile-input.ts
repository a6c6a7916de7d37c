/**
 * One hostile HOCON input, parsed in a child process started by limits.test.ts with a capped heap
 * (`node --max-old-space-size=200 --import tsx hostile-input.ts <case> <dir>`): a stack overflow, an
 * out-of-memory crash or a slow parse shows as a crash or a time, not as a hung test runner. Prints
 * one JSON line: the exit code the error maps to, its messages, the parse's wall and CPU time, and
 * the RSS before the parse and at its peak.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseHocon, readHoconFile } from '../../../../src/core/config/hocon.js';

const [name, dir] = process.argv.slice(2) as [string, string];
const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join('\n');
const file = (rel: string, text: string) => {
  const p = path.join(dir, rel);
  mkdirSync(path.dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
};
// Each case builds its input first and returns the parse: only the parse is timed.
const parseText = (text: string) => () => parseHocon([{ text }]);
const parseFile = (p: string) => async () => parseHocon([await readHoconFile(p)]);

const cases: Record<string, () => () => Promise<unknown>> = {
  // The attacker's report: a 10,000-segment dotted key, a 20 MB array.
  'dotted-key': () => parseText(`${lines(10_000, () => 'a').replaceAll('\n', '.')} = 1`),
  'dotted-key-in-substitution': () => parseText(`a = \${${lines(10_000, () => 'a').replaceAll('\n', '.')}}`),
  'nested-objects': () => parseText('a '.concat('{ a '.repeat(100_000), '= 1', ' }'.repeat(100_000))),
  'nested-arrays': () => parseText(`a = ${'['.repeat(200_000)}${']'.repeat(200_000)}`),
  'nested-dotted-keys-in-objects': () => parseText(lines(40, () => 'a.b {').concat(' c = 1 ', '}'.repeat(40))),
  'file-20mb': () => parseFile(file('big.conf', `a = [${'1,'.repeat(10 << 20)}1]`)),
  'text-20mb': () => parseText(`a = [${'1,'.repeat(10 << 20)}1]`),
  'many-values': () => parseText(`a = [${'1,'.repeat(450_000)}1]`),
  'many-fields': () => parseText(lines(105_000, (i) => `k${i}=1`)),
  // Substitution expansion.
  'exponential-objects': () => parseText(`a0 = { x = 1 }\n${lines(60, (i) => `a${i + 1} = { l = \${a${i}}, r = \${a${i}} }`)}`),
  'exponential-lists': () => parseText(`a0 = [1, 2]\n${lines(60, (i) => `a${i + 1} = \${a${i}} \${a${i}}`)}`),
  'nested-self-concatenation': () => parseText(`a = [1, 2, 3, 4]\n${lines(60, () => 'a = ${a} ${a} ${a}')}`),
  'string-doubling': () => parseText(`s = xxxxxxxx\n${lines(60, () => 's = ${s}${s}')}`),
  'wide-string-copies': () => parseText(`s = "${'x'.repeat(600_000)}"\n${lines(200, (i) => `c${i} = \${s}\${s}`)}`),
  'substitution-chain': () => parseText(`${lines(1000, (i) => `a${i} = \${a${i + 1}}`)}\na1000 = 1`),
  'object-substitution-chain': () => parseText(`${lines(1000, (i) => `a${i} { v = \${a${i + 1}.v} }`)}\na1000.v = 1`),
  'self-reference-chain': () => parseText(`a = x\n${lines(20_000, () => 'a = ${a}x')}`),
  'append-chain': () => parseText(lines(20_000, () => 't += 1')),
  'long-substitution-chain': () => parseText(`a0 = 1\n${lines(50_000, (i) => `a${i + 1} = \${a${i}}`)}`),
  'list-copies': () => parseText(`a = [${'1,'.repeat(40_000)}1]\n${lines(30, (i) => `b${i} = \${a} [2]`)}`),
  'string-copies': () => parseText(`s = "${'x'.repeat(500_000)}"\n${lines(40, (i) => `c${i} = \${s}\${s}`)}`),
  'shared-strings': () => parseText(`s = "${'x'.repeat(500_000)}"\nl = [${lines(20, () => '${s}').replaceAll('\n', ', ')}]`),
  'deep-by-substitution': () => parseText(`a0 = {}\n${lines(400, (i) => `a${i + 1} { ${lines(30, () => 'x').replaceAll('\n', '.')} = \${a${i}} }`)}`),
  'frozen-copies': () => parseText(`a { ${lines(30_000, (i) => `k${i} = 1`)} }\n${lines(60, () => 'a = ${a} { z = 1 }')}`),
  // Includes.
  'many-includes': () => {
    for (let i = 0; i < 100; i++) file(`inc/f${i}.conf`, `v${i} = ${i}`);
    return parseFile(
      file(
        'many.conf',
        lines(100, (i) => `include "inc/f${i}.conf"`),
      ),
    );
  },
  'deep-includes': () => {
    for (let i = 0; i < 40; i++) file(`chain/c${i}.conf`, `include "c${i + 1}.conf"\nd${i} = 1`);
    file('chain/c40.conf', 'end = 1');
    return parseFile(file('chain/start.conf', 'include "c0.conf"'));
  },
  'large-includes': () => {
    for (let i = 0; i < 6; i++) file(`large/l${i}.conf`, `s${i} = "${'y'.repeat(900_000)}"`);
    return parseFile(
      file(
        'large.conf',
        lines(6, (i) => `include "large/l${i}.conf"`),
      ),
    );
  },
  'large-include': () => {
    file('one/big.conf', `s = "${'z'.repeat(2 << 20)}"`);
    return parseFile(file('one-large.conf', 'include "one/big.conf"'));
  },
};

const build = cases[name];
if (!build) throw new Error(`no case ${name}`);
const run = build();
const rssBeforeMiB = process.memoryUsage().rss / (1 << 20);
const started = performance.now();
const cpuBefore = process.cpuUsage();
let result: { exitCode: number; messages: string[] };
try {
  await run();
  result = { exitCode: 0, messages: [] };
} catch (e) {
  const err = e as { exitCode?: number; issues?: { path: string; message: string }[]; message?: string };
  result = { exitCode: err.exitCode ?? 70, messages: err.issues?.map((i) => `${i.path}: ${i.message}`) ?? [String(err.message ?? e)] };
}
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
// CPU time is what the input costs; wall time also carries the load of a shared machine.
const cpuMs = (cpu.user + cpu.system) / 1000;
process.stdout.write(`${JSON.stringify({ ...result, ms, cpuMs, rssBeforeMiB, maxRssMiB: process.resourceUsage().maxRSS / 1024 })}\n`);
