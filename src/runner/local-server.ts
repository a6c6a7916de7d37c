import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../core/logger.js';
import { UnavailableError, UsageError } from '../core/errors.js';

/**
 * `--remote local`: start (or reuse) the project's own Spark Connect server with
 * `scripts/spark-connect start`, and return its `sc://` address. Like PySpark's `remote("local")`,
 * but the server outlives the run, so the next run starts in a second instead of half a minute.
 */
export const LOCAL_SCRIPT = fileURLToPath(new URL('../../scripts/spark-connect', import.meta.url));

/** How often a long start says it is still going. */
const HEARTBEAT_MS = 15_000;

export interface LocalServerOptions {
  /** Where plain progress lines go when info logs are off (stderr by default). */
  stderr?: (text: string) => void;
  /** Tests point this at a stand-in script. */
  script?: string;
  heartbeatMs?: number;
}

export async function startLocalServer(logger: Logger, opts: LocalServerOptions = {}): Promise<string> {
  const script = opts.script ?? LOCAL_SCRIPT;
  if (!existsSync(script))
    throw new UsageError('--remote local needs a checkout with scripts/spark-connect; in the container image set --remote or SPARK_REMOTE to an sc:// address');
  const started = performance.now();
  const elapsedS = () => Math.round((performance.now() - started) / 1000);
  // A first start installs Spark and waits for it: minutes. Its progress must reach a person even
  // when info logs are off (the quickstart runs at warn): then as plain lines on stderr.
  const progress = (line: string) => {
    if (logger.isLevelEnabled('info')) logger.info({ component: 'spark-connect', elapsedS: elapsedS() }, line);
    else (opts.stderr ?? ((t: string) => process.stderr.write(t)))(`lakehouse-jobs: [${elapsedS()}s] ${line}\n`);
  };
  progress('starting or reusing the local Spark Connect server (scripts/spark-connect start)');
  return new Promise((resolve, reject) => {
    const heartbeat = setInterval(() => progress('still starting the local Spark Connect server'), opts.heartbeatMs ?? HEARTBEAT_MS);
    heartbeat.unref();
    const child = spawn('bash', [script, 'start'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    let pending = '';
    child.stderr.on('data', (b: Buffer) => {
      pending += b.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) progress(line);
    });
    child.on('error', (e) => {
      clearInterval(heartbeat);
      reject(new UnavailableError(`cannot run scripts/spark-connect: ${e.message}`, { cause: e }));
    });
    child.on('close', (code) => {
      clearInterval(heartbeat);
      const address = out.trim().split('\n').pop() ?? '';
      if (code === 0 && address.startsWith('sc://')) resolve(address);
      else
        reject(
          new UnavailableError(`the local Spark Connect server did not start (scripts/spark-connect exited ${code}); see its log: scripts/spark-connect log`),
        );
    });
  });
}
