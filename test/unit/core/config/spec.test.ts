import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseHocon } from '../../../../src/core/config/hocon.js';
import { ConfigError } from '../../../../src/core/errors.js';

/**
 * Cases written from the HOCON specification (lightbend/config, HOCON.md), section by section, and
 * from its reference implementation where the text leaves a rule implicit (new lines between a key
 * and its value). The deliberate refusals (code, URLs, absolute includes, environment) are tested
 * in hocon.test.ts.
 */

const parse = (text: string) => parseHocon([{ text, file: 'spec.conf' }]);
async function invalid(text: string): Promise<string[]> {
  const e = await parse(text).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, `expected ${JSON.stringify(text)} to be invalid`).toBeInstanceOf(ConfigError);
  expect((e as ConfigError).exitCode).toBe(78);
  return (e as ConfigError).issues.map((i) => i.message);
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hocon-spec-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
async function parseWith(files: Record<string, string>, main: string) {
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  const file = path.join(dir, main);
  return parseHocon([{ file, text: files[main]! }]);
}

describe('HOCON spec: separators, new lines and commas', () => {
  it('allows new lines between a key and its "{", its separator, and between the separator and the value', async () => {
    expect(await parse('a\n{ b = 1 }')).toEqual({ a: { b: 1 } });
    expect(await parse('a\n\n  {\n b = 1\n}\nc = 2')).toEqual({ a: { b: 1 }, c: 2 });
    expect(await parse('a\n= 1\nb\n: 2')).toEqual({ a: 1, b: 2 });
    expect(await parse('a =\n  1\nb :\n\n "two"\nc =\n{ d = 3 }\ne = \n [4]')).toEqual({ a: 1, b: 'two', c: { d: 3 }, e: [4] });
    expect(await parse('a # comment\n  # more\n  { b = 1 }')).toEqual({ a: { b: 1 } });
    expect(await parse('list +=\n 1')).toEqual({ list: [1] });
  });

  it('still needs a separator or "{" after a key, and a value after a separator', async () => {
    expect(await invalid('a\nb = 1')).toEqual([expect.stringContaining('expected "=", ":" or "{" after the key, found "b"')]);
    expect(await invalid('a =\n}')).toEqual([expect.stringContaining('expected a value, found "}"')]);
    expect(await invalid('a =')).toEqual([expect.stringContaining('expected a value')]);
  });

  it('may omit ":" or "=" before "{" ("foo" {} is "foo" : {})', async () => {
    expect(await parse('"foo" {}')).toEqual({ foo: {} });
  });

  it('follows the comma rules of the spec for arrays and objects', async () => {
    expect(await parse('a = [1,2,3,]\nb = [1\n2\n3]\nc = [1,2,3]')).toEqual({ a: [1, 2, 3], b: [1, 2, 3], c: [1, 2, 3] });
    expect(await parse('o { x = 1, y = 2, }\np { x = 1\ny = 2 }')).toEqual({ o: { x: 1, y: 2 }, p: { x: 1, y: 2 } });
    for (const bad of ['a = [1,2,3,,]', 'a = [,1,2,3]', 'a = [1,,2,3]', 'o { x = 1,, y = 2 }', 'o { , x = 1 }']) await invalid(bad);
  });

  it('treats Unicode space separators (a non-breaking space) as white space', async () => {
    expect(await parse('a\u00a0=\u00a01\nb\u2007=\u2007x\u202fy')).toEqual({ a: 1, b: 'x\u202fy' });
  });

  it('accepts root braces only balanced', async () => {
    expect(await parse('{ a = 1 }')).toEqual({ a: 1 });
    await invalid('a = 1 }');
    await invalid('{ a = 1');
  });
});

