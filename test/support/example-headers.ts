import { readFileSync } from 'node:fs';

/**
 * The commands an example's header gives (configs/examples/*.conf): its comment lines indented by
 * three spaces (`#   scripts/…`), a trailing `\` continuing a command on the next such line, a
 * trailing `# …` a remark, not part of it. Tests run them verbatim, so a header that stops working
 * fails a test.
 */
export function headerCommands(file: string): string[] {
  const commands: string[] = [];
  let current: string | undefined;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('#')) break;
    const m = (current === undefined ? /^# {3}(\S.*)$/ : /^# {3}\s*(\S.*)$/).exec(line);
    if (!m) {
      current = undefined;
      continue;
    }
    const text = m[1]!.replace(/\s+#\s.*$/, '').trimEnd();
    const joined = current === undefined ? text : `${current} ${text.trim()}`;
    if (joined.endsWith('\\')) current = joined.slice(0, -1).trimEnd();
    else {
      commands.push(joined);
      current = undefined;
    }
  }
  return commands;
}
