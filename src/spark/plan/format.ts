import { instantText } from '../../core/instant.js';
import type { Cmd, MergeAction } from './commands.js';
import type { Expr, LiteralValue, SortOrder } from './expressions.js';
import type { Extension, OptionValue, Rel } from './relations.js';

/**
 * Plan nodes as people read them: an indented operator tree in the manner of Spark's `explain`
 * (`MergeInto …`, `Filter …`, `Read parquet …`), expressions in SQL-like notation. Pure: the same
 * nodes the compiler sends, so what `plan` prints is what would run. Secrets print as `[redacted]`
 * (their `toString`), and this text is never parsed back or sent anywhere.
 */

const REDACTED = '[redacted]';

/** An operator: its line, lines that belong to it (MERGE clauses), and its inputs. */
interface Tree {
  readonly line: string;
  readonly details?: readonly string[];
  readonly children?: readonly Tree[];
}

export function formatRel(rel: Rel): string {
  return render(relTree(rel));
}

export function formatCmd(cmd: Cmd): string {
  return render(cmdTree(cmd));
}

/** Children as Spark draws them: `:- ` before every input but the last, `+- ` before the last. */
function render(tree: Tree): string {
  const lines: string[] = [];
  const walk = (t: Tree, head: string, rest: string) => {
    lines.push(head + t.line);
    const children = t.children ?? [];
    for (const d of t.details ?? []) lines.push(`${rest}${children.length > 0 ? ':  ' : '   '}${d}`);
    children.forEach((c, i) => {
      const last = i === children.length - 1;
      walk(c, `${rest}${last ? '+- ' : ':- '}`, `${rest}${last ? '   ' : ':  '}`);
    });
  };
  walk(tree, '', '');
  return lines.join('\n');
}

function relTree(rel: Rel): Tree {
  switch (rel.kind) {
    case 'sql':
      return { line: `Sql ${JSON.stringify(rel.query)}` };
    case 'table':
      return { line: `Table ${name(rel.parts)}${options(rel.options)}` };
    case 'source':
      return {
        line: `${rel.streaming ? 'ReadStream' : 'Read'} ${rel.format}${rel.paths.length ? ` ${rel.paths.join(', ')}` : ''}${rel.schema ? ` schema ${rel.schema}` : ''}${options(rel.options)}`,
      };
    case 'range':
      return { line: `Range (${rel.start}, ${rel.end}, step=${rel.step}${rel.partitions === undefined ? '' : `, partitions=${rel.partitions}`})` };
    case 'filter':
      return { line: `Filter ${formatExpr(rel.condition)}`, children: [relTree(rel.input)] };
    case 'project':
      return { line: `Project [${rel.exprs.map(formatExpr).join(', ')}]`, children: [relTree(rel.input)] };
    case 'withColumns':
      return { line: `WithColumns [${rel.columns.map(([n, e]) => `${formatExpr(e)} AS ${ident(n)}`).join(', ')}]`, children: [relTree(rel.input)] };
    case 'drop':
      return { line: `Drop [${rel.columns.map(ident).join(', ')}]`, children: [relTree(rel.input)] };
    case 'deduplicate':
      return { line: `Deduplicate${rel.columns ? ` [${rel.columns.map(ident).join(', ')}]` : ''}`, children: [relTree(rel.input)] };
    case 'join': {
      const cond = rel.on ? ` ON ${formatExpr(rel.on)}` : rel.using ? ` USING (${rel.using.map(ident).join(', ')})` : '';
      return { line: `Join ${rel.type.toUpperCase().replace('_', ' ')}${cond}`, children: [relTree(rel.left), relTree(rel.right)] };
    }
    case 'union':
      return { line: `Union by name${rel.allowMissing ? ' (missing columns NULL)' : ''}`, children: [relTree(rel.left), relTree(rel.right)] };
    case 'aggregate':
      return { line: `Aggregate [${rel.groupBy.map(formatExpr).join(', ')}], [${rel.aggregates.map(formatExpr).join(', ')}]`, children: [relTree(rel.input)] };
    case 'sort':
      return { line: `Sort [${rel.orders.map(sortOrder).join(', ')}]`, children: [relTree(rel.input)] };
    case 'limit':
      return { line: `Limit ${rel.n}`, children: [relTree(rel.input)] };
    case 'observe':
      return { line: `Observe ${ident(rel.name)} [${rel.metrics.map(formatExpr).join(', ')}]`, children: [relTree(rel.input)] };
    case 'alias':
      return { line: `SubqueryAlias ${ident(rel.name)}`, children: [relTree(rel.input)] };
    case 'extension':
      return extensionTree(rel);
    case 'tenantLogic':
      return { line: `TenantLogic (judged by the server: ${rel.configPaths.join(', ')})`, children: [relTree(rel.input)] };
    case 'materialized':
      return { line: `Materialized ${ident(rel.name)}` };
  }
}

