/** The client_type we announce: `lakehouse-jobs/<version from package.json>`. */
import { readFileSync } from 'node:fs';

let cached: string | undefined;

export function clientVersion(): string {
  if (cached === undefined) {
    try {
      // src/spark/ and dist/spark/ both sit two levels below the package root.
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
      cached = typeof pkg.version === 'string' ? pkg.version : '0.0.0';
    } catch {
      cached = '0.0.0';
    }
  }
  return cached;
}

export function clientType(userAgent?: string): string {
  const ours = `lakehouse-jobs/${clientVersion()}`;
  return userAgent && userAgent !== ours ? `${userAgent} ${ours}` : ours;
}
