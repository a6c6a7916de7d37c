/**
 * Reads the "== Analyzed Logical Plan ==" section of Spark's extended explain (AnalyzePlan,
 * EXPLAIN_MODE_EXTENDED) into what the tenant policy judges: the plan nodes, the relations read
 * (with their kind and identity), the subquery expressions and every name used like a function.
 *
 * Pure text analysis, designed on the plan text of our own Spark 4.1 server (fixtures in
 * test/unit/spark/policy/fixtures). It is deliberately additive: text a tenant controls (string
 * literals, aliases) can add nodes or names, which the policy then refuses, but cannot hide a real
 * node, because every line of the tree is read and nothing is skipped as "inside a literal".
 * What it cannot read with certainty it reports in `problems`, and the policy refuses those;
 * problems quote no plan text (it may hold literals), only node names and line numbers.
 */

export type RelationKind =
  /** DataSourceV2 table (Iceberg, Delta through the catalog): `RelationV2[..] lake.acme_silver.orders` */
  | 'v2-table'
  /** File-based relation of a catalog table: `Relation spark_catalog.ns.t[..] parquet` */
  | 'file-table'
  /** File-based relation by path (parquet files, `delta.`/path``): `Relation [..] parquet`; its files come from InputFiles */
  | 'file-path'
  /** JDBC source: `Relation [..] JDBCRelation(orders) [numPartitions=1]` */
  | 'jdbc'
  | 'local'
  | 'range'
  | 'one-row'
  | 'cte-ref'
  | 'view';

export interface RelationRead {
  readonly kind: RelationKind;
  /** Catalog, namespace…, table for `v2-table`, `file-table` and `view`; empty otherwise. */
  readonly identity: readonly string[];
  /** `parquet`, `delta`…, for file relations. */
  readonly format?: string;
}

export interface AnalyzedPlan {
  /** Node names in tree order (`Project`, `Filter`, `RelationV2`…), each once. */
  readonly nodes: ReadonlySet<string>;
  readonly relations: readonly RelationRead[];
  /** `scalar-subquery`, `exists`, `list`, `lateral-subquery` */
  readonly subqueries: ReadonlySet<string>;
  /** Every `name(` in the plan's expressions, lower case. */
  readonly functions: ReadonlySet<string>;
  /** Reasons the text cannot be read with certainty (truncation, duplicated section headers…). */
  readonly problems: readonly string[];
}

const ANALYZED = '== Analyzed Logical Plan ==';
const HEADERS = ['== Parsed Logical Plan ==', ANALYZED, '== Optimized Logical Plan ==', '== Physical Plan =='];

/** The analyzed section of an extended explain, or a problem when it cannot be delimited for sure. */
export function analyzedSection(explain: string): { lines: string[] } | { problem: string } {
  const lines = explain.split(/\r?\n/);
  // A string literal may contain a header on a line of its own (literals print raw): then the
  // sections cannot be told apart, and a literal could end the analyzed section early.
  for (const h of HEADERS) {
    const n = lines.filter((l) => l === h).length;
    if (n !== 1) return { problem: `the explained plan has ${n} "${h}" headers (a literal containing one?)` };
  }
  const start = lines.indexOf(ANALYZED);
  const end = lines.indexOf('== Optimized Logical Plan ==');
  if (end < start) return { problem: 'the explained plan has its sections out of order' };
  return { lines: lines.slice(start + 1, end) };
}

/** Tree prefixes of Spark's `treeString`: `+- `, `:- `, `:  `, `   `. */
const TREE_PREFIX = /^(?:[+:]- |[ :] {2})*/;
const NODE_NAME = /^[A-Za-z][A-Za-z0-9]*/;
/**
 * `name(`: a function call as Catalyst prints it (`prettyName(args)`, `unboundedpreceding$()`), and
 * `name (` too: a few expressions print a space (`if (c) a else b`, `x IN (1, 2)`), and reading
 * both ways means no expression escapes the list by its spelling (operators are listed as such).
 */
