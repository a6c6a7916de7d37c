#!/usr/bin/env node
import { ExitCode } from './core/errors.js';
import { main } from './app/main.js';

/**
 * The entry point only dispatches (src/app/main.ts, one yargs command module per command under
 * src/app/commands/) and exits with the command's code (docs/contracts.md).
 */
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`lakehouse-jobs: internal error: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.exitCode = ExitCode.internal;
  },
);
