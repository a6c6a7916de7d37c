/** The config expression language: a grammar of our own, parsed without Spark (docs/expressions.md). */
export type { BinaryOp, ConfigExpression, Literal, Node } from './ast.js';
export { FUNCTIONS, REFUSED_FUNCTIONS, type FunctionSpec } from './functions.js';
export { MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_LENGTH, parseExpression, type ParseResult } from './parser.js';
