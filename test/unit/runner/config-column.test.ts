import { describe, expect, it } from 'vitest';
import { queryStep } from '../../../src/jobs/steps.js';
import { ConfigError } from '../../../src/core/errors.js';
import { configColumnError } from '../../../src/runner/config-column.js';
import { SparkError, type SparkFailure } from '../../../src/spark/errors.js';
import { Query } from '../../../src/spark/plan/query.js';
import type { Step } from '../../../src/jobs/template.js';

const plan =
  "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `stauts` cannot be resolved. Did you mean one of the following? [`status`, `id`, `ts`]. SQLSTATE: 42703;\n'Filter ('stauts = active)\n+- Relation [id#1,status#2,ts#3] parquet\n";
const failure = (over: Partial<SparkFailure> = {}): SparkFailure => ({
  grpcCode: 13,
  message: plan,
  errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION',
  sqlState: '42703',
  messageParameters: { objectName: '`stauts`', proposal: '`status`, `id`, `ts`' },
  classes: ['org.apache.spark.sql.AnalysisException'],
  causes: [],
  ...over,
});
const step: Step = queryStep({
  id: 'check-batch',
  title: 'check',
  query: Query.table(['lake', 'n', 't']),
  columns: [],
  interpret: () => ({}),
  untrusted: ['source.where', 'cdc.delete-when'],
});
const config = { source: { where: { text: "stauts = 'active'", ast: {} } }, cdc: { 'delete-when': { text: 'op = 1', ast: {} } } };

describe('an expression naming a column its input lacks', () => {
  it("is a config error (78) at the expression's path, naming the column, without Spark's plan text", () => {
    const e = configColumnError(new SparkError(failure()), step, config);
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.exitCode).toBe(78);
    expect((e as ConfigError).issues).toEqual([
      { path: 'source.where', message: 'names column "stauts", which the input does not have (check its spelling against the source\'s columns)' },
    ]);
    // Neither Spark's plan nor its suggestions: they list what the plan touched.
    expect(e.message).not.toContain('Relation');
    expect(e.message).not.toContain('status');
  });

  it('reads the column from the message when the server sent no parameters', () => {
    const e = configColumnError(new SparkError(failure({ messageParameters: {} })), step, config);
    expect((e as ConfigError).issues.map((i) => i.path)).toEqual(['source.where']);
  });

  it("stays Spark's data error when no tenant expression names the column (the source broke its contract), or for other errors", () => {
    const missing = new SparkError(failure({ messageParameters: { objectName: '`sequence_no`' }, message: 'x' }));
    expect(configColumnError(missing, step, config)).toBe(missing);
    expect(missing.exitCode).toBe(65);
    const trusted = new SparkError(failure());
    expect(configColumnError(trusted, { ...step, untrusted: [] }, config)).toBe(trusted);
    expect(configColumnError(trusted, undefined, config)).toBe(trusted);
    const other = new SparkError(failure({ errorClass: 'TABLE_OR_VIEW_NOT_FOUND' }));
    expect(configColumnError(other, step, config)).toBe(other);
  });
});
