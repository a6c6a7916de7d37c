import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Integration tests run against the project's own local Spark Connect server: started here unless
 * one is already running (then reused and left running). A server started here is stopped after
 * the run unless LAKEHOUSE_KEEP_SPARK=1. SPARK_REMOTE, when set, points the tests elsewhere.
 * The stack's Iceberg REST catalog (scripts/iceberg-rest, the Spark catalog "rest") is started and
 * stopped the same way, next to the server.
 */
const script = fileURLToPath(new URL('../../scripts/spark-connect', import.meta.url));
const restScript = fileURLToPath(new URL('../../scripts/iceberg-rest', import.meta.url));

function isRunning(path: string): boolean {
  try {
    execFileSync('bash', [path, 'status'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export default function setup(): () => void {
  if (process.env.SPARK_REMOTE) return () => undefined;
  const restRunning = isRunning(restScript);
  execFileSync('bash', [restScript, 'start'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
  const running = isRunning(script);
  const out = execFileSync('bash', [script, 'start'], { stdio: ['ignore', 'pipe', 'inherit'], timeout: 900_000 }).toString();
  process.env.SPARK_REMOTE = out.trim().split('\n').pop();
  return () => {
    if (process.env.LAKEHOUSE_KEEP_SPARK === '1') return;
    if (!running) execFileSync('bash', [script, 'stop'], { stdio: 'inherit' });
    if (!restRunning) execFileSync('bash', [restScript, 'stop'], { stdio: 'inherit' });
  };
}