function cmdTree(cmd: Cmd): Tree {
  switch (cmd.kind) {
    case 'sqlCommand':
      return { line: `SqlCommand ${JSON.stringify(cmd.query)}` };
    case 'write': {
      const target = cmd.path !== undefined ? cmd.path : cmd.table ? name(cmd.table) : '?';
      const partitions = cmd.partitionBy.length ? ` partitionBy [${cmd.partitionBy.map(ident).join(', ')}]` : '';
      return { line: `Write ${cmd.format} ${target} mode=${cmd.mode}${partitions}${options(cmd.options)}`, children: [relTree(cmd.input)] };
    }
    case 'writeV2': {
      const parts = [
        `WriteTo ${name(cmd.table)} ${cmd.mode}`,
        cmd.provider ? `using ${cmd.provider}` : '',
        cmd.partitionBy.length ? `partitionedBy [${cmd.partitionBy.map(formatExpr).join(', ')}]` : '',
        cmd.overwriteCondition ? `where ${formatExpr(cmd.overwriteCondition)}` : '',
      ].filter(Boolean);
      return { line: parts.join(' ') + properties(cmd.properties) + options(cmd.options), children: [relTree(cmd.input)] };
    }
    case 'merge':
      return {
        line: `MergeInto ${name(cmd.target)} ON ${formatExpr(cmd.on)}${cmd.schemaEvolution ? ' WITH SCHEMA EVOLUTION' : ''}`,
        details: [
          ...cmd.whenMatched.map((a) => `WHEN MATCHED${mergeAction(a)}`),
          ...cmd.whenNotMatched.map((a) => `WHEN NOT MATCHED${mergeAction(a)}`),
          ...cmd.whenNotMatchedBySource.map((a) => `WHEN NOT MATCHED BY SOURCE${mergeAction(a)}`),
        ],
        children: [relTree(cmd.source)],
      };
    case 'createView':
      return { line: `Create${cmd.replace ? 'OrReplace' : ''}TempView ${ident(cmd.name)}`, children: [relTree(cmd.input)] };
    case 'extension':
      return extensionTree(cmd);
    case 'writeStream':
      return {
        line: `WriteStream ${name(cmd.table)} ${cmd.outputMode} trigger=${cmd.trigger}${cmd.queryName ? ` name=${cmd.queryName}` : ''}${options(cmd.options)}`,
        children: [relTree(cmd.input)],
      };
  }
}

/** `Extension lakehouse.jobs.X`, then its fields by name (no secret travels in an extension). */
function extensionTree(x: Extension): Tree {
  return { line: `Extension ${x.typeUrl.replace(/^.*\//, '')}`, details: x.fields.map((f) => `${f.name} = ${JSON.stringify(f.value)}`) };
}

function mergeAction(a: MergeAction): string {
  const cond = a.condition ? ` AND ${formatExpr(a.condition)}` : '';
  switch (a.action) {
    case 'delete':
      return `${cond} THEN DELETE`;
    case 'updateAll':
      return `${cond} THEN UPDATE SET *`;
    case 'insertAll':
      return `${cond} THEN INSERT *`;
    case 'update':
      return `${cond} THEN UPDATE SET ${a.set.map(([c, e]) => `${ident(c)} = ${formatExpr(e)}`).join(', ')}`;
    case 'insert':
      return `${cond} THEN INSERT (${a.values.map(([c]) => ident(c)).join(', ')}) VALUES (${a.values.map(([, e]) => formatExpr(e)).join(', ')})`;
  }
}