describe('HOCON spec: comments, duplicate keys, unquoted strings', () => {
  it('ignores // and # comments, but not inside quoted strings', async () => {
    expect(await parse('a = "x // not # a comment" // comment\nb = 1 # comment')).toEqual({ a: 'x // not # a comment', b: 1 });
  });

  it('merges duplicate objects, and an intermediate non-object stops the merge', async () => {
    expect(await parse('{ "foo" : { "a" : 42 }, "foo" : { "b" : 43 } }')).toEqual({ foo: { a: 42, b: 43 } });
    expect(await parse('{ "foo" : { "a" : 42 }, "foo" : null, "foo" : { "b" : 43 } }')).toEqual({ foo: { b: 43 } });
  });

  it('parses initial true/false/null/numbers as such, and embedded ones as part of the string', async () => {
    expect(await parse('a = truefoo\nb = footrue\nc = 10.0bar\nd = bar10.0\ne = true\nf = 10.0')).toEqual({
      a: 'truefoo',
      b: 'footrue',
      c: '10.0bar',
      d: 'bar10.0',
      e: true,
      f: 10,
    });
  });

  it('takes `include` as a plain string where it is not the start of a key', async () => {
    expect(await parse('{ foo include : 42 }')).toEqual({ 'foo include': 42 });
    expect(await parse('foo : include\nl = [ include ]\n"include" = 42')).toEqual({ foo: 'include', l: ['include'], include: 42 });
  });
});

describe('HOCON spec: value concatenation and path expressions', () => {
  it('keeps inner white space, trims the outer, and keeps a single value typed', async () => {
    expect(await parse('a =  foo bar  baz  \nb = "foo bar baz"\nc = true foo\nd = true')).toEqual({
      a: 'foo bar  baz',
      b: 'foo bar baz',
      c: 'true foo',
      d: true,
    });
  });

  it('renders numbers in a concatenation as written', async () => {
    expect(await parse('a = 1e5 x\nb = 1.50 y\nc = 007')).toEqual({ a: '1e5 x', b: '1.50 y', c: '007' });
  });

  it('concatenates a substitution that is null as the empty string', async () => {
    expect(await parse('n = null\na = ${n}x\nb = "<"${n}">"')).toEqual({ n: null, a: 'x', b: '<>' });
  });

  it('refuses arrays or objects in a string concatenation', async () => {
    expect(await invalid('a = [1]\nb = x ${a}')).toEqual([expect.stringContaining('cannot concatenate')]);
  });

  it('splits paths on unquoted dots only, numbers included', async () => {
    expect(await parse('foo.bar."hello.world" = 1')).toEqual({ foo: { bar: { 'hello.world': 1 } } });
    expect(await parse('10.0foo = 1\nfoo10.0 = 2\nfoo"10.0" = 3')).toEqual({ '10': { '0foo': 1 }, foo10: { '0': 2 }, 'foo10.0': 3 });
    expect(await parse('a."".b = 1')).toEqual({ a: { '': { b: 1 } } });
    expect(await parse('true : 42\na b c : 43')).toEqual({ true: 42, 'a b c': 43 });
  });

  it('refuses empty path elements that are not quoted', async () => {
    for (const bad of ['a..b = 1', '.a = 1', 'a. = 1', 'x = ${a..b}']) expect((await invalid(bad))[0]).toContain('empty segment');
  });
});

describe('HOCON spec: substitutions', () => {
  it('lets an object refer to paths within itself', async () => {
    expect(await parse('bar : { foo : 42,\n baz : ${bar.foo}\n }')).toEqual({ bar: { foo: 42, baz: 42 } });
  });

  it('concatenates substitutions with unquoted and quoted text', async () => {
    const text = 'animal.favorite = cat\na : ${animal.favorite} is my favorite animal\nb : ${animal.favorite}" is my favorite animal"';
    expect(await parse(text)).toEqual({ animal: { favorite: 'cat' }, a: 'cat is my favorite animal', b: 'cat is my favorite animal' });
  });

  it('sees the latest assignment, forwards too, and leaves out undefined optional ones', async () => {
    expect(await parse('a = ${b}\nb = 1\nb = 2\nc = [1, ${?nope}, 2]\nd = ${?nope}')).toEqual({ a: 2, b: 2, c: [1, 2] });
  });

  it('does not parse substitutions inside quoted strings', async () => {
    expect(await parse('a = "${b}"')).toEqual({ a: '${b}' });
  });

  it('reports circular substitutions', async () => {
    expect((await invalid('a = ${b}\nb = ${c}\nc = ${a}')).join()).toContain('substitution cycle');
  });
});

