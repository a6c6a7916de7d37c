// test/support/needs.ts for a file without a needs(...) call: it gets DEFAULT_NEEDS (each marked
// external here, so nothing is started), and a helper of a need outside them still throws.
import { afterEach, expect, it, vi } from 'vitest';
// @ts-expect-error -- a plain JavaScript module of scripts/ (no declarations)
import { DEFAULT_NEEDS } from '../../../scripts/test-plan.mjs';

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

it('declares the default needs for a file that made no needs(...) call, and no others', async () => {
  vi.stubEnv('LAKEHOUSE_TEST_EXTERNAL', (DEFAULT_NEEDS as string[]).join(','));
  vi.stubEnv('LAKEHOUSE_TEST_RUN', '');
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  const { readyDefault, requireNeed } = await import('../../support/needs.js');
  expect(() => requireNeed('the server', 'spark')).toThrow(/declare it in this file's needs/);
  await readyDefault();
  expect(stderr.mock.calls.map(([m]) => String(m)).join('')).toMatch(/no needs\(\.\.\.\) call; it gets py-tools, kafka, iceberg-rest, object-store, spark/);
  stderr.mockRestore();
  for (const n of ['spark', 'iceberg-rest', 'kafka', 'object-store', 'py-tools'] as const) expect(() => requireNeed(n, n)).not.toThrow();
  expect(() => requireNeed('PostgreSQL', 'postgres')).toThrow(/PostgreSQL needs "postgres": declare it/);
  expect(() => requireNeed('a Debezium connector', 'kafka-connect')).toThrow(/"kafka-connect"/);
});
