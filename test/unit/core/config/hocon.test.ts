import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, InputMissingError } from '../../../../src/core/errors.js';
import { type HoconOptions, type HoconSource, parseHocon, readHoconFile } from '../../../../src/core/config/hocon.js';

let tmp: string; // <tmp>/root is the include root; <tmp>/outside is not
let root: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'hocon-test-'));
  root = path.join(tmp, 'root');
  await mkdir(path.join(root, 'common', 'deeper'), { recursive: true });
  await mkdir(path.join(tmp, 'outside'));
  await write('outside/secret.conf', 'stolen = yes');
  await write('root/common/base.conf', 'job { name = base, retries = 1 }\ninclude "deeper/nested.conf"');
  await write('root/common/deeper/nested.conf', 'nested { ok = true, tags = [a] }');
});

afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function write(rel: string, text: string): Promise<string> {
  const file = path.join(tmp, rel);
  await writeFile(file, text);
  return file;
}

/** Parse `text` as the file `root/<name>`, written to disk so includes resolve next to it. */
async function parseFile(name: string, text: string, options: HoconOptions = {}) {
  const file = await write(`root/${name}`, text);
  return parseHocon([{ file, text }], options);
}

async function failure(p: Promise<unknown>): Promise<ConfigError | InputMissingError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof ConfigError) && !(e instanceof InputMissingError)) throw new Error(`expected a config or input error, got ${String(e)}`);
  return e;
}

async function configIssues(p: Promise<unknown>) {
  const e = await failure(p);
  expect(e).toBeInstanceOf(ConfigError);
  expect(e.exitCode).toBe(78);
  return (e as ConfigError).issues;
}