describe('HOCON spec: includes', () => {
  it('fixes up substitutions in an included file to the include point ({ a : { include "foo.conf" } })', async () => {
    const files = { 'foo.conf': '{ x : 10, y : ${x} }', 'main.conf': '{ a : { include "foo.conf" } }' };
    expect(await parseWith(files, 'main.conf')).toEqual({ a: { x: 10, y: 10 } });
  });

  it('resolves the fixed-up substitution after the whole config is parsed (a later a.x wins)', async () => {
    const files = { 'foo.conf': '{ x : 10, y : ${x} }', 'main2.conf': '{\n a : { include "foo.conf" }\n a : { x : 42 }\n}' };
    expect(await parseWith(files, 'main2.conf')).toEqual({ a: { x: 42, y: 42 } });
  });

  it('fixes up substitutions through nested includes, self-references and +=', async () => {
    const files = {
      'inner.conf': 'tags += inner\npath = ${path}":/inner"\nref = ${name}',
      'outer.conf': 'name = outer\ntags = [outer]\npath = /outer\nnested { include "inner.conf", name = nested, tags = [n], path = /n }',
      'main3.conf': 'top { include "outer.conf" }',
    };
    expect(await parseWith(files, 'main3.conf')).toEqual({
      top: { name: 'outer', tags: ['outer'], path: '/outer', nested: { tags: ['n'], path: '/n', ref: 'nested', name: 'nested' } },
    });
  });

  it('falls back to the root for a substitution the include point does not define, self-references too', async () => {
    const files = {
      'uses-root.conf': 'r = ${region}\npath = ${path}":/t"\nopt = ${?opt}',
      'main4.conf': 'region = eu\npath = /root\nt { include "uses-root.conf" }',
    };
    expect(await parseWith(files, 'main4.conf')).toEqual({ region: 'eu', path: '/root', t: { r: 'eu', path: '/root:/t' } });
  });

  it('lets the including file override keys of an earlier include, and an include override earlier keys', async () => {
    const files = { 'base.conf': 'a = 1\nb { x = 1 }', 'main5.conf': 'a = 0\nb { y = 2 }\ninclude "base.conf"\nb.x = 3' };
    expect(await parseWith(files, 'main5.conf')).toEqual({ a: 1, b: { y: 2, x: 3 } });
  });

  it('allows new lines between include and its file name', async () => {
    const files = { 'nl.conf': 'v = 1', 'main6.conf': 'include\n  "nl.conf"' };
    expect(await parseWith(files, 'main6.conf')).toEqual({ v: 1 });
  });

  it('refuses an included file whose root is an array', async () => {
    await writeFile(path.join(dir, 'array.conf'), '[1, 2]');
    const e = await parseHocon([{ file: path.join(dir, 'main7.conf'), text: 'include "array.conf"' }]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).issues[0]!.message).toContain('must be an object, not an array');
  });
});

describe('HOCON spec: numbers are JSON numbers, integers 64-bit', () => {
  it('reads every JSON number form', async () => {
    expect(await parse('a = 1e5\nb = 1E+5\nc = -1.5e-3\nd = 0\ne = -0.25')).toEqual({ a: 100000, b: 100000, c: -0.0015, d: 0, e: -0.25 });
  });

  it('keeps integers beyond 2^53 exact, up to the 64-bit range, as bigint', async () => {
    const out = await parse(
      'max = 9223372036854775807\nmin = -9223372036854775808\nodd = 9007199254740993\nsafe = 9007199254740991\ncopy = ${odd}\ntext = ${max}" rows"\nas-written = 9007199254740993 x',
    );
    expect(out).toEqual({
      max: 9223372036854775807n,
      min: -9223372036854775808n,
      odd: 9007199254740993n,
      safe: 9007199254740991,
      copy: 9007199254740993n,
      text: '9223372036854775807 rows',
      'as-written': '9007199254740993 x',
    });
  });

  it('refuses an integer beyond 64 bits and a number beyond a double, with the path', async () => {
    expect(await invalid('a.b = 9223372036854775808')).toEqual(['9223372036854775808 does not fit in a 64-bit integer; quote it']);
    expect(await invalid('c = 1e400')).toEqual(['1e400 is out of the range of a number; quote it']);
  });
});
