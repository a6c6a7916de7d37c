import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { originOf, parseHocon, readHoconFile } from '../../../../src/core/config/hocon.js';
import { tempFiles } from '../../../support/files.js';

/** Where each key was written: what lets a schema problem name its line as a syntax error does. */
describe('HOCON origins', () => {
  const load = async (files: Record<string, string>, overrides: string[] = []) => {
    const dir = tempFiles(files);
    const origins = new Map<string, string>();
    await parseHocon([await readHoconFile(join(dir, 'job.conf'))], { origins, overrides, includeRoot: dir });
    return { dir, at: (path: PropertyKey[]) => originOf(origins, path) };
  };

  it('names the file, line and column of a key, nested or dotted', async () => {
    const { dir, at } = await load({ 'job.conf': 'job {\n  name = x\n}\nsource.table = "t"\n' });
    expect(at(['job', 'name'])).toBe(`${join(dir, 'job.conf')}:2:3`);
    expect(at(['source', 'table'])).toBe(`${join(dir, 'job.conf')}:4:1`);
  });

  it('points a missing key or an array item at its nearest written ancestor', async () => {
    const { dir, at } = await load({ 'job.conf': 'cdc {\n  keys = [a, b]\n}\n' });
    expect(at(['cdc', 'primary-key'])).toBe(`${join(dir, 'job.conf')}:1:1`);
    expect(at(['cdc', 'keys', 1])).toBe(`${join(dir, 'job.conf')}:2:3`);
    expect(at(['nowhere'])).toBeUndefined();
  });

  it('follows the last assignment: an include, then a later line, then --set', async () => {
    const { dir, at } = await load({ 'job.conf': 'include "common.conf"\nb = 2\n', 'common.conf': 'a = 1\nb = 1\n' }, ['c = 3']);
    expect(at(['a'])).toBe(`${join(dir, 'common.conf')}:1:1`);
    expect(at(['b'])).toBe(`${join(dir, 'job.conf')}:2:1`);
    expect(at(['c'])).toBe('--set[0]:1:1');
  });
});
