import { COLUMN_PATTERN } from '../naming.js';

/**
 * Splits a config expression into tokens. Characters that only serve SQL features the language
 * does not have (comments, statement separators, parameters, lambdas, pipes, subscripts) are
 * refused here, each with the reason, so no later stage has to know about them. Lexing stops at
 * the first refusal with an `error` token: the parser reports it only if nothing before it failed,
 * so the first problem in the text is the one reported.
 */

export type Token =
  | { readonly t: 'ident'; readonly text: string; readonly upper: string; readonly quoted: boolean; readonly pos: number }
  | { readonly t: 'number'; readonly text: string; readonly pos: number }
  | { readonly t: 'string'; readonly value: string; readonly text: string; readonly pos: number }
  | { readonly t: 'op'; readonly text: string; readonly pos: number }
  | { readonly t: 'eof'; readonly text: ''; readonly pos: number }
  | { readonly t: 'error'; readonly message: string; readonly text: string; readonly pos: number };

/** Longest first: `<=>` before `<=` before `<`. */
const OPERATORS = ['<=>', '<=', '<>', '>=', '==', '!=', '<', '>', '=', '(', ')', ',', '+', '-', '*', '/', '%'];

const REFUSED: readonly [string, string][] = [
  ['--', 'comments (--) are not allowed'],
  ['/*', 'comments (/* */) are not allowed'],
  ['->', 'lambdas (->) are not allowed'],
  ['=>', 'named arguments (=>) are not allowed'],
  ['|>', 'pipe syntax (|>) is not allowed: an expression sees only the columns of its row'],
  ['||', '|| is not supported: use concat()'],
  ['${', 'substitutions (${…}) are not allowed in an expression'],
  [';', 'semicolons are not allowed: a config holds one expression, not statements'],
  ['$', '$ is not allowed in an expression'],
  ['?', 'parameters (?) are not allowed'],
  [':', 'parameters and casts with : (:name, ::type) are not allowed; use CAST(x AS type)'],
  ['"', 'double quotes are not allowed: strings take single quotes, column names backticks'],
  ['.', 'qualified names (a.b) are not allowed: an expression names only columns of its own row'],
  ['[', 'subscripts ([…]) are not supported'],
  [']', 'subscripts ([…]) are not supported'],
  ['{', 'braces are not allowed in an expression'],
  ['}', 'braces are not allowed in an expression'],
  ['!', 'use NOT instead of !'],
  ['|', 'bitwise operators are not supported'],
  ['&', 'bitwise operators are not supported'],
  ['^', 'bitwise operators are not supported'],
  ['~', 'bitwise operators are not supported'],
  ['\\', 'a backslash is only allowed inside a string literal'],
];

const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
const isIdentStart = (c: string | undefined) => c !== undefined && /[A-Za-z_]/.test(c);
const isIdentPart = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_]/.test(c);

export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const fail = (at: number, message: string, shown = text[at] ?? '') => {
    out.push({ t: 'error', message, text: shown, pos: at + 1 });
    return out;
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    const start = i;
    if (c === "'") {
      // Standard SQL: '' is a quote; every other character, backslash included, is itself.
      let value = '';
      i++;
      for (;;) {
        if (i >= text.length) return fail(start, 'unterminated string literal', "'");
        if (text[i] === "'") {
          if (text[i + 1] === "'") {
            value += "'";
            i += 2;
            continue;
          }
          i++;
          break;
        }
        value += text[i];
        i++;
      }
      out.push({ t: 'string', value, text: text.slice(start, i), pos: start + 1 });
      continue;
    }
    if (c === '`') {
      const end = text.indexOf('`', i + 1);
      if (end < 0) return fail(start, 'unterminated backticked name', '`');
      const name = text.slice(i + 1, end);
      // A doubled backtick would be a backtick inside the name, which no column name has.
      if (!COLUMN_PATTERN.test(name) || text[end + 1] === '`')
        return fail(start, `a column name must match ${COLUMN_PATTERN.source}`, text.slice(start, end + 1));
      out.push({ t: 'ident', text: name, upper: name.toUpperCase(), quoted: true, pos: start + 1 });
      i = end + 1;
      continue;
    }
    if (isDigit(c) || (c === '.' && isDigit(text[i + 1]))) {
      while (isDigit(text[i])) i++;
      if (text[i] === '.' && isDigit(text[i + 1])) {
        i++;
        while (isDigit(text[i])) i++;
      }
      if ((text[i] === 'e' || text[i] === 'E') && (isDigit(text[i + 1]) || ((text[i + 1] === '+' || text[i + 1] === '-') && isDigit(text[i + 2])))) {
        i += 2;
        while (isDigit(text[i])) i++;
      }
      if (isIdentPart(text[i]) || text[i] === '.') return fail(i, 'a number must end here (type suffixes such as 10L are not supported: use CAST)');
      out.push({ t: 'number', text: text.slice(start, i), pos: start + 1 });
      continue;
    }
    if (isIdentStart(c)) {
      while (isIdentPart(text[i])) i++;
      const word = text.slice(start, i);
      out.push({ t: 'ident', text: word, upper: word.toUpperCase(), quoted: false, pos: start + 1 });
      continue;
    }
    const refused = REFUSED.find(([s]) => text.startsWith(s, i) && !(s === '!' && text[i + 1] === '='));
    if (refused) return fail(start, refused[1], refused[0]);
    const op = OPERATORS.find((o) => text.startsWith(o, i));
    if (op) {
      out.push({ t: 'op', text: op, pos: start + 1 });
      i += op.length;
      continue;
    }
    const shown = c < ' ' || c > '~' ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c;
    return fail(start, `unexpected character "${shown}"`, shown);
  }
  out.push({ t: 'eof', text: '', pos: text.length + 1 });
  return out;
}
