import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Where an `include "…"` may read from. A config names files relative to itself; the result must stay
 * below the include root both as written (no `..` escape) and after following symlinks (a link inside
 * the root must not lead out of it). Only `.conf` and `.json` are HOCON: anything else (`.js`,
 * `.properties`, extension-less probing) is refused, so nothing a config names can be executed.
 */

export type IncludeTarget = { file: string; real: string } | { missing: string } | { refused: string };

const INCLUDABLE = new Set(['.conf', '.json']);

export async function resolveInclude(root: string | undefined, fromDir: string, target: string): Promise<IncludeTarget> {
  // A scheme (`http:`, `file:`, `data:`…) means a URL: configs are local files only.
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return { refused: 'URLs cannot be included; name a file below the include root' };
  if (path.isAbsolute(target) || target.startsWith('~')) return { refused: 'absolute paths cannot be included; use a path relative to this file' };
  if (target.includes('\0')) return { refused: 'the file name contains a NUL character' };
  if (!INCLUDABLE.has(path.extname(target).toLowerCase())) return { refused: 'only .conf and .json files can be included' };
  if (root === undefined) return { refused: 'this source has no file or include root to include relative to' };

  const file = path.resolve(fromDir, target);
  if (!isInside(root, file)) return { refused: 'the file is outside the include root' };
  let real: string;
  try {
    real = await realpath(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { missing: file };
    return { refused: `the file cannot be resolved (${code ?? 'error'})` };
  }
  if (!isInside(await realpath(root).catch(() => root), real)) return { refused: 'the file is a symbolic link to a place outside the include root' };
  if (!(await stat(real)).isFile()) return { refused: 'not a regular file' };
  return { file, real };
}

/** `p` is strictly below directory `root` (both absolute). */
export function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}
