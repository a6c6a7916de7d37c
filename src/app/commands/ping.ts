import type { Command } from '../command.js';
import { seconds } from '../command.js';
import { JOB_OPTIONS, LOG_LEVEL } from './job.js';

const option = (name: string) => JOB_OPTIONS.find((o) => o.name === name)!;

export const pingCommand: Command = {
  spec: {
    name: 'ping',
    summary: 'one round trip to Spark Connect (readiness check); exits 0, or 69 when unreachable',
    usage: 'lakehouse-jobs ping [--remote sc://…] [--env <platform.conf>] [--timeout 10]',
    options: [
      option('remote'),
      option('env'),
      { name: 'timeout', type: 'string', arg: '<seconds>', default: '10', describe: 'seconds to wait for the answer, retries included' },
      LOG_LEVEL(),
    ],
  },
  async run(inv, env) {
    const timeoutMs = seconds(inv.values.timeout, 'timeout');
    const { ping } = await import('../../runner/ping.js');
    return ping({
      ...(typeof inv.values.remote === 'string' ? { remote: inv.values.remote } : {}),
      ...(typeof inv.values.env === 'string' ? { envFile: inv.values.env } : {}),
      env,
      logLevel: String(inv.values['log-level']),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      signals: process,
    });
  },
};
