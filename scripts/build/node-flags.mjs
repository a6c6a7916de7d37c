// The node flags of the CLI, from scripts/build/node-flags (the one list of them; see there).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The flags in `text` (the format of scripts/build/node-flags): one a line, `#` lines are comments. */
export function parseNodeFlags(text) {
  const flags = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  for (const f of flags) if (!/^--[a-z0-9-]+(=\S+)?$/.test(f)) throw new Error(`scripts/build/node-flags: not one node flag: ${f}`);
  return flags;
}

/** The CLI's node flags, read from scripts/build/node-flags of the checkout at `root`. */
export function cliNodeFlags(root) {
  return parseNodeFlags(readFileSync(join(root, 'scripts/build/node-flags'), 'utf8'));
}
