import { type LakehouseCommand, seconds, str } from '../command.js';
import { ENV_EPILOGUE, logOptions, platformOption, remoteOption } from '../options.js';
import { chooseOutput, logSink } from '../output.js';

export const pingCommand: LakehouseCommand = {
  command: 'ping',
  describe: 'one round trip to Spark Connect (readiness check); exits 0, or 69 when unreachable',
  usage: '$0 ping [--remote sc://…] [--env <platform.conf>] [--tenant <id>] [--timeout 10]',
  builder: (y) =>
    y

      .options({
        ...remoteOption,
        ...platformOption,
        tenant: {
          type: 'string',
          requiresArg: true,
          describe: 'with --env: a tenant the platform config gives a Spark Connect server of its own pings that server',
        },
        timeout: { type: 'string', requiresArg: true, default: '10', describe: 'seconds to wait for the answer, retries included' },
        ...logOptions,
      })
      .epilogue(ENV_EPILOGUE),
  async handler(argv, io) {
    const timeoutMs = seconds(argv.timeout, 'timeout');
    const output = chooseOutput(argv, io);
    const sink = await logSink(output, io);
    const { ping } = await import('../../runner/ping.js');
    return ping(
      {
        ...(str(argv, 'remote') ? { remote: str(argv, 'remote')! } : {}),
        ...(str(argv, 'env') ? { envFile: str(argv, 'env')! } : {}),
        ...(str(argv, 'tenant') ? { tenant: str(argv, 'tenant')! } : {}),
        env: process.env,
        logLevel: output.logLevel,
        ...(sink ? { logSink: sink } : {}),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        signals: process,
      },
      io.stdout,
    );
  },
};
