import { type Instant, type IsoDate, instantText, parseIsoDate } from '../../core/instant.js';
import { quoteName } from '../../core/naming.js';

/**
 * SQL text, written only through the `sql` tagged template (after Kysely's `sql`): the text between
 * the holes is ours, and a hole is a node, never a string: an identifier or name (validated by the
 * config schema, quoted here), a typed literal, or another fragment. A string from outside cannot
 * become syntax, and every fragment carries the tables it names, so `plan`, `validate` and lineage
 * list what a statement reads and writes (src/spark/plan/touches.ts). Nothing else in src/ builds
 * SQL text by interpolation (test/unit/spark/plan/sql-guard.test.ts).
 */

export type TableParts = readonly string[];

/** A finished fragment: its text and the tables it names. Frozen. */
export interface SqlText {
  readonly kind: 'sqlText';
  readonly text: string;
  readonly reads: readonly TableParts[];
  readonly writes: readonly TableParts[];
}

/** A literal's value: text, a whole number, a boolean, a date or an instant. */
export type SqlValue = string | number | bigint | boolean | { readonly date: IsoDate | string } | { readonly timestamp: Instant };

/** What a hole may hold. A bare string is not one of them (it would be syntax). */
export type SqlHole = SqlText | SqlIdentifier | SqlLiteral;

interface SqlIdentifier {
  readonly kind: 'sqlIdentifier';
  readonly parts: readonly string[];
  readonly access?: 'read' | 'write';
}

interface SqlLiteral {
  readonly kind: 'sqlLiteral';
  readonly value: SqlValue;
}

function fragment(text: string, reads: readonly TableParts[] = [], writes: readonly TableParts[] = []): SqlText {
  return Object.freeze({ kind: 'sqlText', text, reads: Object.freeze(reads.map(freezeParts)), writes: Object.freeze(writes.map(freezeParts)) });
}

const freezeParts = (p: TableParts): TableParts => Object.freeze([...p]);

function render(hole: SqlHole): SqlText {
  if (typeof hole !== 'object' || hole === null || !('kind' in hole))
    throw new TypeError(`sql: a hole must be sql.id, sql.table, sql.value or sql\`…\`, not ${typeof hole}`);
  switch (hole.kind) {
    case 'sqlText':
      return hole;
    case 'sqlIdentifier': {
      const text = quoteName(hole.parts);
      return fragment(text, hole.access === 'read' ? [hole.parts] : [], hole.access === 'write' ? [hole.parts] : []);
    }
    case 'sqlLiteral':
      return fragment(literal(hole.value));
    default:
      throw new TypeError(`sql: a hole must be sql.id, sql.table, sql.value or sql\`…\``);
  }
}

/** A string literal as Spark's parser reads it: backslashes and quotes escaped. */
function quoteString(s: string): string {
  return `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

function literal(v: SqlValue): string {
  switch (typeof v) {
    case 'string':
      return quoteString(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return String(v);
    case 'number':
      if (!Number.isSafeInteger(v)) throw new TypeError(`sql.value: ${v} is not a whole number`);
      return String(v);
  }
  if ('date' in v) {
    if (!parseIsoDate(v.date)) throw new TypeError(`sql.value: ${JSON.stringify(v.date)} is not a date`);
    return `DATE ${quoteString(v.date)}`;
  }
  return `TIMESTAMP ${quoteString(instantText(v.timestamp))}`;
}

/** SQL text from a template: the literal parts are ours, the holes nodes. */
export function sql(strings: TemplateStringsArray, ...holes: SqlHole[]): SqlText {
  let text = strings[0] ?? '';
  const reads: TableParts[] = [];
  const writes: TableParts[] = [];
  holes.forEach((h, i) => {
    const r = render(h);
    text += r.text + (strings[i + 1] ?? '');
    reads.push(...r.reads);
    writes.push(...r.writes);
  });
  return fragment(text, reads, writes);
}

/** An identifier (a column, a CTE), quoted. */
sql.id = (name: string): SqlIdentifier => Object.freeze({ kind: 'sqlIdentifier', parts: Object.freeze([name]) });

/** A multi-part name that is not a table read or written (a namespace, a procedure), quoted. */
sql.qualified = (parts: readonly string[]): SqlIdentifier => Object.freeze({ kind: 'sqlIdentifier', parts: freezeParts(parts) });

/** A table the statement reads, quoted; listed as read. */
sql.table = (parts: readonly string[]): SqlIdentifier => Object.freeze({ kind: 'sqlIdentifier', parts: freezeParts(parts), access: 'read' });

/** A table the statement changes, quoted; listed as written. */
sql.target = (parts: readonly string[]): SqlIdentifier => Object.freeze({ kind: 'sqlIdentifier', parts: freezeParts(parts), access: 'write' });

/** Spark's own type syntax (src/spark/types.ts renders a schema's types so): words, digits, `<>(),:`, quoted field names. */
const SPARK_TYPE = /^(?:[a-z_][a-z0-9_]*|\d+|[<>(),:]|`(?:[^`]|``)*`)+$/;

/** A column type as Spark reported it in a schema (never config text), checked to be only type syntax. */
sql.sparkType = (type: string): SqlText => {
  if (!SPARK_TYPE.test(type)) throw new TypeError(`sql.sparkType: ${JSON.stringify(type)} is not a Spark type name`);
  return fragment(type);
};

/** A typed literal. */
sql.value = (value: SqlValue): SqlLiteral => Object.freeze({ kind: 'sqlLiteral', value });

/**
 * A fragment as a string literal, for arguments the callee parses itself (an Iceberg procedure's
 * `table` or `sort_order`): the fragment's tables stay listed.
 */
sql.quoted = (inner: SqlText): SqlText => fragment(quoteString(inner.text), inner.reads, inner.writes);

/** Fragments joined by a separator (itself a fragment, e.g. sql`, `). */
sql.join = (parts: readonly SqlHole[], separator: SqlText): SqlText => {
  const rendered = parts.map(render);
  return fragment(
    rendered.map((r) => r.text).join(separator.text),
    rendered.flatMap((r) => r.reads),
    rendered.flatMap((r) => r.writes),
  );
};

/** A fragment that also names tables its text does not show (a procedure's table given inside a string). */
sql.touching = (inner: SqlText, tables: { reads?: readonly TableParts[]; writes?: readonly TableParts[] }): SqlText =>
  fragment(inner.text, [...inner.reads, ...(tables.reads ?? [])], [...inner.writes, ...(tables.writes ?? [])]);

/**
 * Tenant SQL that the gold transform screen (src/jobs/gold/transform-sql.ts) tokenised, checked and
 * rebuilt with the tenant's table names: the one way text we did not write becomes SQL. `reads` are
 * the tables the screen found; the tenant policy judges the text on the server.
 */
sql.screened = (text: string, reads: readonly TableParts[]): SqlText => fragment(text, reads);
