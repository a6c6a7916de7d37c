import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * SQL text is written only through the `sql` tag (src/spark/plan/sql.ts). This walks every source
 * file's syntax tree and refuses the other ways text becomes SQL: an untagged template or a string
 * concatenation that splices a quoted name or literal in (quoteName, a `…Literal` helper), or whose text reads as a
 * statement with holes. The gold transform screen rewrites tenant SQL token by token and is the one
 * module allowed to quote names into text; sql.ts and the protobuf compiler quote for themselves.
 */

const SRC = join(import.meta.dirname, '../../../../src');
const ALLOWED = new Set(['spark/plan/sql.ts', 'spark/plan/compile.ts', 'core/naming.ts', 'jobs/gold/transform-sql.ts']);
/** Functions that quote names or values into SQL text. */
const QUOTING = /^(quote[A-Z]\w*|sqlString|\w+Literal)$/;
/** A statement's first words, as SQL text starts (titles for people say "MERGE the …", never these). */
const STATEMENT =
  /^\s*(SELECT\b.*\bFROM|WITH\s+\S+\s+AS\s*\(|DESCRIBE\s|ALTER\s+TABLE|DELETE\s+FROM|INSERT\s+INTO|UPDATE\s+\S+\s+SET|CALL\s|CREATE\s+(TABLE|NAMESPACE|VIEW)|DROP\s|VACUUM\s.*\bRETAIN\b|OPTIMIZE\s*$|MERGE\s+INTO)/s;

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'gen') yield* sources(p);
    } else if (e.name.endsWith('.ts')) yield p;
  }
}

/** `file:line: what` for each place that builds SQL text outside the tag. */
export function interpolatedSql(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (n: ts.Node) => `${file}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
  const callsQuoting = (n: ts.Node): boolean =>
    (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && QUOTING.test(n.expression.text)) ||
    (ts.isIdentifier(n) && QUOTING.test(n.text) && !ts.isCallExpression(n.parent) && !ts.isImportSpecifier(n.parent)) ||
    ts.forEachChild(n, callsQuoting) === true;
  const visit = (n: ts.Node): void => {
    if (ts.isTemplateExpression(n) && !ts.isTaggedTemplateExpression(n.parent)) {
      const head = n.head.text + n.templateSpans.map((s) => `?${s.literal.text}`).join('');
      if (n.templateSpans.some((s) => callsQuoting(s.expression))) found.push(`${at(n)}: a quoted name spliced into a template`);
      else if (STATEMENT.test(head)) found.push(`${at(n)}: SQL text with holes: ${head.slice(0, 60)}`);
    }
    if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.PlusToken && (callsQuoting(n.left) || callsQuoting(n.right)))
      found.push(`${at(n)}: a quoted name concatenated into text`);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

describe('SQL text only through the sql tag', () => {
  it('no source file builds SQL by interpolation', () => {
    const found = [...sources(SRC)].flatMap((f) => {
      const rel = relative(SRC, f).split('\\').join('/');
      return ALLOWED.has(rel) ? [] : interpolatedSql(rel, readFileSync(f, 'utf8'));
    });
    expect(found).toEqual([]);
  });

  it('the guard finds what it guards against', () => {
    const bad = [
      'const a = `DELETE FROM ${quoteName(t)} WHERE x < ${n}`;',
      "const b = 'ALTER TABLE ' + quoteName(parts);",
      'const c = `SELECT ${label} AS tbl FROM ${table}`;',
      'const d = `CALL ${catalog}.system.expire_snapshots(${args})`;',
      'const e = `older_than => ${timestampLiteral(cutoff)}`;',
    ];
    for (const line of bad) expect(interpolatedSql('x.ts', line), line).toHaveLength(1);
    const fine = [
      'const t = sql`DELETE FROM ${sql.target(parts)}`;',
      'const title = `MERGE the latest event per key into ${name}`;',
      'const s = `Sql ${json}`;',
    ];
    for (const line of fine) expect(interpolatedSql('x.ts', line), line).toEqual([]);
  });
});
