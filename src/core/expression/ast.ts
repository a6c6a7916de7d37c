/**
 * The typed tree of a config expression (docs/expressions.md). It can only describe what the grammar
 * allows: columns of the row, literals, operators, CASE, CAST to a primitive type and calls to
 * allow-listed functions. There is no node for a table, a subquery or free SQL text, so nothing
 * built from it can read beyond its row. `pos` is the 1-based character position in the text.
 */

export type Literal =
  | { readonly type: 'null' }
  | { readonly type: 'boolean'; readonly value: boolean }
  /** Fits 32 bits (Spark's INT). */
  | { readonly type: 'int'; readonly value: number }
  /** Fits 64 bits (Spark's BIGINT). */
  | { readonly type: 'bigint'; readonly value: bigint }
  /** An exact number: `1.50` is decimal(3,2), like Spark SQL's literal. */
  | { readonly type: 'decimal'; readonly value: string; readonly precision: number; readonly scale: number }
  /** A number with an exponent: `1e3`. */
  | { readonly type: 'double'; readonly value: number }
  | { readonly type: 'string'; readonly value: string }
  /** `DATE '2026-07-05'`: a valid calendar date, ISO form. */
  | { readonly type: 'date'; readonly value: string }
  /** `TIMESTAMP '2026-07-05 10:00:00'`: in the session time zone unless it carries an offset. */
  | { readonly type: 'timestamp'; readonly value: string };

export type ArithmeticOp = '+' | '-' | '*' | '/' | '%';
/** `=` and `==` are one operator, `<>` and `!=` another: the parser normalises them. */
export type ComparisonOp = '=' | '!=' | '<' | '<=' | '>' | '>=' | '<=>';
export type BinaryOp = ArithmeticOp | ComparisonOp | 'and' | 'or';

/** The types CAST accepts, normalised (`int`, `decimal(10,2)`, …). */
export type CastType = string;

export type Node =
  | { readonly kind: 'column'; readonly name: string; readonly pos: number }
  | { readonly kind: 'literal'; readonly value: Literal; readonly pos: number }
  | { readonly kind: 'unary'; readonly op: '-' | '+' | 'not'; readonly operand: Node; readonly pos: number }
  | { readonly kind: 'binary'; readonly op: BinaryOp; readonly left: Node; readonly right: Node; readonly pos: number }
  | { readonly kind: 'isNull'; readonly operand: Node; readonly negated: boolean; readonly pos: number }
  /** `x IS [NOT] TRUE|FALSE`: never NULL, unlike `x = TRUE`. */
  | { readonly kind: 'isBoolean'; readonly operand: Node; readonly value: boolean; readonly negated: boolean; readonly pos: number }
  | { readonly kind: 'in'; readonly operand: Node; readonly values: readonly Node[]; readonly negated: boolean; readonly pos: number }
  | { readonly kind: 'between'; readonly operand: Node; readonly low: Node; readonly high: Node; readonly negated: boolean; readonly pos: number }
  | {
      readonly kind: 'like';
      readonly operand: Node;
      readonly pattern: string;
      readonly escape?: string | undefined;
      readonly negated: boolean;
      readonly pos: number;
    }
  | {
      readonly kind: 'case';
      /** `CASE x WHEN v THEN …`: branches compare `x = v`. */
      readonly subject?: Node | undefined;
      readonly branches: readonly { readonly when: Node; readonly then: Node }[];
      readonly otherwise?: Node | undefined;
      readonly pos: number;
    }
  | { readonly kind: 'cast'; readonly operand: Node; readonly type: CastType; readonly pos: number }
  /** A call of an allow-listed function; `name` is lower case. */
  | { readonly kind: 'call'; readonly name: string; readonly args: readonly Node[]; readonly pos: number };

/** A config expression once validated: the text (for messages and logs) and its tree (for plans). */
export interface ConfigExpression {
  readonly text: string;
  readonly ast: Node;
}

/** A node's operands, in the order the text has them. */
export function children(n: Node): Node[] {
  switch (n.kind) {
    case 'column':
    case 'literal':
      return [];
    case 'unary':
    case 'isNull':
    case 'isBoolean':
    case 'like':
    case 'cast':
      return [n.operand];
    case 'binary':
      return [n.left, n.right];
    case 'in':
      return [n.operand, ...n.values];
    case 'between':
      return [n.operand, n.low, n.high];
    case 'case':
      return [...(n.subject ? [n.subject] : []), ...n.branches.flatMap((b) => [b.when, b.then]), ...(n.otherwise ? [n.otherwise] : [])];
    case 'call':
      return [...n.args];
  }
}
