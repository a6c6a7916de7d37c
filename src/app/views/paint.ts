/** ANSI colours for a terminal that shows them; identity functions otherwise. */
export interface Paint {
  bold(t: string): string;
  dim(t: string): string;
  green(t: string): string;
  red(t: string): string;
  yellow(t: string): string;
}

export function paint(colorize: boolean): Paint {
  const sgr = (open: number, close: number) => (t: string) => (colorize ? `\x1b[${open}m${t}\x1b[${close}m` : t);
  return { bold: sgr(1, 22), dim: sgr(2, 22), green: sgr(32, 39), red: sgr(31, 39), yellow: sgr(33, 39) };
}
