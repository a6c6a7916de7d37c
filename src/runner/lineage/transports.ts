import { appendFile } from 'node:fs/promises';
import type { Logger } from '../../core/logger.js';
import { type LineageConfig, resolveSecret } from '../../core/config/platform.js';
import { scrub } from '../../core/secrets.js';

/**
 * Where events go: the log (console), a file of JSON lines (append), or an OpenLineage HTTP
 * receiver (POST `<url>/<endpoint>`, optional bearer token by secret reference). A transport
 * throws on failure; the caller turns that into a warning and bounds it in time.
 */
export interface Transport {
  readonly name: string;
  send(line: string, signal: AbortSignal): Promise<void>;
}

export function transportsOf(config: LineageConfig, env: Record<string, string | undefined>, logger: Logger): Transport[] {
  return config.transports.map((t, i): Transport => {
    switch (t.type) {
      case 'console':
        return { name: 'console', send: async (line) => logger.info({ openlineage: JSON.parse(line) as unknown }, 'lineage event') };
      case 'file':
        return { name: `file ${t.path}`, send: (line) => appendFile(t.path, `${line}\n`, { encoding: 'utf8', mode: 0o640 }) };
      case 'http': {
        const target = `${t.url.replace(/\/+$/, '')}/${t.endpoint.replace(/^\/+/, '')}`.replace(/\/$/, '');
        return {
          name: `http ${target}`,
          send: async (line, signal) => {
            const headers: Record<string, string> = { 'content-type': 'application/json' };
            // Resolved at the moment of use, like every secret; a missing one fails this send only.
            if (t.token) headers.authorization = `Bearer ${resolveSecret(t.token, `(platform) lineage.transports[${i}].token`, env).reveal()}`;
            const res = await fetch(target, { method: 'POST', headers, body: line, signal });
            // The body is drained, never echoed: a receiver's error page is not ours to log.
            await res.arrayBuffer().catch(() => undefined);
            if (!res.ok) throw new Error(`HTTP ${res.status}`);
          },
        };
      }
    }
  });
}

/**
 * Send one event on every transport at once and wait at most `timeoutMs` for all of them. Never
 * throws: a failure or a timeout is a warning, and the job goes on.
 */
export async function sendAll(transports: readonly Transport[], event: object, timeoutMs: number, logger: Logger): Promise<void> {
  if (!transports.length) return;
  // Secrets registered anywhere in the run are scrubbed from the event text like from every output.
  const line = scrub(JSON.stringify(event));
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
    timer.unref();
  });
  const type = (event as { eventType?: string }).eventType;
  const sends = transports.map((t) =>
    t.send(line, abort.signal).then(
      () => t.name,
      (e: unknown) => {
        const message = abort.signal.aborted ? `no answer within ${timeoutMs} ms` : e instanceof Error ? e.message : String(e);
        logger.warn({ transport: t.name, eventType: type }, `lineage: sending the ${type} event failed (${message}); the job goes on`);
        return undefined;
      },
    ),
  );
  const done = Promise.all(sends);
  const first = await Promise.race([done, timedOut]);
  clearTimeout(timer);
  if (first === 'timeout') {
    abort.abort();
    logger.warn({ eventType: type, timeoutMs }, `lineage: the ${type} event was not delivered everywhere within ${timeoutMs} ms; the job goes on`);
  }
}
