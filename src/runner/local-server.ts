import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { UnavailableError, UsageError } from '../core/errors.js';

/**
 * `--remote local`: start (or reuse) the project's own Spark Connect server with
 * `scripts/spark-connect start`, and return its `sc://` address. Like PySpark's `remote("local")`,
 * but the server outlives the run, so the next run starts in a second instead of half a minute.
 */
export const LOCAL_SCRIPT = fileURLToPath(new URL('../../scripts/spark-connect', import.meta.url));

export async function startLocalServer(logger: Logger): Promise<string> {
  if (!existsSync(LOCAL_SCRIPT))
    throw new UsageError('--remote local needs a checkout with scripts/spark-connect; in the container image set --remote or SPARK_REMOTE to an sc:// address');
  logger.info({ script: 'scripts/spark-connect' }, 'starting or reusing the local Spark Connect server');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [LOCAL_SCRIPT, 'start'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    let pending = '';
    child.stderr.on('data', (b: Buffer) => {
      pending += b.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) logger.info({ component: 'spark-connect' }, line);
    });
    child.on('error', (e) => reject(new UnavailableError(`cannot run scripts/spark-connect: ${e.message}`, { cause: e })));
    child.on('close', (code) => {
      const address = out.trim().split('\n').pop() ?? '';
      if (code === 0 && address.startsWith('sc://')) resolve(address);
      else reject(new UnavailableError(`the local Spark Connect server did not start (scripts/spark-connect exited ${code}); see its log: scripts/spark-connect log`));
    });
  });
}
