import { asLakehouseError, ExitCode } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { SparkConnectClient } from '../spark/client.js';
import { describeRemote, parseConnectionString } from '../spark/connection.js';
import { VERSION } from '../version.js';
import { startLocalServer } from './local-server.js';

/**
 * `lakehouse-jobs ping`: can this pod reach Spark Connect? One AnalyzePlan(spark_version) round
 * trip, for readiness checks and for measuring cold start to first RPC.
 */
export async function ping(remote: string, logLevel: string): Promise<number> {
  const logger = createLogger(logLevel, { command: 'ping' });
  const started = performance.now();
  let client: SparkConnectClient | undefined;
  try {
    let spec = parseConnectionString(remote, { origin: { kind: 'option', name: '--remote' } });
    if (spec.kind === 'local') spec = parseConnectionString(await startLocalServer(logger));
    if (spec.kind !== 'remote') throw new Error('unreachable');
    // A readiness check answers quickly: a few retries within 10 s, not a run's 10-minute budget.
    client = SparkConnectClient.connect(spec, { userAgent: `lakehouse-jobs/${VERSION}`, logger, retry: { maxRetries: 4, totalTimeoutMs: 10_000 } });
    const serverVersion = await client.analyze.sparkVersion();
    process.stdout.write(JSON.stringify({ remote: describeRemote(spec), serverVersion, ms: Math.round(performance.now() - started) }) + '\n');
    return ExitCode.succeeded;
  } catch (e) {
    const error = asLakehouseError(e);
    logger.error({ code: error.code }, error.message);
    return error.exitCode;
  } finally {
    client?.close();
  }
}