const CALL = /([A-Za-z_][A-Za-z0-9_$]*)\s*\(/g;
/** Catalyst's `Like.toString`: `name#1 LIKE a%`, `NOT name#1 LIKE a%`, `… LIKE a!% ESCAPE '!'`. */
const INFIX_LIKE = / LIKE /;
const SUBQUERY = /\b(scalar-subquery|exists|list|lateral-subquery)#\d+/g;
/** An identifier part as explain prints it: plain, or backtick-quoted with doubled backticks. */
const PART = '(?:[A-Za-z0-9_]+|`(?:[^`]|``)*`)';
const IDENTITY = new RegExp(`^${PART}(?:\\.${PART})*$`);

export function parseAnalyzedPlan(explain: string): AnalyzedPlan {
  const nodes = new Set<string>();
  const relations: RelationRead[] = [];
  const subqueries = new Set<string>();
  const functions = new Set<string>();
  const problems: string[] = [];
  const section = analyzedSection(explain);
  if ('problem' in section) return { nodes, relations, subqueries, functions, problems: [section.problem] };
  // The first line is the output schema (`id: int, name: string`): names, not expressions.
  const [, ...tree] = section.lines;
  for (const [i, raw] of tree.entries()) {
    const lineNo = i + 1;
    if (raw.trim() === '') continue;
    const line = raw.replace(TREE_PREFIX, '');
    // maxToStringFields / maxPlanStringLength cut lists and text short: what is cut is unseen.
    if (/\.\.\. \d+ more (fields|characters)/.test(line)) problems.push('the plan text is truncated');
    const name = NODE_NAME.exec(line)?.[0];
    if (!name) {
      problems.push(`unreadable plan line ${lineNo}`);
      continue;
    }
    nodes.add(name);
    const relation = readRelation(name, line, problems);
    if (relation) {
      relations.push(relation);
      // A relation line lists attributes (and a JDBC table or query, which is the database's SQL,
      // not Spark's): no expressions to collect.
      continue;
    }
    const rest = line.slice(name.length);
    for (const m of rest.matchAll(CALL)) functions.add(m[1]!.toLowerCase());
    // `x LIKE p` prints as an operator, not a call (`like(x, p)` prints so too): read as `like`.
    if (INFIX_LIKE.test(rest)) functions.add('like');
    for (const m of rest.matchAll(SUBQUERY)) subqueries.add(m[1]!);
  }
  if (tree.every((l) => l.trim() === '')) problems.push('the analyzed plan is empty');
  return { nodes, relations, subqueries, functions, problems };
}

function readRelation(name: string, line: string, problems: string[]): RelationRead | undefined {
  switch (name) {
    case 'RelationV2': {
      // RelationV2[id#1, name#2] lake.acme_silver.orders
      const m = /^RelationV2\[.*\] (\S+)$/.exec(line);
      const identity = m ? splitIdentity(m[1]!) : undefined;
      if (!identity) problems.push(`unreadable ${name} relation`);
      return { kind: 'v2-table', identity: identity ?? [] };
    }
    case 'Relation': {
      // Relation [id#1,..] parquet | Relation spark_catalog.ns.t[id#1,..] parquet | Relation [..] JDBCRelation(t) [numPartitions=1]
      const m = /^Relation (\S*?)\[[^\]]*\] (.+)$/.exec(line);
      if (!m) {
        problems.push(`unreadable ${name} relation`);
        return { kind: 'file-path', identity: [] };
      }
      const [, ident, source] = m as unknown as [string, string, string];
      if (/^JDBCRelation\(.*\) \[numPartitions=\d+\]$/.test(source)) return { kind: 'jdbc', identity: [] };
      if (!/^[a-z]+$/.test(source)) problems.push('a file relation of an unknown source');
      if (ident === '') return { kind: 'file-path', identity: [], format: source };
      const identity = splitIdentity(ident);
      if (!identity) problems.push(`unreadable ${name} relation`);
      return { kind: 'file-table', identity: identity ?? [], format: source };
    }
    case 'LocalRelation':
      return { kind: 'local', identity: [] };
    case 'Range':
      return { kind: 'range', identity: [] };
    case 'OneRowRelation':
      return { kind: 'one-row', identity: [] };
    case 'CTERelationRef':
      return { kind: 'cte-ref', identity: [] };
    case 'View': {
      // View (`spark_catalog`.`ns`.`v`, [id#1, ..]); its definition follows as child nodes and is read like any plan.
      const m = /^View \((.+?), \[/.exec(line);
      const identity = m ? splitIdentity(m[1]!) : undefined;
      if (!identity) problems.push('unreadable view');
      return { kind: 'view', identity: identity ?? [] };
    }
    default:
      return undefined;
  }
}

/** `lake.acme_silver.orders` or `` `spark_catalog`.`ns`.`t` `` → parts; undefined when not a plain multi-part name. */
export function splitIdentity(text: string): string[] | undefined {
  if (!IDENTITY.test(text)) return undefined;
  const parts: string[] = [];
  const re = new RegExp(PART, 'g');
  for (const m of text.matchAll(re)) {
    const p = m[0];
    parts.push(p.startsWith('`') ? p.slice(1, -1).replaceAll('``', '`') : p);
  }
  return parts;
}
