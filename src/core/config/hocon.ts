import { open, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type ConfigIssue, InputMissingError } from '../errors.js';
import { resolveInclude } from './paths.js';

/**
 * A HOCON loader for tenant configs, which are untrusted input. This is a small parser of our own, not
 * `@pushcorn/hocon-parser`: that package's core path lookup (`utils.query`) compiles any key segment
 * starting with `{` into a `Function`, so a plain quoted key or `${"{…}"}` runs JavaScript even in
 * strict mode. It also runs `.js` includes with `require`, evaluates `| eval {…}` transforms, fetches
 * `url(…)` includes, searches module paths for `classpath(…)`, reads `process.env` directly, and sorts
 * keys. Blocking all of that would mean patching its internals in place, so we parse the subset we need:
 * objects, arrays, dotted keys, comments, quoted / unquoted / triple-quoted strings, value
 * concatenation, `${path}` / `${?path}` (self-references included), `+=`, and file includes.
 *
 * Semantics follow the HOCON spec: sources and includes merge in order (later wins, objects merge),
 * then substitutions resolve against the merged whole; a self-reference sees the value before its own
 * assignment. A substitution the config does not define falls back to `options.env`, only for names
 * the allow-list accepts (none by default). Every problem is collected and reported at once.
 *
 * Deliberate refusals (the spec allows or leaves them to implementations): url() and classpath()
 * includes, absolute or escaping include paths, includes of anything but .conf / .json (no extension
 * probing, never .properties or code), and environment variables the caller did not allow.
 *
 * Every input is bounded ({@link HOCON_LIMITS}): past a limit the result is a ConfigError (78) naming
 * it, reached in time and memory proportional to the limit, never a stack overflow or a runaway
 * expansion. The parser recurses only as deep as the nesting limit allows.
 */

export interface HoconSource {
  text: string;
  /** For messages and include resolution. */
  file?: string;
}

export interface HoconOptions {
  /** The environment `${VAR}` / `${?VAR}` may read; `process.env` is never consulted. */
  env?: Record<string, string | undefined>;
  /** Which environment variables a config may read (default: none). Names {@link isSecretLikeName} accepts are never read. */
  envAllowList?: (name: string) => boolean;
  /** Appended to the message for a variable the allow-list refuses: where the list comes from. */
  envHint?: string;
  /** Includes must resolve inside this directory (default: the directory of each source's `file`). */
  includeRoot?: string;
  /** `--set key=value` lines (HOCON syntax for the value), merged after all sources. */
  overrides?: string[];
  /**
   * Filled with where each key was last set (`file:line:col`), by {@link originKey} of its path:
   * a schema problem found after parsing can then point at the line, as a syntax error does.
   */
  origins?: Map<string, string>;
  /**
   * Files this parse may not read, whatever path leads to them (a symbolic link, `..`, a hard link):
   * for a job config, the platform config and every file it includes. Compared by real path and by
   * device and inode.
   */
  forbidden?: readonly FileIdentity[];
  /** Why a forbidden file is refused, for the message (it names the rule, never the file's content). */
  forbiddenReason?: string;
  /** Filled with every file read (the sources and their includes): what a later parse may be forbidden. */
  files?: FileIdentity[];
  /** Filled with each environment variable a substitution read, and the paths of the values that read it. */
  envReads?: Map<string, string[]>;
}

/** A file by its real path and its identity on disk (a hard link has another path, the same identity). */
export interface FileIdentity {
  readonly real: string;
  readonly dev: bigint;
  readonly ino: bigint;
}

/** The identity of an existing file (undefined when it cannot be found). */
export async function fileIdentity(file: string): Promise<FileIdentity | undefined> {
  try {
    const real = await realpath(file);
    const s = await stat(real, { bigint: true });
    return { real, dev: s.dev, ino: s.ino };
  } catch {
    return undefined;
  }
}

function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return a.real === b.real || (a.dev === b.dev && a.ino === b.ino);
}

/** The key of a config path in {@link HoconOptions.origins}. */
export const originKey = (path: readonly string[]): string => JSON.stringify(path);

/**
 * Where the value at `path` (or, for a key that is missing or an array item, its nearest set
 * ancestor) was written; undefined when nothing on the path was written in a file.
 */
export function originOf(origins: ReadonlyMap<string, string>, path: readonly PropertyKey[]): string | undefined {
  const keys = path.map(String);
  for (let n = keys.length; n > 0; n--) {
    const at = origins.get(originKey(keys.slice(0, n)));
    if (at !== undefined) return at;
  }
  return undefined;
}

/**
 * `--set k=v` where v is not a HOCON value but plain text a shell leaves unquoted (an instant
 * `2026-07-06T00:00:00Z`, a URI, SQL with `=`): the override as `k = "v"`, so the schema judges it as
 * the string it is. Text with HOCON's structure characters (`{}[],"$#`) stays an error: `a=1, b=2`
 * is two overrides, not one string.
 */
