import type { Cmd } from '../../src/spark/plan/commands.js';
import { Query, sqlCommand } from '../../src/spark/plan/query.js';
import type { SqlText } from '../../src/spark/plan/sql.js';

/**
 * SQL text written by a test (fixtures, read-backs): the product writes SQL only through the `sql`
 * tag (src/spark/plan/sql.ts); a test's own statements name no tables for `plan` to list.
 */
export const testSql = (text: string): SqlText => Object.freeze({ kind: 'sqlText', text, reads: [], writes: [] });

/** A query of a test's own SQL text. */
export const testQuery = (text: string): Query => Query.sql(testSql(text));

/** A statement of a test's own SQL text. */
export const testCommand = (text: string): Cmd => sqlCommand(testSql(text));