/** Spark's binary operators, printed infix; everything else is a function call. */
const INFIX: Readonly<Record<string, string>> = {
  '==': '=',
  '!=': '!=',
  '<=>': '<=>',
  '<': '<',
  '<=': '<=',
  '>': '>',
  '>=': '>=',
  '+': '+',
  '-': '-',
  '*': '*',
  '/': '/',
  '%': '%',
  and: 'AND',
  or: 'OR',
};

export function formatExpr(e: Expr): string {
  switch (e.kind) {
    case 'col':
      return e.parts.map(ident).join('.');
    case 'lit':
      return literal(e.value);
    case 'star':
      return e.qualifier === undefined ? '*' : `${ident(e.qualifier)}.*`;
    case 'inBoundDates':
      return `${formatExpr(e.expr)} IN (<${e.bound}>)`;
    case 'alias':
      return `${formatExpr(e.expr)} AS ${ident(e.name)}`;
    case 'cast':
      return `${e.try ? 'TRY_CAST' : 'CAST'}(${formatExpr(e.expr)} AS ${e.type.toUpperCase()})`;
    case 'window': {
      const spec = [
        e.partitionBy.length ? `PARTITION BY ${e.partitionBy.map(formatExpr).join(', ')}` : '',
        e.orderBy.length ? `ORDER BY ${e.orderBy.map(sortOrder).join(', ')}` : '',
      ].filter(Boolean);
      return `${formatExpr(e.fn)} OVER (${spec.join(' ')})`;
    }
    case 'fn': {
      const infix = INFIX[e.name];
      if (infix && e.args.length === 2) return `(${formatExpr(e.args[0]!)} ${infix} ${formatExpr(e.args[1]!)})`;
      if (e.name === 'not' && e.args.length === 1) {
        const x = e.args[0]!;
        const atomic = x.kind === 'col' || x.kind === 'lit' || (x.kind === 'fn' && INFIX[x.name] !== undefined && x.args.length === 2);
        return atomic ? `NOT ${formatExpr(x)}` : `NOT (${formatExpr(x)})`;
      }
      if (e.name === 'isnull' && e.args.length === 1) return `${formatExpr(e.args[0]!)} IS NULL`;
      if (e.name === 'isnotnull' && e.args.length === 1) return `${formatExpr(e.args[0]!)} IS NOT NULL`;
      if (e.name === 'in' && e.args.length >= 1) return `${formatExpr(e.args[0]!)} IN (${e.args.slice(1).map(formatExpr).join(', ')})`;
      return `${e.name}(${e.distinct ? 'DISTINCT ' : ''}${e.args.map(formatExpr).join(', ')})`;
    }
  }
}

function literal(v: LiteralValue): string {
  if (v === null) return 'NULL';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'string') return `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  if (typeof v === 'number') return String(v);
  if (typeof v === 'bigint') return `${v}L`;
  if ('secret' in v) return REDACTED;
  if ('date' in v) return `DATE '${v.date}'`;
  if ('timestamp' in v) return `TIMESTAMP '${instantText(v.timestamp)}'`;
  if ('double' in v) return `${v.double}D`;
  return `${v.decimal}BD`;
}

function sortOrder(o: SortOrder): string {
  return `${formatExpr(o.expr)} ${o.descending ? 'DESC' : 'ASC'} NULLS ${o.nullsFirst ? 'FIRST' : 'LAST'}`;
}

/** An identifier as SQL would need it: bare when it is a plain word, else back-quoted. */
function ident(part: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(part) ? part : `\`${part.replaceAll('`', '``')}\``;
}

/** A table's name as `plan` prints it (each part quoted only when it must be). */
export function name(parts: readonly string[]): string {
  return parts.map(ident).join('.');
}

function optionValue(v: OptionValue): string {
  return typeof v === 'string' ? v : 'bound' in v ? `<${v.bound}>` : REDACTED;
}

function options(o: Readonly<Record<string, OptionValue>>): string {
  const entries = Object.entries(o);
  return entries.length ? ` options {${entries.map(([k, v]) => `${k}=${optionValue(v)}`).join(', ')}}` : '';
}

function properties(p: Readonly<Record<string, string>>): string {
  const entries = Object.entries(p);
  return entries.length ? ` properties {${entries.map(([k, v]) => `${k}=${v}`).join(', ')}}` : '';
}
