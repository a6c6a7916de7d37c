import { type Node, children } from './ast.js';

/**
 * How large a value an expression can build, bounded from its tree alone: at most `factor` times
 * the largest value of the row plus `constant` characters. Spark builds each value in one piece of
 * the JVM heap, and a task that runs out of heap ends its JVM: on the local stack one filter,
 * `length(repeat(x, 2000000000))` three times over a one-row table, ended the shared Spark Connect
 * server for every tenant (docs/security.md). So an expression whose bound is above the limits is
 * refused when the config is loaded, and the functions that multiply a value's size take their
 * multiplier as a literal: `repeat`'s count, `lpad`/`rpad`'s length, `replace`'s search and
 * replacement. What the row itself holds is the data's, not the expression's.
 */
export interface SizeBound {
  /** Times the largest value of the row (a column's value, of any type, counts as 1). */
  readonly factor: number;
  /** Characters besides. */
  readonly constant: number;
}

/** A row's values may be copied this many times into one value (`concat` of 64 columns). */
export const MAX_SIZE_FACTOR = 64;
/** Characters an expression may add besides (`lpad(x, 1000000)`, a long literal repeated). */
export const MAX_SIZE_CONSTANT = 1_000_000;

/** Any number, date, timestamp or boolean printed as text. */
const SCALAR: SizeBound = { factor: 0, constant: 40 };
const ZERO: SizeBound = { factor: 0, constant: 0 };

class SizeProblem extends Error {
  constructor(
    readonly pos: number,
    message: string,
  ) {
    super(message);
  }
}

const sum = (xs: readonly SizeBound[]): SizeBound => xs.reduce((a, b) => ({ factor: a.factor + b.factor, constant: a.constant + b.constant }), ZERO);
const max = (xs: readonly SizeBound[]): SizeBound =>
  xs.reduce((a, b) => ({ factor: Math.max(a.factor, b.factor), constant: Math.max(a.constant, b.constant) }), ZERO);
const times = (b: SizeBound, n: number): SizeBound => ({ factor: b.factor * n, constant: b.constant * n });

/** Why the expression may build too large a value, at the position of the call that does (undefined: bounded). */
export function sizeProblem(ast: Node): { pos: number; message: string } | undefined {
  try {
    sizeBound(ast);
    return undefined;
  } catch (e) {
    if (e instanceof SizeProblem) return { pos: e.pos, message: e.message };
    throw e;
  }
}

/** The bound of a node; throws a SizeProblem where a node exceeds the limits. */
export function sizeBound(n: Node): SizeBound {
  const b = bound(n);
  if (b.factor > MAX_SIZE_FACTOR || b.constant > MAX_SIZE_CONSTANT)
    throw new SizeProblem(
      n.pos,
      `can build a value of ${b.factor ? `${b.factor} times the row's largest value${b.constant ? ' plus ' : ''}` : ''}${b.constant ? `${b.constant} characters` : ''}, more than ${MAX_SIZE_FACTOR} times plus ${MAX_SIZE_CONSTANT} characters: Spark builds each value in one piece of memory, and a value too large for it ends the shared server for every tenant`,
    );
  return b;
}

function bound(n: Node): SizeBound {
  switch (n.kind) {
    case 'column':
      return { factor: 1, constant: 0 };
    case 'literal':
      return n.value.type === 'string' ? { factor: 0, constant: n.value.value.length } : SCALAR;
    case 'unary':
    case 'binary':
    case 'isNull':
    case 'isBoolean':
    case 'in':
    case 'between':
    case 'like':
      // Numbers and booleans; their operands are checked on their own.
      for (const c of children(n)) sizeBound(c);
      return SCALAR;
    case 'case': {
      if (n.subject) sizeBound(n.subject);
      for (const b of n.branches) sizeBound(b.when);
      return max([...n.branches.map((b) => sizeBound(b.then)), ...(n.otherwise ? [sizeBound(n.otherwise)] : [])]);
    }
    case 'cast': {
      const operand = sizeBound(n.operand);
      return n.type === 'string' ? max([operand, SCALAR]) : SCALAR;
    }
    case 'call':
      return callBound(n);
  }
}

/** A whole-number literal argument, or undefined. */
function wholeLiteral(n: Node | undefined): number | undefined {
  if (n?.kind !== 'literal') return undefined;
  const v = n.value;
  if (v.type === 'int') return v.value;
  if (v.type === 'bigint') return Number(v.value);
  return undefined;
}

function stringLiteral(n: Node | undefined): string | undefined {
  return n?.kind === 'literal' && n.value.type === 'string' ? n.value.value : undefined;
}

function callBound(n: Extract<Node, { kind: 'call' }>): SizeBound {
  const args = n.args.map(sizeBound);
  const literalOnly = (what: string) =>
    new SizeProblem(n.pos, `${n.name}'s ${what} must be a literal: it multiplies the size of the value, which must be bounded before the run`);
  switch (n.name) {
    case 'concat':
      return sum(args);
    case 'concat_ws':
      // The separator between every two of the others.
      return sum([times(args[0]!, Math.max(0, args.length - 2)), ...args.slice(1)]);
    case 'repeat': {
      const count = wholeLiteral(n.args[1]);
      if (count === undefined) throw literalOnly('count');
      return times(args[0]!, Math.max(0, count));
    }
    case 'lpad':
    case 'rpad': {
      const length = wholeLiteral(n.args[1]);
      if (length === undefined) throw literalOnly('length');
      // Exactly `length` characters (the value is cut or padded).
      return { factor: 0, constant: Math.max(0, length) };
    }
    case 'replace': {
      if (n.args.length < 3) return args[0]!;
      const search = stringLiteral(n.args[1]);
      const replacement = stringLiteral(n.args[2]);
      if (search === undefined || replacement === undefined) throw literalOnly('search and replacement');
      // Spark leaves the value as it is for an empty search.
      return search === '' ? args[0]! : times(args[0]!, Math.max(1, Math.ceil(replacement.length / search.length)));
    }
    case 'upper':
    case 'lower':
    case 'initcap':
      // Case mapping can lengthen a character (ß to SS, ŉ to ʼN): at most three.
      return times(args[0]!, 3);
    case 'trim':
    case 'ltrim':
    case 'rtrim':
    case 'reverse':
    case 'substring':
    case 'substr':
    case 'left':
    case 'right':
    case 'split_part':
      return args[0]!;
    case 'coalesce':
    case 'nullif':
    case 'nvl':
    case 'ifnull':
    case 'greatest':
    case 'least':
      return max(args);
    case 'nvl2':
    case 'if':
      return max(args.slice(1));
    case 'date_format':
      // A pattern letter prints at most a month or day name.
      return { factor: args[1]!.factor * 16, constant: args[1]!.constant * 16 + 64 };
    case 'md5':
    case 'sha2':
      return { factor: 0, constant: 128 };
    default:
      // Numbers, dates, timestamps and booleans.
      return SCALAR;
  }
}
