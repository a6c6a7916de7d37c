import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliNodeFlags as benchFlags, cliV8Flags } from '../../../bench/node-flags.js';
// @ts-expect-error -- a build script (plain JavaScript, no declarations)
import { cliNodeFlags, parseNodeFlags } from '../../../scripts/build/node-flags.mjs';

/**
 * scripts/build/node-flags is the one list of the CLI's node flags: the build trains the bundle's V8
 * code caches under them (V8 rejects a cache under other V8 flags), so every way of starting the
 * CLI must use exactly them.
 */

const root = join(import.meta.dirname, '../../..');
const flags = (cliNodeFlags as (root: string) => string[])(root);
const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-node-flags-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the CLI’s node flags (scripts/build/node-flags)', () => {
  it('are node flags, one a line, comments skipped; source maps on', () => {
    expect(flags.length).toBeGreaterThan(0);
    for (const f of flags) expect(f).toMatch(/^--[a-z0-9-]+(=\S+)?$/);
    expect(flags).toContain('--enable-source-maps');
    expect((parseNodeFlags as (text: string) => string[])('# a comment\n\n  --a-flag \n--b=8\n')).toEqual(['--a-flag', '--b=8']);
    expect(() => parseNodeFlags('--a --b\n')).toThrow(/not one node flag/);
  });

  it('the Dockerfile’s ENTRYPOINT runs node with exactly these flags', () => {
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const line = dockerfile.split('\n').filter((l) => l.startsWith('ENTRYPOINT '));
    expect(line).toHaveLength(1);
    const entrypoint = JSON.parse(line[0]!.slice('ENTRYPOINT '.length)) as string[];
    expect(entrypoint).toEqual(['/usr/local/bin/tini', '--', '/usr/local/bin/node', ...flags, '/app/dist/cli.mjs']);
  });

  it('scripts/lakehouse-jobs runs node with exactly these flags', () => {
    // A `node` first on the PATH that prints its arguments: the script's last call of it is the CLI's.
    const bin = join(scratch, 'bin');
    rmSync(bin, { recursive: true, force: true });
    spawnSync('mkdir', ['-p', bin]);
    writeFileSync(join(bin, 'node'), '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done; echo ---\n');
    chmodSync(join(bin, 'node'), 0o755);
    const r = spawnSync('bash', [join(root, 'scripts/lakehouse-jobs'), '--version'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, LAKEHOUSE_LAKE_HOME: join(scratch, 'lake') },
    });
    expect(r.status).toBe(0);
    const calls = r.stdout.split('---\n').filter(Boolean);
    const last = calls.at(-1)!.split('\n').filter(Boolean);
    expect(last).toEqual([...flags, join(root, 'dist/cli.mjs'), '--version']);
  });

  it('the benchmarks read the same list (bench/node-flags.ts), the drivers without source maps', () => {
    expect(benchFlags(root)).toEqual(flags);
    expect(cliV8Flags(root)).toEqual(flags.filter((f) => f !== '--enable-source-maps'));
  });
});