function bareOverride(line: string): string | undefined {
  const eq = line.indexOf('=');
  if (eq <= 0) return undefined;
  const value = line.slice(eq + 1).trim();
  if (value === '' || /[{}[\],"$#\n\r]/.test(value)) return undefined;
  return `${line.slice(0, eq)} = ${JSON.stringify(value)}`;
}

/**
 * Names that may hold a credential (or, like `SPARK_REMOTE`, a connection string carrying one): no
 * config reads them through `${…}`, even when allowed. Secrets stay references (`{ env = NAME }`),
 * resolved at the moment of use.
 */
export function isSecretLikeName(name: string): boolean {
  return /TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL|AUTH|SPARK_REMOTE/i.test(name);
}

/**
 * The resource limits every parse runs under. Past one, the parse fails with 78 and a message naming
 * the limit. Generous for hand-written configs (ours are a few kB, a few levels deep); small enough
 * that the worst input is rejected well within a second and a few tens of MB.
 */
export const HOCON_LIMITS = {
  /** Bytes of one file (the config or an include). */
  fileBytes: 1 << 20,
  /** Bytes of all sources, includes and --set lines together. */
  totalBytes: 4 << 20,
  /** Files included, in total. */
  includes: 64,
  /** Includes inside includes. */
  includeDepth: 16,
  /** Nesting of objects and arrays, dotted-key segments included, in the text and in the result. */
  depth: 64,
  /** Values (fields, array items, concatenated pieces) parsed, and values in the resolved config. */
  nodes: 100_000,
  /** Characters of one string value. */
  stringChars: 1 << 20,
  /** Characters of all strings in the resolved config (substitutions copy strings). */
  resolvedChars: 8 << 20,
  /** Values copied while merging and resolving (self-concatenation, merges, `+=`, self-references). */
  expansionValues: 500_000,
  /** Characters of the strings built while resolving (concatenations). */
  expansionChars: 16 << 20,
  /** Substitutions that wait on each other (a chain `a1 = ${a0}`, `a2 = ${a1}`, …). */
  substitutionDepth: 256,
} as const;

/** Parse, merge (left to right) and resolve HOCON sources into a plain JSON object. */
export async function parseHocon(sources: HoconSource[], options: HoconOptions = {}): Promise<Record<string, unknown>> {
  const loader = new Loader(options);
  for (const [i, source] of sources.entries()) await loader.addSource(source, i);
  for (const [i, line] of (options.overrides ?? []).entries()) await loader.addOverride(line, i);
  return loader.finish();
}

/** Read a main config file; a missing one is an InputMissingError (66), one past the size limit a ConfigError (78). */
export async function readHoconFile(file: string): Promise<HoconSource> {
  let read: Awaited<ReturnType<typeof readBounded>>;
  try {
    read = await readBounded(file, HOCON_LIMITS.fileBytes);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new InputMissingError(`config file ${file} does not exist`, { cause: e });
    throw new InputMissingError(`config file ${file} cannot be read (${code ?? 'error'})`, { cause: e });
  }
  if ('tooLarge' in read) throw new ConfigError(`config file is larger than ${fmtBytes(HOCON_LIMITS.fileBytes)} (the limit for one file)`, { path: file });
  return { file, text: read.text };
}

/**
 * At most `limit` bytes of a file: a larger one is never read into memory. The identity is the
 * opened file's own (fstat), so what was checked is what is read, even if a link changes meanwhile.
 */
async function readBounded(file: string, limit: number): Promise<({ text: string } | { tooLarge: true }) & { identity: FileIdentity }> {
  const fh = await open(file, 'r');
  try {
    const s = await fh.stat({ bigint: true });
    const identity = { real: file, dev: s.dev, ino: s.ino };
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(1 << 16);
      const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > limit) return { tooLarge: true, identity };
      chunks.push(chunk.subarray(0, bytesRead));
    }
    return { text: Buffer.concat(chunks).toString('utf8'), identity };
  } finally {
    await fh.close();
  }
}

function fmtBytes(n: number): string {
  return n % (1 << 20) === 0 ? `${n / (1 << 20)} MiB` : `${n} bytes`;
}

// ---------------------------------------------------------------------------------------------------
// Tokens and syntax

interface Loc {
  file: string;
  line: number;
  col: number;
}

type Punct = 'nl' | '{' | '}' | '[' | ']' | ',' | 'sep' | '+=' | 'eof';
type Tok =
  | { t: Punct; loc: Loc }
  | { t: 'ws'; v: string; loc: Loc }
  | { t: 'str'; v: string; quoted: boolean; loc: Loc }
  | { t: 'subst'; path: string[]; optional: boolean; loc: Loc };

class SyntaxProblem extends Error {
  constructor(
    message: string,
    readonly loc: Loc,
    readonly key: string[] = [],
  ) {
    super(message);
  }
}

