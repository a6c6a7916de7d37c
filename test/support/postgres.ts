import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { requireNeed } from './needs.js';
import { repoRoot } from './stack.js';

/** The throw-away PostgreSQL of scripts/postgres (started, or reused when running), for JDBC tests. */
export interface Postgres {
  /** jdbc:postgresql://127.0.0.1:<port>/<db> */
  readonly url: string;
  readonly user: string;
  /** The test role's password: hand it to the CLI by reference (an environment variable), never inline. */
  readonly password: string;
  /** Run SQL as the test role; returns psql's unaligned, tuples-only output. */
  psql(sql: string): string;
}

const script = join(repoRoot, 'scripts/postgres');
const run = (...args: string[]) => execFileSync('bash', [script, ...args], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'inherit'] }).trim();

/** `logical`: with logical decoding, for a change-data-capture connector (scripts/postgres start --logical). */
export function startPostgres(opts: { logical?: boolean } = {}): Postgres {
  requireNeed('PostgreSQL', 'postgres');
  const url = run('start', ...(opts.logical ? ['--logical'] : []))
    .split('\n')
    .pop()!;
  return {
    url,
    user: run('user'),
    password: run('password'),
    psql: (sql) => execFileSync('bash', [script, 'psql', '-tA', '-q', '-v', 'ON_ERROR_STOP=1', '-f', '-'], { input: sql, encoding: 'utf8' }).trim(),
  };
}
