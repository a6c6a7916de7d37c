import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, asLakehouseError } from '../../../../src/core/errors.js';
import { loadJob } from '../../../../src/runner/load-job.js';
import { tempFiles } from '../../../support/files.js';

/**
 * The platform config is trusted and out of a job config's reach (docs/security.md, "The platform
 * config"): a job config includes only files of its own folder tree, never the platform config or a
 * file it includes (by any path: `..`, a symbolic or a hard link, `required(file(…))`), and no
 * substitution of it (`--set` lines included) resolves to a platform value. Each refusal is 78 at the
 * include's or substitution's path and position, naming the rule and never the value.
 */
const SECRET = 'platform-only-8d1f3c';

const platform = (extra = '') => `
catalogs { lake { format = iceberg, default = true } }
jdbc.connections {
  victim { url = "jdbc:sqlite:/victim/${SECRET}.db", tenants = ["beta"] }
}
tenants {
  acme { storage-roots = ["file:///lake/acme"] }
  beta { storage-roots = ["file:///lake/beta"] }
}
include "shared.conf"
${extra}
`;
const shared = `kafka.clusters.main { bootstrap-servers = "${SECRET}.brokers:9092" }`;

const job = (head = '', tail = '') => `${head}
job    { template = "cdc-silver-merge", schema-version = 1, name = "reach" }
tenant { id = "acme", storage-root = "file:///lake/acme" }
source { table = "orders_cdc" }
cdc    { primary-key = ["id"], sequence-by = "ts" }
target { table = "orders" }
${tail}`;

/**
 * A platform config and a job config laid out as the case needs: the job config at `jobAt`, the
 * platform config at `platformAt` (both relative to one folder).
 */
function layout(files: Record<string, string>) {
  return tempFiles({ 'platform.conf': platform(), 'shared.conf': shared, ...files });
}

async function outcome(dir: string, opts: { config?: string; env?: Record<string, string>; set?: string[]; platformFile?: string } = {}) {
  try {
    await loadJob({
      configFile: join(dir, opts.config ?? 'job.conf'),
      envFile: join(dir, opts.platformFile ?? 'platform.conf'),
      overrides: opts.set ?? [],
      env: opts.env ?? {},
      runId: 'reach',
    });
    return { code: 0, issues: [], text: '' };
  } catch (e) {
    const err = asLakehouseError(e);
    const text = JSON.stringify(err.report());
    return { code: err.exitCode, issues: err instanceof ConfigError ? err.issues : [], text };
  }
}

/** Refused with 78, at `path`, the message matching `rule`, the platform's values nowhere. */
async function refused(dir: string, rule: RegExp, path: string | RegExp, opts: Parameters<typeof outcome>[1] = {}) {
  const r = await outcome(dir, opts);
  expect(r.code, r.text).toBe(78);
  expect(r.text).not.toContain(SECRET);
  const issue = r.issues.find((i) => rule.test(i.message));
  expect(issue, r.text).toBeDefined();
  if (typeof path === 'string') expect(issue!.path).toBe(path);
  else expect(issue!.path).toMatch(path);
  return issue!;
}

