import { asLakehouseError, CancelledError, ConfigError, type ConfigIssue, ExitCode, UnavailableError } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { registerConnectionSecrets, scrub } from '../core/secrets.js';
import { SparkConnectClient } from '../spark/client.js';
import { describeRemote, parseConnectionString } from '../spark/connection.js';
import { VERSION } from '../version.js';
import { chosenRemote, resolveRemote } from './remote.js';
import { checkRestCatalogs } from './catalog-check.js';
import type { PlatformConfig } from '../core/config/platform.js';

/** A readiness probe must answer within its period: 10 s, retries included, unless told otherwise. */
export const DEFAULT_PING_TIMEOUT_MS = 10_000;

export interface PingOptions {
  /** `--remote`; else SPARK_REMOTE, the platform config's remote, then local (src/runner/remote.ts). */
  remote?: string;
  /** The platform config (`--env`): its remote and token apply as for `run`. */
  envFile?: string;
  /** `--tenant`: with a platform config that gives the tenant a server of its own, that server is pinged. */
  tenant?: string;
  env: Record<string, string | undefined>;
  logLevel: string;
  /** Where the log's JSON lines go (scrubbed); stderr by default. */
  logSink?: (line: string) => void;
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
export async function ping(opts: PingOptions, stdout: (text: string) => void = (t) => process.stdout.write(t)): Promise<number> {
  for (const remote of [opts.remote, opts.env.SPARK_REMOTE]) registerConnectionSecrets(remote);
  const logger = createLogger(opts.logLevel, { command: 'ping' }, opts.logSink);
  let remote = opts.remote ?? opts.env.SPARK_REMOTE ?? 'local';
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
    // Without `--env` there is no platform config to read: no remote, token or REST catalog beyond
    // the defaults, so ping never loads the config loader or zod (cold start → first RPC, issue 13).
    const platform = opts.envFile ? await readPlatform(opts.envFile, opts.env) : undefined;
    const sources = {
      ...(opts.remote ? { option: opts.remote } : {}),
      env: opts.env,
      ...(platform ? { platform } : {}),
      ...(opts.tenant !== undefined ? { tenant: opts.tenant } : {}),
    };
    remote = chosenRemote(sources).text;
    const spec = await resolveRemote(sources, logger);
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
    // The platform's REST catalogs (docs/catalogs.md) must answer too; none declared, no field.
    const catalogs = platform ? await checkRestCatalogs(platform, opts.env, { signal: cancel.signal }) : {};
    const reached = Object.keys(catalogs).length ? { catalogs } : {};
    stdout(JSON.stringify({ ok: true, remote: describeRemote(spec), serverVersion, ...reached, ms: Math.round(performance.now() - started) }) + '\n');
    return ExitCode.succeeded;
  } catch (e) {
    // A broken platform config is the answer even when the deadline passed while it was read.
    const error = cancel.signal.aborted && !(e instanceof ConfigError) ? asLakehouseError(cancel.signal.reason) : asLakehouseError(e);
    const ms = Math.round(performance.now() - started);
    logger.error({ code: error.code, durationMs: ms }, error.message);
    // A probe's caller reads stdout: a failure is an answer too, in the same one-line shape.
    const { code, message, ...rest } = error.report();
    stdout(scrub(JSON.stringify({ ok: false, remote: safeRemote(remote), exitCode: error.exitCode, error: { code, message, ...rest }, ms })) + '\n');
    return error.exitCode;
  } finally {
    clearTimeout(timer);
    opts.signals?.off('SIGINT', int);
    opts.signals?.off('SIGTERM', term);
    client?.close();
  }
}

/** The platform config, validated in full: a malformed one is still 78 with its path. */
async function readPlatform(file: string, env: Record<string, string | undefined>): Promise<PlatformConfig> {
  const { loadPlatform } = await import('../core/config/load.js');
  const issues: ConfigIssue[] = [];
  const platform = await loadPlatform(file, env, issues);
  if (issues.length) throw new ConfigError(issues);
  return platform;
}

function safeRemote(remote: string): string {
  try {
    const spec = parseConnectionString(remote);
    return spec.kind === 'remote' ? describeRemote(spec) : remote;
  } catch {
    return 'the remote';
  }
}
