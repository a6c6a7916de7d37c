import { describe, expect, it } from 'vitest';
import type { Args, Io } from '../../../src/app/command.js';
import { chooseOutput, logSink } from '../../../src/app/output.js';
import { createLogger } from '../../../src/core/logger.js';
import { registerSecretValue } from '../../../src/core/secrets.js';

const io = (stdoutIsTTY: boolean, stderrIsTTY: boolean, sink: string[] = []): Io => ({
  stdout: () => undefined,
  stderr: (t) => void sink.push(t),
  stdoutIsTTY,
  stderrIsTTY,
});
const args = (o: Record<string, string> = {}) => ({ _: [], $0: 'lakehouse-jobs', ...o }) as Args;

describe('who reads the output: JSON for orchestrators, pretty for a person', () => {
  it('is JSON off a terminal and pretty on one, unless --log-format says otherwise', () => {
    expect(chooseOutput(args(), io(false, false))).toEqual({ format: 'json', terminal: false, summary: false, logLevel: 'info' });
    expect(chooseOutput(args(), io(true, true))).toEqual({ format: 'pretty', terminal: true, summary: true, logLevel: 'warn' });
    // stdout piped (`| jq`): the status document stays there, the steps show on the terminal.
    expect(chooseOutput(args(), io(false, true))).toEqual({ format: 'pretty', terminal: true, summary: false, logLevel: 'warn' });
    expect(chooseOutput(args({ 'log-format': 'json' }), io(true, true))).toEqual({ format: 'json', terminal: false, summary: false, logLevel: 'info' });
    // Pretty lines into a file: no step lines, the log at its usual level.
    expect(chooseOutput(args({ 'log-format': 'pretty' }), io(false, false))).toEqual({ format: 'pretty', terminal: false, summary: false, logLevel: 'info' });
    expect(chooseOutput(args({ 'log-level': 'debug' }), io(true, true)).logLevel).toBe('debug');
  });

  it('JSON lines go to stderr as the logger writes them; pretty lines through pino-pretty, scrubbed, synchronously', async () => {
    expect(await logSink(chooseOutput(args(), io(false, false)), io(false, false))).toBeUndefined();
    registerSecretValue('pretty-secret-31337');
    const written: string[] = [];
    const out = io(false, false, written);
    const sink = await logSink(chooseOutput(args({ 'log-format': 'pretty' }), out), out);
    const log = createLogger('info', { runId: 'r', command: 'run' }, sink);
    log.warn({ step: 'merge', retry: 1 }, 'retrying ExecutePlan with pretty-secret-31337');
    log.error({ err: new Error('boom') }, 'failed');
    // Written before the call returned: nothing is lost when the process exits after its last line.
    expect(written).toHaveLength(2);
    expect(written[0]).toMatch(/^\[\d\d:\d\d:\d\d\] WARN: retrying ExecutePlan with \[redacted\] \{"step":"merge","retry":1\}\n$/);
    expect(written[1]).toContain('ERROR: failed');
    expect(written[1]).toContain('"message": "boom"');
    expect(written.join('')).not.toMatch(/pretty-secret-31337|"runId"|"app"/);
  });
});