describe('a job config includes only files of its own folder tree', () => {
  it('accepts its base config and an include below its folder', async () => {
    const dir = layout({ 'jobs/job.conf': job('include "parts/target.conf"'), 'jobs/parts/target.conf': 'target.catalog = "lake"' });
    expect((await outcome(dir, { config: 'jobs/job.conf' })).code).toBe(0);
  });

  it.each([
    ['a relative path out of the folder', 'include "../platform.conf"', /outside the include root/],
    ['a path that leaves and comes back through ..', 'include "parts/../../platform.conf"', /outside the include root/],
    ['an absolute path', 'include "/etc/passwd.conf"', /absolute paths cannot be included/],
    ['required(file(…)) out of the folder', 'include required(file("../platform.conf"))', /outside the include root/],
    ['a file: URL', 'include "file:///etc/lakehouse/platform.conf"', /URLs cannot be included/],
    ['url(…)', 'include url("http://127.0.0.1:9/platform.conf")', /url\(…\) includes are not allowed/],
    ['classpath(…)', 'include classpath("platform.conf")', /classpath\(…\) includes are not allowed/],
    ['a home directory', 'include "~/platform.conf"', /absolute paths cannot be included/],
  ])('refuses %s (78 at the include, with its position)', async (_, line, rule) => {
    const dir = layout({ 'jobs/job.conf': job(line) });
    const issue = await refused(dir, rule, /job\.conf$/, { config: 'jobs/job.conf' });
    expect(issue.message).toMatch(/job\.conf:1:1: include /);
  });

  it('refuses a symbolic link in the folder that leads out of it (to the platform config or elsewhere)', async () => {
    const dir = layout({ 'jobs/job.conf': job('include "p.conf"\ninclude "out/shared.conf"') });
    symlinkSync(join(dir, 'platform.conf'), join(dir, 'jobs', 'p.conf'));
    symlinkSync(dir, join(dir, 'jobs', 'out'));
    const r = await outcome(dir, { config: 'jobs/job.conf' });
    expect(r.code).toBe(78);
    expect(r.issues.map((i) => i.message)).toEqual([
      expect.stringMatching(/job\.conf:1:1: include "p\.conf" refused: the file is a symbolic link to a place outside the include root/),
      expect.stringMatching(/job\.conf:2:1: include "out\/shared\.conf" refused: the file is a symbolic link to a place outside the include root/),
    ]);
    expect(r.text).not.toContain(SECRET);
  });
});

describe('the platform config itself is never included, even from the same folder', () => {
  const rule = /refused: it is the platform config or a file the platform config includes/;

  it.each([
    ['by its name', 'include "platform.conf"'],
    ['by another path', 'include "./sub/../platform.conf"'],
    ['as required(file(…))', 'include required(file("platform.conf"))'],
    ['inside an object (its values under a key)', 'stolen { include "platform.conf" }'],
    ['a file the platform config includes', 'include "shared.conf"'],
  ])('%s', async (_, line) => {
    const dir = layout({ 'job.conf': job(line), 'sub/x.conf': '' });
    await refused(dir, rule, /job\.conf$|^stolen$/);
  });

  it('through a symbolic link in the folder', async () => {
    const dir = layout({ 'job.conf': job('include "copy.conf"') });
    symlinkSync(join(dir, 'platform.conf'), join(dir, 'copy.conf'));
    await refused(dir, rule, /job\.conf$/);
  });

  it('through a hard link in the folder (another path, the same file)', async () => {
    const dir = layout({ 'job.conf': job('include "copy.conf"') });
    linkSync(join(dir, 'platform.conf'), join(dir, 'copy.conf'));
    await refused(dir, rule, /job\.conf$/);
  });

  it('through an include of an include', async () => {
    const dir = layout({ 'job.conf': job('include "parts/a.conf"'), 'parts/a.conf': 'include "b.conf"' });
    mkdirSync(join(dir, 'parts'), { recursive: true });
    symlinkSync(join(dir, 'platform.conf'), join(dir, 'parts', 'b.conf'));
    // parts/b.conf links to a file inside the job's tree (the platform config sits in it): still refused.
    await refused(dir, rule, /a\.conf$/);
  });

  it('when the job config file is itself the platform config (a link to it)', async () => {
    const dir = layout({});
    symlinkSync(join(dir, 'platform.conf'), join(dir, 'job.conf'));
    await refused(dir, /this file cannot be read here: it is the platform config/, /job\.conf$/);
  });

  it('another file of the folder stays includable', async () => {
    const dir = layout({ 'job.conf': job('include "mine.conf"'), 'mine.conf': 'target.catalog = "lake"' });
    expect((await outcome(dir)).code).toBe(0);
  });
});