/** Characters HOCON reserves: they end an unquoted string. */
const FORBIDDEN = new Set('$"{}[]:=,+#`^?!@*&\\');
const PUNCT = new Map<string, Punct>([
  ['\n', 'nl'],
  ['{', '{'],
  ['}', '}'],
  ['[', '['],
  [']', ']'],
  [',', ','],
  [':', 'sep'],
  ['=', 'sep'],
]);
const ESCAPES = new Map(Object.entries({ '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }));
/** Characters a quoted string takes as they are (no quote, backslash or control character). */
const PLAIN_RUN = /[^"\\\x00-\x1f]+/y;
const NUMBER_START = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const isSpace = (c: string | undefined) =>
  c === ' ' || c === '\t' || c === '\r' || (c !== undefined && c !== '\n' && (c < '!' || c > '~') && (/\s/.test(c) || c === '\ufeff'));

/** Lazily, so a lexical error is raised while the parser knows which key it is in. */
function* tokenize(text: string, file: string): Generator<Tok, void, undefined> {
  let i = 0;
  let line = 1;
  let col = 1;
  const here = (): Loc => ({ file, line, col });
  const advance = (n: number) => {
    for (let k = 0; k < n; k++, i++) {
      if (text[i] === '\n') {
        line++;
        col = 1;
      } else col++;
    }
  };
  const fail: (message: string, loc?: Loc) => never = (message, loc = here()) => {
    throw new SyntaxProblem(message, loc);
  };

  const quoted = (): string => {
    const start = here();
    if (text.startsWith('"""', i)) {
      let end = text.indexOf('"""', i + 3);
      if (end < 0) fail('unterminated """ string', start);
      while (text[end + 3] === '"') end++; // the closing quotes are the last three of a run
      const v = text.slice(i + 3, end);
      advance(end + 3 - i);
      return v;
    }
    let v = '';
    for (advance(1); text[i] !== '"';) {
      PLAIN_RUN.lastIndex = i;
      const run = PLAIN_RUN.exec(text);
      if (run) {
        // A run of ordinary characters at once: a long string is one slice, not one step per character.
        v += run[0];
        advance(run[0].length);
        continue;
      }
      const c = text[i];
      if (c === undefined || c === '\n') fail('unterminated quoted string', start);
      if (c < ' ') fail('control character in a quoted string; escape it');
      if (c !== '\\') {
        v += c;
        advance(1);
        continue;
      }
      const e = text[i + 1] ?? '';
      const hex = text.slice(i + 2, i + 6);
      if (ESCAPES.has(e)) {
        v += ESCAPES.get(e);
        advance(2);
      } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(hex)) {
        v += String.fromCharCode(parseInt(hex, 16));
        advance(6);
      } else fail(`invalid escape \\${e}`);
    }
    advance(1);
    return v;
  };

  const unquoted = (): string => {
    const start = i;
    // An initial JSON number is one token even with the characters that end unquoted text (`1e+5`).
    NUMBER_START.lastIndex = i;
    const number = NUMBER_START.exec(text);
    if (number) advance(number[0].length);
    while (i < text.length && !isSpace(text[i]) && !PUNCT.has(text[i]!) && !FORBIDDEN.has(text[i]!) && !text.startsWith('//', i)) advance(1);
    return text.slice(start, i);
  };

  const substitution = (loc: Loc): Tok => {
    advance(2);
    const optional = text[i] === '?';
    if (optional) advance(1);
    const pieces: Piece[] = [];
    for (let d = text[i]; d !== '}'; d = text[i]) {
      if (d === undefined || d === '\n') fail('unterminated substitution', loc);
      if (d === '"') pieces.push({ v: quoted(), quoted: true });
      else if (isSpace(d)) {
        pieces.push({ v: d, quoted: false });
        advance(1);
      } else if (FORBIDDEN.has(d)) fail(`unexpected "${d}" in a substitution`);
      else pieces.push({ v: unquoted(), quoted: false });
    }
    advance(1);
    return { t: 'subst', path: parsePath(pieces, loc), optional, loc };
  };

  while (i < text.length) {
    const c = text[i]!;
    const loc = here();
    const punct = text.startsWith('+=', i) ? '+=' : PUNCT.get(c);
    if (punct) {
      advance(punct === '+=' ? 2 : 1);
      yield { t: punct, loc };
    } else if (c === '#' || text.startsWith('//', i)) {
      while (i < text.length && text[i] !== '\n') advance(1);
    } else if (isSpace(c)) {
      const start = i;
      while (isSpace(text[i])) advance(1);
      yield { t: 'ws', v: text.slice(start, i), loc };
    } else if (c === '"') {
      yield { t: 'str', v: quoted(), quoted: true, loc };
    } else if (text.startsWith('${', i)) {
      yield substitution(loc);
    } else {
      const v = unquoted();
      if (!v) fail(`unexpected "${c}"${c === '+' ? ' (quote values that contain "+")' : ''}`);
      yield { t: 'str', v, quoted: false, loc };
    }
  }
  yield { t: 'eof', loc: here() };
}

interface Piece {
  v: string;
  quoted: boolean;
}

/** `a.b."c.d"` → ['a', 'b', 'c.d']: dots split unquoted text only. */
function parsePath(pieces: Piece[], loc: Loc): string[] {
  const blank = (p: Piece | undefined) => p !== undefined && !p.quoted && p.v.trim() === '';
  const ps = [...pieces];
  while (blank(ps[0])) ps.shift();
  while (blank(ps.at(-1))) ps.pop();
  if (ps.length === 0) throw new SyntaxProblem('empty path', loc);
  const segs: string[] = [''];
  const filled: boolean[] = [false];
  for (const p of ps) {
    const parts = p.quoted ? [p.v] : p.v.split('.');
    parts.forEach((part, n) => {
      if (n > 0) {
        segs.push('');
        filled.push(false);
      }
      segs[segs.length - 1] += part;
      if (p.quoted || part) filled[filled.length - 1] = true;
    });
  }
  if (filled.includes(false)) throw new SyntaxProblem(`invalid path "${ps.map((p) => p.v).join('')}": empty segment`, loc);
  if (segs.length > HOCON_LIMITS.depth) throw new SyntaxProblem(`path has ${segs.length} segments, more than the nesting limit of ${HOCON_LIMITS.depth}`, loc);
  return segs;
}

type Part =
  | { k: 'str'; v: string; quoted: boolean }
  | { k: 'ws'; v: string }
  | { k: 'subst'; path: string[]; optional: boolean; loc: Loc }
  | { k: 'obj'; body: Stmt[] }
  | { k: 'arr'; items: Part[][] };

type Stmt =
  | { k: 'field'; key: string[]; op: 'sep' | '+=' | '{'; value: Part[]; loc: Loc }
  | { k: 'include'; target: string; required: boolean; scheme?: string; loc: Loc };

/** Values parsed so far, shared by every file of one load: the node limit covers them all. */
interface ParseBudget {
  nodes: number;
}

/**
 * Recursive descent over the tokens of one file. `key` tracks where we are, for error paths. The
 * recursion is as deep as the nesting, which `enter` caps at the depth limit (counting from `depth`,
 * the include point's own depth), so no input overflows the stack.
 */
class Parser {
  private toks: Tok[] = [];
  private i = 0;
  private key: string[] = [];

  constructor(
    private readonly lexer: Iterator<Tok, void>,
    private readonly budget: ParseBudget = { nodes: 0 },
    private depth = 0,
  ) {}

  document(): Stmt[] {
    this.depth--; // the root object is level 0: `a.b = 1` is two levels deep
    this.skip('ws', 'nl');
    if (this.peek().t === '[') this.fail('the root of a config must be an object, not an array');
    if (this.peek().t !== '{') return this.body(false);
    this.next();
    const body = this.body(true);
    this.skip('ws', 'nl');
    if (this.peek().t !== 'eof') this.fail(`unexpected ${describe(this.peek())} after the root object`);
    return body;
  }

  private body(braced: boolean): Stmt[] {
    this.enter();
    const stmts: Stmt[] = [];
    for (;;) {
      this.skip('ws', 'nl');
      const t = this.peek();
      if (t.t === 'eof') {
        if (braced) this.fail('"{" is never closed');
        break;
      }
      if (t.t === '}') {
        if (!braced) this.fail('unexpected "}"');
        this.next();
        break;
      }
      stmts.push(this.isInclude() ? this.include() : this.field());
      this.skip('ws');
      const s = this.peek();
      if (s.t === ',') this.next();
      else if (s.t !== 'nl' && s.t !== '}' && s.t !== 'eof') this.fail(`expected "," or a new line, found ${describe(s)}`);
    }
    this.depth--;
    return stmts;
  }

  private field(): Stmt {
    const loc = this.peek().loc;
    this.count();
    const pieces: Piece[] = [];
    for (let t = this.peek(); t.t === 'str' || t.t === 'ws'; t = this.peek()) (pieces.push({ v: t.v, quoted: t.t === 'str' && t.quoted }), this.next());
    if (pieces.length === 0) this.fail(`expected a key, found ${describe(this.peek())}`);
    const key = this.guard(() => parsePath(pieces, loc));
    // As in the reference implementation, new lines may separate a key from its "{", separator or value.
    this.skip('ws', 'nl');
    const op = this.peek().t;
    if (op !== 'sep' && op !== '+=' && op !== '{') this.fail(`expected "=", ":" or "{" after the key, found ${describe(this.peek())}`);
    if (op !== '{') this.next();
    const outer = this.key;
    this.key = [...outer, ...key];
    this.depth += key.length;
    if (this.depth > HOCON_LIMITS.depth) this.fail(`nested deeper than ${HOCON_LIMITS.depth} levels (dotted-key segments count as levels)`);
    this.skip('ws', 'nl');
    const value = this.value();
    if (value.length === 0) this.fail(`expected a value, found ${describe(this.peek())}`);
    this.depth -= key.length;
    this.key = outer;
    return { k: 'field', key, op, value, loc };
  }

  /**
   * `include` is a keyword only when followed by a resource (after any white space, new lines
   * included, as the spec allows): `include = 1` is an ordinary key.
   */
  private isInclude(): boolean {
    const a = this.peek(0);
    if (a.t !== 'str' || a.quoted || a.v !== 'include') return false;
    let k = 1;
    while (k < 64 && (this.peek(k).t === 'ws' || this.peek(k).t === 'nl')) k++;
    const c = this.peek(k);
    return k > 1 && c.t === 'str' && (c.quoted || /^(required|file|url|classpath)\(/.test(c.v));
  }

  private include(): Stmt {
    const loc = this.next().loc;
    let shape = '';
    let target: string | undefined;
    this.skip('ws', 'nl');
    for (let t = this.peek(); t.t === 'str' || t.t === 'ws'; t = this.peek()) {
      if (t.t === 'str' && t.quoted) {
        if (target !== undefined) this.fail('an include names one resource');
        target = t.v;
        shape += '"';
      } else if (t.t === 'str') shape += t.v;
      this.next();
    }
    const m = /^(?:(required)\()?(?:(file|url|classpath)\()?"(\)*)$/.exec(shape);
    if (!m || target === undefined || m[3]!.length !== Number(!!m[1]) + Number(!!m[2]))
      this.fail('malformed include: expected include "x.conf", include file("x.conf") or include required("x.conf")', loc);
    return { k: 'include', target: target!, required: !!m![1], ...(m![2] ? { scheme: m![2] } : {}), loc };
  }

  /** A value is a concatenation of parts that ends at a new line, ",", "}", "]" or the end. */
  private value(): Part[] {
    const parts: Part[] = [];
    for (;;) {
      const t = this.peek();
      if (t.t === 'str' || t.t === 'subst' || t.t === '{' || t.t === '[') this.count();
      if (t.t === 'str') parts.push({ k: 'str', v: t.v, quoted: t.quoted });
      else if (t.t === 'ws') parts.push({ k: 'ws', v: t.v });
      else if (t.t === 'subst') parts.push({ k: 'subst', path: t.path, optional: t.optional, loc: t.loc });
      else if (t.t === '{') {
        this.next();
        parts.push({ k: 'obj', body: this.body(true) });
        continue;
      } else if (t.t === '[') {
        parts.push(this.array());
        continue;
      } else if (t.t === 'sep' || t.t === '+=') this.fail(`unexpected ${describe(t)} in a value (quote strings that contain ":" or "=")`);
      else break;
      this.next();
    }
    while (parts[0]?.k === 'ws') parts.shift();
    while (parts.at(-1)?.k === 'ws') parts.pop();
    return parts;
  }

  private array(): Part {
    this.enter();
    this.next();
    const items: Part[][] = [];
    for (;;) {
      this.skip('ws', 'nl');
      const t = this.peek();
      if (t.t === ']') break;
      if (t.t === 'eof') this.fail('"[" is never closed');
      const item = this.value();
      if (item.length === 0) this.fail(`unexpected ${describe(this.peek())} in an array`);
      items.push(item);
      this.skip('ws');
      const s = this.peek();
      if (s.t === ',') this.next();
      else if (s.t !== 'nl' && s.t !== ']') this.fail(`expected "," or "]", found ${describe(s)}`);
    }
    this.next();
    this.depth--;
    return { k: 'arr', items };
  }

  private enter() {
    if (++this.depth > HOCON_LIMITS.depth) this.fail(`nested deeper than ${HOCON_LIMITS.depth} levels`);
  }
  private count() {
    if (++this.budget.nodes > HOCON_LIMITS.nodes) this.fail(`more than ${HOCON_LIMITS.nodes} values (the limit for a config and its includes)`);
  }
  private peek(ahead = 0): Tok {
    while (this.toks.length <= this.i + ahead) {
      let r: IteratorResult<Tok, void>;
      try {
        r = this.lexer.next();
      } catch (e) {
        if (e instanceof SyntaxProblem) this.fail(e.message, e.loc);
        throw e;
      }
      if (r.done) return this.toks.at(-1)!; // the lexer ends with 'eof'
      this.toks.push(r.value);
    }
    return this.toks[this.i + ahead]!;
  }
  private next(): Tok {
    const t = this.peek();
    this.consume();
    return t;
  }
  private skip(...types: Tok['t'][]) {
    while (types.includes(this.peek().t)) this.consume();
  }
  /** Tokens already consumed are dropped now and then: memory stays proportional to the look-ahead. */
  private consume() {
    if (++this.i >= 1024) {
      this.toks = this.toks.slice(this.i - 1);
      this.i = 1;
    }
  }
  private fail(message: string, loc = (this.toks[this.i] ?? this.toks.at(-1))?.loc ?? { file: '', line: 1, col: 1 }): never {
    throw new SyntaxProblem(message, loc, this.key);
  }
  private guard<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof SyntaxProblem) this.fail(e.message, e.loc);
      throw e;
    }
  }
}

function describe(t: Tok): string {
  if (t.t === 'eof') return 'the end of the file';
  if (t.t === 'nl') return 'a new line';
  if (t.t === 'str') return JSON.stringify(clip(t.v, 60));
  if (t.t === 'subst') return 'a substitution';
  if (t.t === 'ws') return 'white space';
  return t.t === 'sep' ? '":" or "="' : `"${t.t}"`;
}

// ---------------------------------------------------------------------------------------------------
// Merging: statements become a tree of values; substitutions stay unresolved until every source is in.

/** Integers beyond 2^53 (up to 64 bits) stay exact as bigint; schemas that want them accept bigint. */
type Json = string | number | bigint | boolean | null | Json[] | { [k: string]: Json };
type Obj = { k: 'obj'; fields: Map<string, Val> };
type Val =
  | Obj
  | { k: 'prim'; v: Json }
  | { k: 'arr'; items: Val[] }
  | { k: 'concat'; parts: (Val | { k: 'ws'; v: string })[] }
  /** `${path}`: looked up at `prefix + path` (the include point), then `path`, then the environment. */
  | { k: 'subst'; path: string[]; prefix: string[]; optional: boolean; at: string[]; loc: Loc }
  /** A self-reference: the value (`of`, frozen) the field had before this assignment, then `rest`. */
  | { k: 'prev'; of: Val | undefined; rest: string[]; optional: boolean; at: string[]; loc: Loc; fallback?: Extract<Val, { k: 'subst' }> }
  /** A later object merged over an earlier value that is not known to be an object until resolved. */
  | { k: 'merge'; layers: Val[] };

interface FileCtx {
  display: string; // the name used in messages
  dir: string | undefined; // where relative includes start
  root: string | undefined; // includes must stay below this
  prefix: string[]; // the include point: substitutions in an included file are relative to it
  stack: string[]; // real paths of the files being included, to stop cycles
  overrides?: boolean;
}

const FAILED = Symbol('failed'); // already reported
const CYCLE = Symbol('cycle');
const NOT_FOUND = Symbol('not found');
type Res = Json | undefined | typeof FAILED;

/** Size (values), nesting depth and characters of a resolved value; kept for objects and arrays. */
interface Shape {
  n: number;
  d: number;
  c: number;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

class Loader {
  private readonly root: Obj = obj();
  private readonly issues: ConfigIssue[] = [];
  private readonly missing: string[] = [];
  private readonly env: Record<string, string | undefined>;
  private readonly allowed: (name: string) => boolean;
  private readonly memo = new Map<Val, Res>();
  private readonly active = new Set<Val>();
  private readonly shapes = new WeakMap<object, Shape>();
  private readonly budget: ParseBudget = { nodes: 0 };
  private bytes = 0;
  private included = 0;
  /** Values and characters copied so far while merging and resolving. */
  private copiedValues = 0;
  private copiedChars = 0;
  /** A resource limit was hit: reported once, everything after it fails quietly. */
  private exhausted = false;

  constructor(private readonly options: HoconOptions) {
    this.env = options.env ?? {};
    const allowed = options.envAllowList ?? (() => false);
    this.allowed = (name) => allowed(name) && !isSecretLikeName(name);
  }

  private get forbiddenReason(): string {
    return this.options.forbiddenReason ?? 'this file may not be read by this config';
  }

  private isForbidden(file: FileIdentity): boolean {
    return (this.options.forbidden ?? []).some((f) => sameFile(f, file));
  }

  async addSource(source: HoconSource, index: number) {
    const display = source.file ?? `<source ${index + 1}>`;
    if (!this.admit(source.text, display, HOCON_LIMITS.fileBytes)) return;
    const file = source.file === undefined ? undefined : path.resolve(source.file);
    const dir = file && path.dirname(file);
    const root = this.options.includeRoot === undefined ? dir : path.resolve(this.options.includeRoot);
    const stack = file ? [await realpath(file).catch(() => file)] : [];
    const identity = file === undefined ? undefined : await fileIdentity(file);
    if (identity) {
      if (this.isForbidden(identity)) return this.issue(display, `this file cannot be read here: ${this.forbiddenReason}`);
      this.options.files?.push(identity);
    }
    const body = this.parse(source.text, display, []);
    if (body) await this.mergeBody(this.root, body, [], { display, dir: dir ?? root, root, prefix: [], stack });
  }

  /** Counts a text against the size limits; false (and an issue) when it is past one. */
  private admit(text: string, display: string, fileLimit: number): boolean {
    const n = Buffer.byteLength(text);
    if (n > fileLimit) return (this.limit(display, `larger than ${fmtBytes(fileLimit)} (the limit for one file)`), false);
    this.bytes += n;
    if (this.bytes > HOCON_LIMITS.totalBytes)
      return (this.limit(display, `the config and its includes are larger than ${fmtBytes(HOCON_LIMITS.totalBytes)} together`), false);
    return true;
  }

  async addOverride(line: string, index: number) {
    const at = `--set[${index}]`;
    if (!this.admit(line, at, HOCON_LIMITS.fileBytes)) return;
    let body: Stmt[];
    try {
      body = new Parser(tokenize(line, at), this.budget).document();
    } catch (e) {
      if (!(e instanceof SyntaxProblem)) throw e;
      const text = bareOverride(line);
      try {
        if (text === undefined) throw e;
        body = new Parser(tokenize(text, at), this.budget).document();
      } catch {
        return this.issue(at, `column ${e.loc.col}: ${e.message} (expected key=value)`);
      }
    }
    const [stmt, ...more] = body;
    if (stmt?.k !== 'field' || stmt.op === '{' || more.length > 0) return this.issue(at, 'expected exactly one key=value');
    await this.mergeBody(this.root, body, [], { display: at, dir: undefined, root: undefined, prefix: [], stack: [], overrides: true });
  }

  finish(): Record<string, unknown> {
    if (this.missing.length) throw new InputMissingError(`included file not found: ${this.missing.join(', ')}`);
    if (this.issues.length) throw new ConfigError(this.issues);
    const out = this.get(this.root, []);
    if (this.issues.length || !isObject(out)) throw new ConfigError(this.issues.length ? this.issues : 'the config did not resolve to an object');
    // A fresh copy: substitutions share resolved objects, callers should get independent ones. The
    // shape limits above bound its size and depth.
    return clone(out) as Record<string, unknown>;
  }

  private parse(text: string, display: string, base: string[]): Stmt[] | undefined {
    try {
      return new Parser(tokenize(text, display), this.budget, base.length).document();
    } catch (e) {
      if (!(e instanceof SyntaxProblem)) throw e;
      const key = [...base, ...e.key];
      this.issue(key.length ? fmtPath(key) : display, `${where(e.loc)}: ${e.message}`);
      return undefined;
    }
  }

  private async mergeBody(target: Obj, body: Stmt[], base: string[], f: FileCtx): Promise<void> {
    for (const s of body) {
      if (s.k !== 'include') this.options.origins?.set(originKey([...base, ...s.key]), where(s.loc));
      if (s.k === 'include') await this.include(target, base, s, f);
      else if (s.op === '+=') {
        // `a += x` is `a = ${?a} [x]`, the self-reference seeing a's earlier value.
        const full = [...base, ...s.key];
        const prev = this.prev(full, [], true, full, s.loc);
        const item = await this.convert(s.value, full, f);
        this.set(target, s.key, { k: 'concat', parts: [prev, { k: 'arr', items: [item] }] });
      } else if (s.value.length === 1 && s.value[0]!.k === 'obj') {
        await this.mergeBody(this.descend(target, s.key), s.value[0]!.body, [...base, ...s.key], f);
      } else {
        this.set(target, s.key, await this.convert(s.value, [...base, ...s.key], f));
      }
    }
  }

  private async include(target: Obj, base: string[], s: Extract<Stmt, { k: 'include' }>, f: FileCtx) {
    const at = base.length ? fmtPath(base) : f.display;
    const refuse = (why: string) => this.issue(at, `${where(s.loc)}: include "${s.target}" refused: ${why}`);
    if (f.overrides) return refuse('--set cannot include files');
    if (s.scheme === 'url' || s.scheme === 'classpath') return refuse(`${s.scheme}(…) includes are not allowed; name a file below the include root`);
    if (f.stack.length > HOCON_LIMITS.includeDepth) return refuse(`includes nest deeper than ${HOCON_LIMITS.includeDepth} (limit)`);
    const found = await resolveInclude(f.root, f.dir ?? '', s.target);
    const display = path.join(path.dirname(f.display), s.target);
    if ('refused' in found) return refuse(found.refused);
    if ('missing' in found) {
      // HOCON: a plain include of a missing file is ignored; `required(…)` makes it an error.
      if (s.required) this.missing.push(display);
      return;
    }
    if (this.isForbidden({ real: found.real, dev: -1n, ino: -1n })) return refuse(this.forbiddenReason);
    if (f.stack.includes(found.real)) return refuse('include cycle');
    if (++this.included > HOCON_LIMITS.includes)
      return this.limit(at, `${where(s.loc)}: include "${s.target}" refused: more than ${HOCON_LIMITS.includes} includes (limit)`);
    let read: Awaited<ReturnType<typeof readBounded>>;
    try {
      read = await readBounded(found.real, HOCON_LIMITS.fileBytes);
    } catch (e) {
      return refuse(`cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    // The opened file's identity: a hard link to a forbidden file has another path, not another inode.
    if (this.isForbidden(read.identity)) return refuse(this.forbiddenReason);
    if ('tooLarge' in read) return refuse(`larger than ${fmtBytes(HOCON_LIMITS.fileBytes)} (the limit for one file)`);
    this.options.files?.push(read.identity);
    if (!this.admit(read.text, at, Infinity)) return;
    const text = read.text;
    const body = this.parse(text, display, base);
    if (body) await this.mergeBody(target, body, base, { display, dir: path.dirname(found.file), root: f.root, prefix: base, stack: [...f.stack, found.real] });
  }

  /** One value as written at `full`; substitutions that point into `full` become self-references. */
  private async convert(parts: Part[], full: string[], f: FileCtx): Promise<Val> {
    const one = async (p: Part, alone: boolean): Promise<Val> => {
      switch (p.k) {
        case 'str':
          return { k: 'prim', v: alone && !p.quoted ? this.scalar(p.v, full) : p.v };
        case 'ws': // never alone or converted: concatenations keep white space as it is
          return { k: 'prim', v: p.v };
        case 'subst': {
          const abs = [...f.prefix, ...p.path];
          if (startsWith(abs, full)) {
            const self = this.prev(full, abs.slice(full.length), p.optional, full, p.loc);
            // Fixed up to the include point, a self-reference the include point does not define falls
            // back to the path as written, from the root (as every substitution of an included file does).
            if (f.prefix.length === 0 || startsWith(p.path, full)) return self;
            return { ...self, fallback: { k: 'subst', path: p.path, prefix: [], optional: p.optional, at: full, loc: p.loc } };
          }
          return { k: 'subst', path: p.path, prefix: f.prefix, optional: p.optional, at: full, loc: p.loc };
        }
        case 'obj': {
          const o = obj();
          await this.mergeBody(o, p.body, full, f);
          return o;
        }
        case 'arr': {
          const items: Val[] = [];
          for (const item of p.items) items.push(await this.convert(item, full, f));
          return { k: 'arr', items };
        }
      }
    };
    if (parts.length === 1) return one(parts[0]!, true);
    const out: (Val | { k: 'ws'; v: string })[] = [];
    for (const p of parts) out.push(p.k === 'ws' ? p : await one(p, false));
    return { k: 'concat', parts: out };
  }

  /** An unquoted value alone: true / false / null / a JSON number, else the text. */
  private scalar(v: string, at: string[]): Json {
    if (v === 'true' || v === 'false') return v === 'true';
    if (v === 'null') return null;
    if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(v)) return v;
    const n = Number(v);
    if (!Number.isFinite(n)) return (this.issue(fmtPath(at), `${clip(v, 40)} is out of the range of a number; quote it`), v);
    if (!/^-?\d+$/.test(v) || Number.isSafeInteger(n)) return n;
    // HOCON integers are 64-bit: beyond 2^53 a double would round, so they stay exact as bigint.
    const big = BigInt(v);
    if (big < INT64_MIN || big > INT64_MAX) this.issue(fmtPath(at), `${v} does not fit in a 64-bit integer; quote it`);
    return big;
  }

  /** The value at `full` right now, frozen: later statements must not change what a self-reference sees. */
  private prev(full: string[], rest: string[], optional: boolean, at: string[], loc: Loc): Extract<Val, { k: 'prev' }> {
    let node: Val | undefined = this.root;
    let i = 0;
    while (node?.k === 'obj' && i < full.length) node = node.fields.get(full[i++]!);
    return { k: 'prev', of: node && this.freeze(node, at), rest: [...full.slice(i), ...rest], optional, at, loc };
  }

  private set(target: Obj, key: string[], val: Val) {
    const parent = this.descend(target, key.slice(0, -1));
    const leaf = key.at(-1)!;
    parent.fields.set(leaf, this.layered(parent.fields.get(leaf), val, key));
  }

  /** The object at `key` below `target`, created (or layered over an unresolved value) as needed. */
  private descend(target: Obj, key: string[]): Obj {
    let o = target;
    for (const k of key) {
      const cur = o.fields.get(k);
      const last = cur?.k === 'merge' ? cur.layers.at(-1) : cur;
      if (last?.k === 'obj') o = last;
      else {
        const next = obj();
        o.fields.set(k, this.layered(cur, next, key));
        o = next;
      }
    }
    return o;
  }

  // -------------------------------------------------------------------------------------------------
  // Resolution: each value once (memoised), cycles detected, problems collected.

  private resolve(node: Val, at: string[]): Res | typeof CYCLE {
    if (this.memo.has(node)) return this.memo.get(node);
    if (this.active.has(node)) return CYCLE;
    // Resolution recurses along substitution chains: bound it before the stack is.
    if (this.active.size >= HOCON_LIMITS.substitutionDepth)
      return this.limit(fmtPath(at), `substitutions depend on each other more than ${HOCON_LIMITS.substitutionDepth} levels deep (limit)`);
    this.active.add(node);
    const r = this.compute(node, at);
    this.active.delete(node);
    this.memo.set(node, r);
    return r;
  }

  /** A resolved value where only a lookup could have closed a cycle: report it here if one did. */
  private get(node: Val, at: string[]): Res {
    const r = this.resolve(node, at);
    return r === CYCLE ? this.issue(fmtPath(at), 'substitution cycle') : r;
  }

  private compute(node: Val, at: string[]): Res {
    switch (node.k) {
      case 'prim':
        return node.v;
      case 'obj': {
        const out: Record<string, Json> = {};
        let failed = false;
        for (const [k, child] of node.fields) {
          const r = this.get(child, [...at, k]);
          if (r === FAILED) failed = true;
          else if (r !== undefined) put(out, k, r);
        }
        return failed ? FAILED : this.made(out, at);
      }
      case 'arr': {
        const rs = node.items.map((item) => this.get(item, at));
        return rs.includes(FAILED) ? FAILED : this.made(rs.filter((r) => r !== undefined) as Json[], at);
      }
      case 'merge': {
        let acc: Json | undefined;
        let failed = false;
        for (const layer of node.layers) {
          const r = this.get(layer, at);
          if (r === FAILED) failed = true;
          else if (r !== undefined) acc = isObject(acc) && isObject(r) ? this.deepMerge(acc, r) : r;
        }
        return failed ? FAILED : acc === undefined ? undefined : this.made(acc, at);
      }
      case 'concat':
        return this.concat(node.parts, at);
      case 'subst':
        return this.substitute(node);
      case 'prev': {
        const base = node.of && this.resolve(node.of, node.at);
        if (base === CYCLE) return this.cycle(node.at, node.loc);
        if (base === FAILED) return FAILED;
        const v = dig(base, node.rest);
        if (v !== NOT_FOUND) return v;
        if (node.fallback) return this.substitute(node.fallback);
        if (node.optional) return undefined;
        return this.issue(fmtPath(node.at), `${where(node.loc)}: \${${fmtPath([...node.at, ...node.rest])}} refers to itself but has no earlier value`);
      }
    }
  }

  private concat(parts: (Val | { k: 'ws'; v: string })[], at: string[]): Res {
    const rs = parts.map((p) => (p.k === 'ws' ? { ws: p.v } : { v: this.get(p, at) }));
    if (rs.some((r) => 'v' in r && r.v === FAILED)) return FAILED;
    const values = rs.flatMap((r) => ('v' in r && r.v !== undefined ? [r.v as Json] : []));
    if (values.length === 0) return undefined;
    const kinds = new Set(values.map((v) => (Array.isArray(v) ? 'a list' : isObject(v) ? 'an object' : 'a simple value')));
    if (kinds.size > 1) return this.issue(fmtPath(at), `cannot concatenate ${[...kinds].join(' and ')}`);
    if (kinds.has('a list')) {
      // Charged before it is built: a self-concatenation doubling a list must stop at the limit, not after.
      const length = (values as Json[][]).reduce((n, v) => n + v.length, 0);
      if (!this.copy(length, 0, at)) return FAILED;
      return this.made((values as Json[][]).flat(1), at);
    }
    if (kinds.has('an object'))
      return this.made(
        (values as Record<string, Json>[]).reduce((a, b) => this.deepMerge(a, b)),
        at,
      );
    // A substitution resolving to null concatenates as "" (the spec); literal text is already a string.
    const texts = rs.map((r): string => ('ws' in r ? (r.ws ?? '') : r.v === undefined || r.v === null ? '' : String(r.v)));
    const length = texts.reduce((n, t) => n + t.length, 0);
    if (length > HOCON_LIMITS.stringChars) return this.limit(fmtPath(at), `value longer than ${HOCON_LIMITS.stringChars} characters (limit)`);
    return this.copy(0, length, at) ? texts.join('') : FAILED;
  }

  /**
   * A new object or array (or a merge result): its shape from its children's, checked against the
   * depth, size and character limits, its direct children charged as copied.
   */
  private made(v: Json, at: string[]): Res {
    if (typeof v !== 'object' || v === null || this.shapes.has(v)) return v;
    const children = Array.isArray(v) ? v : Object.values(v);
    const shape: Shape = { n: 1, d: 1, c: 0 };
    for (const child of children) {
      const s = this.shapeOf(child);
      shape.n += s.n;
      shape.c += s.c;
      if (s.d + 1 > shape.d) shape.d = s.d + 1;
    }
    this.shapes.set(v, shape);
    if (!this.copy(children.length, 0, at)) return FAILED;
    if (shape.d > HOCON_LIMITS.depth + 1) return this.limit(fmtPath(at), `resolves to values nested deeper than ${HOCON_LIMITS.depth} levels (limit)`);
    if (shape.n > HOCON_LIMITS.nodes) return this.limit(fmtPath(at), `resolves to more than ${HOCON_LIMITS.nodes} values (limit; substitutions expanding?)`);
    if (shape.c > HOCON_LIMITS.resolvedChars)
      return this.limit(fmtPath(at), `resolves to more than ${HOCON_LIMITS.resolvedChars} characters of strings (limit; substitutions expanding?)`);
    return v;
  }

  private shapeOf(v: Json): Shape {
    if (typeof v === 'string') return { n: 1, d: 0, c: v.length };
    if (typeof v !== 'object' || v === null) return { n: 1, d: 0, c: 0 };
    const known = this.shapes.get(v);
    if (known) return known;
    this.made(v, []); // not reached: every object and array is made by this loader
    return this.shapes.get(v)!;
  }

  /** Charges copied values and characters; false (reported once) past the expansion limit. */
  private copy(values: number, chars: number, at: string[]): boolean {
    if (this.exhausted) return false;
    this.copiedValues += values;
    this.copiedChars += chars;
    if (this.copiedValues <= HOCON_LIMITS.expansionValues && this.copiedChars <= HOCON_LIMITS.expansionChars) return true;
    this.limit(
      fmtPath(at),
      `substitutions, merges and concatenations copy more than ${HOCON_LIMITS.expansionValues} values or ${HOCON_LIMITS.expansionChars} characters (limit; a self-concatenation growing?)`,
    );
    return false;
  }

  /** A resource limit: the first one is the error, what fails because of it is not reported again. */
  private limit(p: string, message: string): typeof FAILED {
    if (this.exhausted) return FAILED;
    this.exhausted = true;
    return this.issue(p, message);
  }

  /** HOCON object merge: fields of `b` win, objects on both sides merge. Results are made (shaped). */
  private deepMerge(a: Record<string, Json>, b: Record<string, Json>): Record<string, Json> {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(a)) put(out, k, v);
    for (const [k, v] of Object.entries(b)) {
      const old = Object.hasOwn(out, k) ? out[k] : undefined;
      put(out, k, isObject(old) && isObject(v) ? this.deepMerge(old, v) : v);
    }
    this.made(out, []);
    return out;
  }

  /**
   * A new value over an existing one: lists and scalars replace; anything unresolved may still merge.
   * Each layering copies the earlier layers (a self-reference keeps the old list): charged, so a key
   * assigned thousands of times over itself stops at the expansion limit instead of growing quadratically.
   */
  private layered(existing: Val | undefined, val: Val, at: string[]): Val {
    if (existing === undefined || val.k === 'prim' || val.k === 'arr') return val;
    if (val.k === 'obj' && (existing.k === 'prim' || existing.k === 'arr')) return val;
    // An unset `${?x}` keeps the earlier value, and a substitution may turn out to be an object: layer.
    const layers = existing.k === 'merge' ? existing.layers : [existing];
    if (!this.copy(layers.length, 0, at)) return val;
    return { k: 'merge', layers: [...layers, val] };
  }

  /** Objects (and the object layers of a merge) are the only values changed in place: copy them. */
  private freeze(v: Val, at: string[]): Val {
    if (this.exhausted) return v; // failing anyway: copy nothing more
    if (v.k === 'obj') {
      if (!this.copy(v.fields.size, 0, at)) return v;
      return { k: 'obj', fields: new Map([...v.fields].map(([k, c]) => [k, this.freeze(c, at)])) };
    }
    if (v.k === 'merge') return { k: 'merge', layers: v.layers.map((l) => this.freeze(l, at)) };
    return v;
  }

  private substitute(s: Extract<Val, { k: 'subst' }>): Res {
    const ref = `\${${s.optional ? '?' : ''}${fmtPath(s.path)}}`;
    for (const p of s.prefix.length ? [[...s.prefix, ...s.path], s.path] : [s.path]) {
      const v = this.lookup(p);
      if (v === CYCLE) return this.cycle(s.at, s.loc);
      if (v !== NOT_FOUND) return v;
    }
    // Not in the config: HOCON falls back to the environment, which we only read for allowed names.
    const name = s.path.join('.');
    if (this.allowed(name)) {
      // An own key only: `process.env` answers `constructor` and `toString` from its prototype.
      const v = Object.hasOwn(this.env, name) ? this.env[name] : undefined;
      if (typeof v === 'string') {
        const reads = this.options.envReads;
        if (reads) reads.set(name, [...(reads.get(name) ?? []), fmtPath(s.at)]);
        return v;
      }
    } else if (/^[A-Z_][A-Z0-9_]*$/.test(name)) {
      const why = isSecretLikeName(name)
        ? ' (a name for credentials: secrets are references, never substituted)'
        : this.options.envHint
          ? ` (${this.options.envHint})`
          : '';
      return this.issue(fmtPath(s.at), `${where(s.loc)}: ${ref} reads environment variable ${name}, which configs may not read${why}`);
    }
    if (s.optional) return undefined;
    return this.issue(fmtPath(s.at), `${where(s.loc)}: ${ref} is not defined in the config${this.allowed(name) ? ' or the environment' : ''}`);
  }

  /** The resolved value at an absolute path of the merged config. */
  private lookup(p: string[]): Res | typeof CYCLE | typeof NOT_FOUND {
    let node: Val | undefined = this.root;
    for (let i = 0; i < p.length; i++) {
      if (node === undefined) return NOT_FOUND;
      if (node.k !== 'obj') {
        const v = this.resolve(node, p.slice(0, i));
        return typeof v === 'symbol' ? v : dig(v, p.slice(i));
      }
      node = node.fields.get(p[i]!);
    }
    if (node === undefined) return NOT_FOUND;
    const v = this.resolve(node, p);
    return v === undefined ? NOT_FOUND : v; // an unset optional value lets the environment answer
  }

  private cycle(at: string[], loc: Loc): typeof FAILED {
    return this.issue(fmtPath(at), `${where(loc)}: substitution cycle`);
  }

  /** One problem. Clipped and capped: a hostile config gets a readable error, not megabytes of it. */
  private issue(p: string, message: string): typeof FAILED {
    if (this.issues.length < MAX_ISSUES) this.issues.push({ path: clip(p, 300), message: clip(message, 1000) });
    else if (this.issues.length === MAX_ISSUES) this.issues.push({ path: '', message: `more problems not shown (only the first ${MAX_ISSUES} are reported)` });
    return FAILED;
  }
}

const MAX_ISSUES = 100;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function obj(): Obj {
  return { k: 'obj', fields: new Map() };
}

/** A new value over an existing one: lists and scalars replace; anything unresolved may still merge. */

function dig(v: Json | undefined, rest: string[]): Json | undefined | typeof NOT_FOUND {
  for (const k of rest) {
    if (!isObject(v) || !Object.hasOwn(v, k)) return NOT_FOUND;
    v = v[k];
  }
  return v === undefined ? NOT_FOUND : v;
}

/** Own data property even for `__proto__`, so no key can reach a prototype. */
function put(o: Record<string, Json>, k: string, v: Json) {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function startsWith(p: string[], prefix: string[]): boolean {
  return prefix.length <= p.length && prefix.every((k, i) => p[i] === k);
}

/** A deep copy, as deep as the depth limit allows. */
function clone(v: Json): Json {
  if (Array.isArray(v)) return v.map(clone);
  if (!isObject(v)) return v;
  const out: Record<string, Json> = {};
  for (const [k, c] of Object.entries(v)) put(out, k, clone(c));
  return out;
}

function fmtPath(p: string[]): string {
  return p.map((k) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k))).join('.');
}

function where(loc: Loc): string {
  return `${loc.file}:${loc.line}:${loc.col}`;
}