describe('parseHocon: values and merging', () => {
  it('gives plain JSON: nested dotted keys, arrays, typed scalars, key order kept', async () => {
    const text = [
      'zeta = 1',
      'a.b.c = 10',
      'a.b.d = "10"',
      'flags = [true, false, null]',
      'ratio = 1.5',
      'date = 2026-07-05',
      'words = ten  past  nine',
      '"quoted.key" = x  // comment',
      '# comment',
      'alpha { x = """multi',
      '"line" """ }',
    ].join('\n');
    const out = await parseHocon([{ text }]);
    expect(out).toEqual({
      zeta: 1,
      a: { b: { c: 10, d: '10' } },
      flags: [true, false, null],
      ratio: 1.5,
      date: '2026-07-05',
      words: 'ten  past  nine',
      'quoted.key': 'x',
      alpha: { x: 'multi\n"line" ' },
    });
    expect(Object.keys(out)).toEqual(['zeta', 'a', 'flags', 'ratio', 'date', 'words', 'quoted.key', 'alpha']);
  });

  it('accepts a BOM, CRLF line ends and a braced root', async () => {
    expect(await parseHocon([{ text: '\ufeff{\r\n  a = 1\r\n  b = "x"\r\n}\r\n' }])).toEqual({ a: 1, b: 'x' });
  });

  it('merges sources left to right: objects merge, later scalars win', async () => {
    const sources: HoconSource[] = [
      { text: 'job { name = base, spark { conf { a = 1, b = 2 } } }\nlist = [1, 2]' },
      { text: 'job.spark.conf.b = 20\njob { owner = acme }\nlist = [3]' },
    ];
    expect(await parseHocon(sources)).toEqual({
      job: { name: 'base', spark: { conf: { a: 1, b: 20 } }, owner: 'acme' },
      list: [3],
    });
  });

  it('resolves substitutions against the merged whole, forwards and across sources', async () => {
    const sources: HoconSource[] = [
      { text: 'table = ${tenant}"_events"\ncopy = ${defaults}\ndefaults { mode = append }' },
      { text: 'tenant = acme\ndefaults.partitions = 4' },
    ];
    expect(await parseHocon(sources)).toEqual({
      table: 'acme_events',
      copy: { mode: 'append', partitions: 4 },
      defaults: { mode: 'append', partitions: 4 },
      tenant: 'acme',
    });
  });

  it('supports += and self references (the value before the assignment)', async () => {
    const text = [
      'path = "/bin"',
      'path = ${path}":/usr/bin"',
      'tags = [a]',
      'tags += b',
      'fresh += x',
      'opts { a = 1 }',
      'opts = ${opts} { b = 2 }',
      'port = 7077',
      'port = ${?nowhere}',
    ].join('\n');
    expect(await parseHocon([{ text }])).toEqual({
      path: '/bin:/usr/bin',
      tags: ['a', 'b'],
      fresh: ['x'],
      opts: { a: 1, b: 2 },
      port: 7077,
    });
  });

  it('reports a substitution cycle and an undefined ${X} with their paths', async () => {
    const issues = await configIssues(parseHocon([{ text: 'a = ${b}\nb = ${a}\nc { d = ${nowhere.to.be.found} }' }]));
    expect(issues).toEqual([
      expect.objectContaining({ path: 'b', message: expect.stringContaining('substitution cycle') }),
      expect.objectContaining({ path: 'c.d', message: expect.stringContaining('${nowhere.to.be.found} is not defined') }),
    ]);
  });

  it('keeps __proto__ and JavaScript-looking keys as plain data', async () => {
    const marker = path.join(tmp, 'key-marker');
    const js = `process.getBuiltinModule('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`;
    const key = JSON.stringify(`{${js}}`); // the shape that @pushcorn/hocon-parser compiles into a Function
    const text = `"__proto__" { polluted = 1 }\n${key} = 2\nb = \${?${key}}`;
    const out = await parseHocon([{ text }]);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(out[`{${js}}`]).toBe(2);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('parseHocon: environment', () => {
  const allow =
    (...names: string[]) =>
    (n: string) =>
      names.includes(n);

  it('reads no variable at all by default', async () => {
    const env = { LAKEHOUSE_X: 'x', REGION: 'eu' };
    const issues = await configIssues(parseHocon([{ text: 'a = ${?LAKEHOUSE_X}\nb = ${REGION}' }], { env }));
    expect(issues.map((i) => i.path)).toEqual(['a', 'b']);
    for (const i of issues) expect(i.message).toContain('which configs may not read');
  });

  it('resolves allowed variables from options.env only, never from process.env', async () => {
    process.env.LAKEHOUSE_FROM_PROCESS = 'leaked';
    try {
      const text = 'a = ${?LAKEHOUSE_X}\nb = ${?LAKEHOUSE_FROM_PROCESS}\nregion = ${REGION}\nport = ${LAKEHOUSE_PORT}';
      const env = { LAKEHOUSE_X: 'from-options', REGION: 'eu-west-1', LAKEHOUSE_PORT: '7077' };
      const envAllowList = allow('LAKEHOUSE_X', 'LAKEHOUSE_FROM_PROCESS', 'REGION', 'LAKEHOUSE_PORT');
      expect(await parseHocon([{ text }], { env, envAllowList })).toEqual({ a: 'from-options', region: 'eu-west-1', port: '7077' });
    } finally {
      delete process.env.LAKEHOUSE_FROM_PROCESS;
    }
  });

  it('rejects a variable outside the allow-list, naming it, where it is used and the hint, without its value', async () => {
    const env = { HOME: '/home/very-private' };
    const e = await failure(parseHocon([{ text: 'a { home = ${?HOME} }', file: 'job.conf' }], { env, envHint: 'allow it in config-env.allow' }));
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).issues).toEqual([
      { path: 'a.home', message: 'job.conf:1:12: ${?HOME} reads environment variable HOME, which configs may not read (allow it in config-env.allow)' },
    ]);
    expect(e.message).not.toContain('very-private');
  });

  it('never reads SPARK_REMOTE or a name for credentials, even when allowed', async () => {
    const env = {
      SPARK_REMOTE: 'sc://spark:15002/;token=tok-remote-1',
      LAKEHOUSE_SPARK_TOKEN: 'tok-123456',
      DB_PASSWORD: 'pw-1',
      AWS_SECRET_ACCESS_KEY: 'aws-s3cr3t',
      API_KEY: 'api-k3y',
    };
    const names = Object.keys(env);
    const text = names.map((n, i) => `v${i} = \${?${n}}`).join('\n');
    const e = await failure(parseHocon([{ text }], { env, envAllowList: () => true }));
    expect((e as ConfigError).issues.map((i) => i.path)).toEqual(names.map((_, i) => `v${i}`));
    for (const i of (e as ConfigError).issues) expect(i.message).toContain('a name for credentials');
    for (const v of Object.values(env)) expect(e.message).not.toContain(v);
  });

  it('reports an unset required variable', async () => {
    const issues = await configIssues(parseHocon([{ text: 'x = ${LAKEHOUSE_MISSING}' }], { env: {}, envAllowList: allow('LAKEHOUSE_MISSING') }));
    expect(issues).toEqual([{ path: 'x', message: '<source 1>:1:5: ${LAKEHOUSE_MISSING} is not defined in the config or the environment' }]);
  });

  it('lets a config value set to null hide the environment (the spec)', async () => {
    const out = await parseHocon([{ text: 'REGION = null\nr = ${REGION}' }], { env: { REGION: 'eu' }, envAllowList: allow('REGION') });
    expect(out).toEqual({ REGION: null, r: null });
  });
});

describe('parseHocon: includes', () => {
  it('includes relative files, nested includes and required(), merged at the include point', async () => {
    const text = ['include "common/base.conf"', 'job.retries = 3', 'tenant { include required(file("common/deeper/nested.conf")) }', 'nested.tags += b'].join(
      '\n',
    );
    expect(await parseFile('main.conf', text)).toEqual({
      job: { name: 'base', retries: 3 },
      nested: { ok: true, tags: ['a', 'b'] },
      tenant: { nested: { ok: true, tags: ['a'] } },
    });
  });

  it('resolves substitutions in an included file relative to the include point, then from the root', async () => {
    await write('root/common/sub.conf', 'full = ${name}"@"${region}');
    const out = await parseFile('sub-main.conf', 'region = eu\ntenant { name = acme, include "common/sub.conf" }');
    expect(out).toEqual({ region: 'eu', tenant: { name: 'acme', full: 'acme@eu' } });
  });

  it('ignores a missing plain include (HOCON) but a missing required one is InputMissingError (66)', async () => {
    expect(await parseFile('opt.conf', 'include "nope.conf"\na = 1')).toEqual({ a: 1 });
    const e = await failure(parseFile('req.conf', 'a = 1\ninclude required("common/nope.conf")'));
    expect(e).toBeInstanceOf(InputMissingError);
    expect(e.exitCode).toBe(66);
    expect(e.message).toContain(path.join(root, 'common', 'nope.conf'));
  });

  it('rejects url(), http paths and classpath() without any network attempt', async () => {
    let connections = 0;
    const server: Server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const text = [
        'include url("http://127.0.0.1:1/x")',
        `include url("http://127.0.0.1:${port}/x.conf")`,
        `include required("http://127.0.0.1:${port}/y.conf")`,
        'include classpath("reference.conf")',
      ].join('\n');
      const issues = await configIssues(parseFile('net.conf', text));
      expect(issues).toHaveLength(4);
      for (const i of issues) expect(i.message).toMatch(/refused: (url|classpath)\(…\) includes are not allowed|refused: URLs cannot be included/);
      expect(issues[0]!.path).toBe(path.join(root, 'net.conf'));
      expect(connections).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('rejects a .js include and never runs it', async () => {
    const marker = path.join(tmp, 'js-marker');
    await write('root/evil.js', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran'); module.exports = { a: 1 };`);
    await write('root/evil.mjs', `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(marker)}, 'ran');`);
    const text = 'include "evil.js"\ninclude required(file("evil.js"))\ninclude "evil.mjs"\nx { include "evil" }';
    const issues = await configIssues(parseFile('js.conf', text));
    expect(issues).toHaveLength(4);
    for (const i of issues) expect(i.message).toContain('only .conf and .json files can be included');
    expect(existsSync(marker)).toBe(false);
  });

  it('includes .json files as HOCON', async () => {
    await write('root/common/data.json', '{ "tables": ["a", "b"], "n": 2 }');
    expect(await parseFile('json.conf', 'data { include "common/data.json" }')).toEqual({ data: { tables: ['a', 'b'], n: 2 } });
  });

  it('rejects path traversal and absolute paths, even to files that exist', async () => {
    const secret = path.join(tmp, 'outside', 'secret.conf');
    const text = [
      'include "../outside/secret.conf"',
      'include "common/../../outside/secret.conf"',
      `include "${secret}"`,
      `include file("file://${secret}")`,
    ].join('\n');
    const issues = await configIssues(parseFile('trav.conf', text));
    expect(issues.map((i) => i.message.replace(/.*refused: /, ''))).toEqual([
      'the file is outside the include root',
      'the file is outside the include root',
      'absolute paths cannot be included; use a path relative to this file',
      'URLs cannot be included; name a file below the include root',
    ]);
  });

  it('rejects a symlink that leads outside the root, but follows one that stays inside', async () => {
    await symlink(path.join(tmp, 'outside', 'secret.conf'), path.join(root, 'escape.conf'));
    await symlink(path.join(tmp, 'outside'), path.join(root, 'outlink'));
    await symlink(path.join(root, 'common', 'deeper', 'nested.conf'), path.join(root, 'inside.conf'));
    const issues = await configIssues(parseFile('sym.conf', 'include "escape.conf"\ninclude "outlink/secret.conf"'));
    expect(issues).toHaveLength(2);
    for (const i of issues) expect(i.message).toContain('symbolic link to a place outside the include root');
    expect(await parseFile('sym-ok.conf', 'include "inside.conf"')).toEqual({ nested: { ok: true, tags: ['a'] } });
  });

  it('honours an explicit includeRoot narrower than the file directory', async () => {
    const issues = await configIssues(parseFile('narrow.conf', 'include "common/base.conf"', { includeRoot: path.join(root, 'common', 'deeper') }));
    expect(issues[0]!.message).toContain('outside the include root');
  });

  it('rejects include cycles and includes from a text-only source', async () => {
    await write('root/loop-a.conf', 'include "loop-b.conf"');
    await write('root/loop-b.conf', 'include "loop-a.conf"');
    expect((await configIssues(parseFile('loop.conf', 'include "loop-a.conf"')))[0]!.message).toContain('include cycle');
    expect((await configIssues(parseHocon([{ text: 'include "x.conf"' }])))[0]!.message).toContain('no file or include root');
  });
});

describe('parseHocon: errors', () => {
  it('reports a syntax error with file, line, column and the key it is in', async () => {
    const issues = await configIssues(parseHocon([{ file: 'tenants/acme.conf', text: 'a = 1\njob {\n  name = "unterminated\n}' }]));
    expect(issues).toEqual([{ path: 'job.name', message: 'tenants/acme.conf:3:10: unterminated quoted string' }]);
    const top = await configIssues(parseHocon([{ file: 'x.conf', text: 'a = 1\n= 2' }]));
    expect(top).toEqual([{ path: 'x.conf', message: 'x.conf:2:1: expected a key, found ":" or "="' }]);
  });

  it('reports a syntax error inside an included file under its include point', async () => {
    await write('root/common/broken.conf', 'ok = 1\nbad = a + b');
    const issues = await configIssues(parseFile('inc-broken.conf', 'tenant { include "common/broken.conf" }'));
    expect(issues).toEqual([
      { path: 'tenant.bad', message: `${path.join(root, 'common', 'broken.conf')}:2:9: unexpected "+" (quote values that contain "+")` },
    ]);
  });

  it('reports problems from several sources at once', async () => {
    const issues = await configIssues(
      parseHocon([
        { file: 'one.conf', text: 'a = [1, 2' },
        { file: 'two.conf', text: 'b = {' },
        { file: 'three.conf', text: 'include url("https://example.com/x.conf")' },
      ]),
    );
    expect(issues.map((i) => i.message.split(':')[0])).toEqual(['one.conf', 'two.conf', 'three.conf']);
  });

  it('reads a main file, and a missing one is InputMissingError (66) naming it', async () => {
    const file = await write('root/read.conf', 'a = 1');
    expect(await readHoconFile(file)).toEqual({ file, text: 'a = 1' });
    const missing = path.join(root, 'absent.conf');
    const e = await failure(readHoconFile(missing));
    expect(e).toBeInstanceOf(InputMissingError);
    expect(e.exitCode).toBe(66);
    expect(e.message).toContain(missing);
  });
});

describe('parseHocon: --set overrides', () => {
  it('applies overrides last, with HOCON values', async () => {
    const text = 'target { snapshot-date = 2020-01-01, tables = [a], mode = append }\nbase = x';
    const overrides = [
      'target.snapshot-date=2026-07-05',
      'target.tables=[x,y]',
      'a.s="2026-01-01"',
      'target.n = 5',
      'copy = ${base}"-2"',
      'target.tables += z',
    ];
    expect(await parseHocon([{ text }], { overrides })).toEqual({
      target: { 'snapshot-date': '2026-07-05', tables: ['x', 'y', 'z'], mode: 'append', n: 5 },
      base: 'x',
      a: { s: '2026-01-01' },
      copy: 'x-2',
    });
  });

  it('reports every malformed override with its --set[i] path', async () => {
    const overrides = ['ok=1', 'no-equals', 'a.b =', 'a=1, b=2', 'x=[1', 'y { z = 1 }', 'include "x.conf"', 'p=${?HOME}'];
    const issues = await configIssues(parseHocon([{ text: '' }], { overrides, env: { HOME: '/h' } }));
    expect(issues.map((i) => i.path)).toEqual(['--set[1]', '--set[2]', '--set[3]', '--set[4]', '--set[5]', '--set[6]']);
  });

  it('takes plain text a shell leaves unquoted as the string it is (instants, URIs, SQL with =)', async () => {
    // `--set dimension.effective-at="2026-07-06T00:00:00Z"` reaches the runner without its quotes.
    const overrides = ['d.at=2026-07-06T00:00:00Z', 'd.uri = s3a://lake/acme ', "d.where=_snapshot_date = '2026-07-05'", 'd.t=10:30'];
    expect(await parseHocon([{ text: '' }], { overrides })).toEqual({
      d: { at: '2026-07-06T00:00:00Z', uri: 's3a://lake/acme', where: "_snapshot_date = '2026-07-05'", t: '10:30' },
    });
    // Structure stays HOCON's: these are errors, not strings.
    const bad = ['a=1, b=2:3', 'x=[1:2', 'y={z:1', 'p=${?HOME}:x', 'q="a":b', '=a:b'];
    const issues = await configIssues(parseHocon([{ text: '' }], { overrides: bad, env: { HOME: '/h' } }));
    expect(issues.map((i) => i.path)).toEqual(bad.map((_, i) => `--set[${i}]`));
  });

  it('checks environment reads in overrides too', async () => {
    const issues = await configIssues(parseHocon([{ text: '' }], { overrides: ['p=${?HOME}'], env: { HOME: '/h' } }));
    expect(issues).toEqual([{ path: 'p', message: '--set[0]:1:3: ${?HOME} reads environment variable HOME, which configs may not read' }]);
  });
});