describe('no substitution of a job config resolves to a platform value', () => {
  it.each([
    ['a connection url', 'job.name = ${jdbc.connections.victim.url}'],
    ['the Spark remote', 'job.name = ${spark.remote}'],
    ['a whole section', 'job.name = ${kafka}'],
    ['an optional one (silently empty, never the value)', 'job.name = ${?tenants.beta.storage-roots}'],
  ])('%s is not defined in the job config', async (_, line) => {
    const dir = layout({ 'job.conf': job('', line) });
    const r = await outcome(dir);
    expect(r.text).not.toContain(SECRET);
    expect(r.text).not.toContain('/lake/beta');
    if (line.includes('${?')) expect(r.code).toBe(0);
    else {
      expect(r.code).toBe(78);
      expect(r.issues[0]).toMatchObject({ path: 'job.name', message: expect.stringMatching(/job\.conf:\d+:\d+: \$\{.*\} is not defined in the config/) });
    }
  });

  it('--set lines are job config too: no include, no platform value', async () => {
    const dir = layout({ 'job.conf': job() });
    const include = await outcome(dir, { set: ['include "platform.conf"'] });
    expect(include.code).toBe(78);
    expect(include.issues.map((i) => i.path)).toEqual(['--set[0]']);
    for (const line of ['job.name=${jdbc.connections.victim.url}', 'job { include "platform.conf" }']) {
      const r = await outcome(dir, { set: [line] });
      expect(r.code, line).toBe(78);
      expect(r.text).not.toContain(SECRET);
    }
    // An optional one is simply unset: the name is the text around it.
    expect((await outcome(dir, { set: ['job.name=${?jdbc.connections.victim.url}x'] })).code).toBe(0);
  });

  it('refuses a variable job configs may read that the platform config reads into a platform value', async () => {
    const dir = layout({ 'job.conf': job('', 'job.name = ${SHOP_URL}') });
    writeFileSync(join(dir, 'p2.conf'), platform('jdbc.connections.shop { url = ${SHOP_URL}, tenants = ["acme"] }\nconfig-env.allow = ["SHOP_URL"]'));
    const r = await outcome(dir, { platformFile: 'p2.conf', env: { SHOP_URL: `jdbc:sqlite:/x/${SECRET}.db` } });
    expect(r.code).toBe(78);
    expect(r.text).not.toContain(SECRET);
    expect(r.issues).toEqual([
      expect.objectContaining({
        path: '(platform) config-env.allow[0]',
        message: expect.stringContaining('SHOP_URL is also read by the platform config at jdbc.connections.shop.url'),
      }),
    ]);
  });

  it("a variable shared for the tenants' storage roots stays readable (the tenant names its own root)", async () => {
    const dir = layout({ 'job.conf': job('', 'tenant.storage-root = "file://"${LAKE_HOME}"/acme"') });
    writeFileSync(join(dir, 'p3.conf'), platform('tenants.acme.storage-roots = ["file://"${LAKE_HOME}"/acme"]\nconfig-env.allow = ["LAKE_HOME"]'));
    expect((await outcome(dir, { platformFile: 'p3.conf', env: { LAKE_HOME: '/lake' } })).code).toBe(0);
  });

  it('reads only the listed variables, never one named like a credential, never a prototype name', async () => {
    const dir = layout({ 'job.conf': job('', 'job.name = ${?constructor}${?toString}') });
    writeFileSync(join(dir, 'p4.conf'), platform('config-env.allow = ["constructor", "toString", "REGION"]'));
    // process.env answers constructor and toString from its prototype: neither is a variable.
    const r = await outcome(dir, { platformFile: 'p4.conf', env: process.env as Record<string, string> });
    expect(r.code, r.text).toBe(0);
    const token = layout({ 'job.conf': job('', 'job.name = ${MY_TOKEN}') });
    writeFileSync(join(token, 'p5.conf'), platform('config-env.allow = ["MY_TOKEN"]'));
    const t = await outcome(token, { platformFile: 'p5.conf', env: { MY_TOKEN: SECRET } });
    expect(t.code).toBe(78);
    expect(t.issues[0]!.path).toBe('(platform) config-env.allow[0]');
    expect(t.text).not.toContain(SECRET);
  });
});
