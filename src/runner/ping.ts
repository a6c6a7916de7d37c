import { asLakehouseError, CancelledError, ExitCode, UnavailableError } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { SparkConnectClient } from '../spark/client.js';
import { describeRemote, parseConnectionString } from '../spark/connection.js';
import { VERSION } from '../version.js';
import { startLocalServer } from './local-server.js';

/** A readiness probe must answer within its period: 10 s, retries included, unless told otherwise. */
export const DEFAULT_PING_TIMEOUT_MS = 10_000;

export interface PingOptions {
  /** The whole ping, retries included; past it the answer is "unreachable" (69). */
  timeoutMs?: number;
  /** Process signals to honour (the CLI passes `process`). */
  signals?: NodeJS.EventEmitter;
}

/**
 * `lakehouse-jobs ping`: can this pod reach Spark Connect? One AnalyzePlan(spark_version) round
 * trip, for readiness checks and for measuring cold start to first RPC. A server that accepts the
 * connection and never answers is as unready as one that refuses it: both end in 69 within the
 * timeout.
 */
export async function ping(remote: string, logLevel: string, opts: PingOptions = {}): Promise<number> {
  const logger = createLogger(logLevel, { command: 'ping' });
  const timeoutMs = opts.timeoutMs ?? DEFAULT_PING_TIMEOUT_MS;
  const started = performance.now();
  const cancel = new AbortController();
  const timer = setTimeout(
    () => cancel.abort(new UnavailableError(`Spark Connect at ${safeRemote(remote)} did not answer within ${timeoutMs / 1000} s`)),
    timeoutMs,
  );
  const onSignal = (signal: 'SIGINT' | 'SIGTERM') => cancel.abort(new CancelledError(signal));
  const int = () => onSignal('SIGINT');
  const term = () => onSignal('SIGTERM');
  opts.signals?.on('SIGINT', int);
  opts.signals?.on('SIGTERM', term);
  let client: SparkConnectClient | undefined;
  try {
    let spec = parseConnectionString(remote, { origin: { kind: 'option', name: '--remote' } });
    if (spec.kind === 'local') spec = parseConnectionString(await startLocalServer(logger));
    if (spec.kind !== 'remote') throw new Error('unreachable');
    client = SparkConnectClient.connect(spec, {
      userAgent: `lakehouse-jobs/${VERSION}`,
      logger,
      signal: cancel.signal,
      // The timer above is the one deadline; the call's own deadline only backs it up.
      deadlineMs: timeoutMs + 1_000,
      retryBudgetMs: timeoutMs,
      retry: { totalTimeoutMs: timeoutMs },
    });
    const serverVersion = await client.analyze.sparkVersion();
    process.stdout.write(JSON.stringify({ remote: describeRemote(spec), serverVersion, ms: Math.round(performance.now() - started) }) + '\n');
    return ExitCode.succeeded;
  } catch (e) {
    const error = cancel.signal.aborted ? asLakehouseError(cancel.signal.reason) : asLakehouseError(e);
    logger.error({ code: error.code, durationMs: Math.round(performance.now() - started) }, error.message);
    return error.exitCode;
  } finally {
    clearTimeout(timer);
    opts.signals?.off('SIGINT', int);
    opts.signals?.off('SIGTERM', term);
    client?.close();
  }
}

function safeRemote(remote: string): string {
  try {
    const spec = parseConnectionString(remote);
    return spec.kind === 'remote' ? describeRemote(spec) : remote;
  } catch {
    return 'the remote';
  }
}
