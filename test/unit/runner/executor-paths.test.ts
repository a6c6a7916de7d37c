import { tableFromArrays } from 'apache-arrow';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { toJson } from '@bufbuild/protobuf';
import { ConfigError } from '../../../src/core/errors.js';
import { executePlan, type SparkSession } from '../../../src/runner/executor.js';
import { SparkError } from '../../../src/spark/errors.js';
import { type Plan, PlanSchema } from '../../../src/spark/proto/gen/spark/connect/base_pb.js';
import type { JobPlan } from '../../../src/jobs/template.js';
import { listedPath } from '../../support/listing.js';
import { testQuery } from '../../support/sql.js';

/**
 * ensureTable checks where an existing table lives: a table found by name at another location fails
 * the run (78) before anything is written; the same place in either file: spelling passes.
 */

const table = { catalog: 'lake', namespace: 'acme_silver', table: 'orders' };
const expected = 'file:///lake/acme/silver/orders';

const plan: JobPlan = {
  steps: [
    {
      kind: 'ensureTable',
      id: 'create-table',
      title: 'create',
      table,
      location: expected,
      configPath: 'target.table',
      create: testQuery('SELECT 1 AS id')
        .limit(0)
        .writeTo(['lake', 'acme_silver', 'orders'], 'create', { provider: 'iceberg', properties: { location: expected } }),
    },
    { kind: 'command', id: 'write', title: 'write', command: testQuery('SELECT 1 AS id').writeTo(['lake', 'acme_silver', 'orders'], 'append') },
  ],
};

const notFound = (cls: string) =>
  new SparkError({ grpcCode: 3, message: `[${cls}] not found`, errorClass: cls, messageParameters: {}, classes: [], causes: [] });

/** What another catalog holds under the target's name: nothing, a table at a location, or it is no catalog of the server. */
type Other = 'missing' | 'not-a-catalog' | string;

/**
 * A session whose table (in `lake`) exists (at `location`) or not, and whose other catalogs hold
 * `others`, recording what is sent: `describe` for the target, `describe <catalog>` for another.
 */
function session(opts: {
  exists: boolean;
  location?: string;
  createFails?: string;
  /** The create failed because another run's create came first: the table exists from then on, of this provider. */
  winner?: { provider: string };
  /** Another run's create under way: its table is in the catalog from the n-th probe of it on. */
  appearsAtProbe?: number;
  others?: Record<string, Other>;
  /** What the target's location holds: files Spark lists there, and whether a Delta log is there. */
  atLocation?: { files?: readonly string[]; deltaLog?: boolean; ageSeconds?: number };
}) {
  const sent: string[] = [];
  let exists = opts.exists;
  let probes = 0;
  const catalogOf = (p: Plan) => /"unparsedIdentifier":"`?([a-z_]+)`?\./.exec(JSON.stringify(toJson(PlanSchema, p)))?.[1] ?? 'lake';
  const files = opts.atLocation?.files ?? [];
  const s: SparkSession = {
    analyze: {
      schema: async (p: Plan) => {
        const path = listedPath(p);
        if (path !== undefined) {
          sent.push(`list ${path.replace(expected, '<location>')}`);
          const exists = path === `${expected}/_delta_log` ? opts.atLocation?.deltaLog : path === expected && files.length > 0;
          if (!exists) throw notFound('PATH_NOT_FOUND');
          return {};
        }
        const c = catalogOf(p);
        if (c === 'lake' && opts.appearsAtProbe !== undefined && ++probes >= opts.appearsAtProbe) exists = true;
        const held = c === 'lake' ? (exists ? 'table' : 'missing') : (opts.others?.[c] ?? 'missing');
        if (held === 'missing') throw notFound('TABLE_OR_VIEW_NOT_FOUND');
        if (held === 'not-a-catalog') throw notFound('REQUIRES_SINGLE_PART_NAMESPACE');
        return {};
      },

      inputFiles: async (p: Plan) => {
        const path = listedPath(p);
        expect(path).toBe(expected);
        sent.push('list files');
        if (files.length === 0) throw notFound('PATH_NOT_FOUND');
        return [...files];
      },
    },
    config: { set: async () => undefined, unset: async () => undefined },
    execute: async (p: Plan) => {
      const json = JSON.stringify(toJson(PlanSchema, p));
      // How long ago the newest file under a path was written (a listing's rows, after a lost create).
      const aged = /"binaryFile".*?"paths":\["([^"]+)"/.exec(json);
      if (aged) {
        sent.push(`age ${aged[1]!.replace(expected, '<location>')}`);
        return { operationId: 'op', table: tableFromArrays({ age: [opts.atLocation?.ageSeconds ?? 86_400] }) };
      }
      const describe = /DESCRIBE TABLE EXTENDED `([a-z_]+)`/.exec(json);
      if (describe) {
        const c = describe[1]!;
        sent.push(c === 'lake' ? 'describe' : `describe ${c}`);
        const row = json.includes('"Provider"') ? 'Provider' : 'Location';
        if (row === 'Provider') sent[sent.length - 1] += ' provider';
        const at = row === 'Provider' ? opts.winner?.provider : c === 'lake' ? opts.location : opts.others?.[c];
        const rows = at === undefined ? [] : [at];
        return {
          operationId: 'op',
          table: tableFromArrays({ col_name: rows.map(() => row), data_type: rows, comment: rows.map(() => '') }),
        };
      }
      sent.push(json.includes('MODE_CREATE') ? 'create' : 'write');
      if (opts.createFails && sent.at(-1) === 'create') {
        if (opts.winner) exists = true;
        throw notFound(opts.createFails);
      }
      return { operationId: 'op' };
    },
  };
  return { s, sent };
}

const run = (s: SparkSession) => executePlan(plan, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });

describe('ensureTable locations', () => {
  it('creates a missing table without describing anything, once its location is found empty', async () => {
    const { s, sent } = session({ exists: false });
    await run(s);
    expect(sent).toEqual(['list <location>/_delta_log', 'list files', 'create', 'write']);
  });

  it.each([
    ['parquet files', { files: [`${expected}/_snapshot_date=2026-07-05/part-0.parquet`] }, 'iceberg', /1 file\(s\) already there/],
    ['a dropped table', { files: [`${expected}/metadata/v1.metadata.json`, `${expected}/data/a.parquet`] }, 'iceberg', /2 file\(s\) already there/],
    ['a Delta log', { deltaLog: true }, 'iceberg', /a Delta table \(_delta_log\) already there/],
    ['a Delta log, for a Delta table too (Delta refuses a create with a query there itself)', { deltaLog: true }, 'delta', /a Delta table \(_delta_log\)/],
    ['files, for a Delta table', { files: [`${expected}/part-0.parquet`] }, 'delta', /1 file\(s\) already there/],
  ] as const)('refuses to create a table at a location holding %s (78 TABLE_LOCATION_TAKEN), creating nothing', async (_, atLocation, provider, message) => {
    const { s, sent } = session({ exists: false, atLocation });
    const create = plan.steps[0] as Extract<JobPlan['steps'][number], { kind: 'ensureTable' }>;
    const p: JobPlan = {
      steps: [
        { ...create, create: testQuery('SELECT 1 AS id').limit(0).writeTo(['lake', 'acme_silver', 'orders'], 'create', { provider, properties: {} }) },
        plan.steps[1]!,
      ],
    };
    const err = await executePlan(p, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(78);
    expect((err as ConfigError).code).toBe('TABLE_LOCATION_TAKEN');
    expect((err as ConfigError).issues).toEqual([{ path: 'target.table', message: expect.stringMatching(message) }]);
    expect(sent).not.toContain('create');
    expect(sent).not.toContain('write');
  });

  it.each(['file:/lake/acme/silver/orders', 'file:///lake/acme/silver/orders/', 'FILE:/lake/acme/silver/orders'])(
    'accepts an existing table at %j (the same place)',
    async (location) => {
      const { s, sent } = session({ exists: true, location });
      await run(s);
      expect(sent).toEqual(['describe', 'write']);
    },
  );

  it.each([
    ['file:/old-home/lake/acme/silver/orders', /already exists at file:\/old-home\/lake\/acme\/silver\/orders, not at file:\/\/\/lake\/acme\/silver\/orders/],
    ['file:/lake/beta/silver/orders', /already exists at file:\/lake\/beta/],
    ['file:/lake/acme/silver/orders/sub', /already exists at/],
    ['s3a://lake/acme/silver/orders', /already exists at s3a:/],
    ['', /without a location Spark reports/],
    [undefined, /without a location Spark reports/],
  ])('refuses an existing table at %j with 78 naming the table, both locations and the config path, writing nothing', async (location, message) => {
    const { s, sent } = session({ exists: true, ...(location === undefined ? {} : { location }) });
    const err = await run(s).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(78);
    expect((err as ConfigError).issues).toEqual([{ path: 'target.table', message: expect.stringMatching(message) }]);
    expect((err as ConfigError).message).toContain('lake.acme_silver.orders');
    expect(sent).toEqual(['describe']);
  });

  it('checks the location of a table another run created between probe and create', async () => {
    const { s, sent } = session({
      exists: false,
      location: 'file:/elsewhere/orders',
      createFails: 'TABLE_OR_VIEW_ALREADY_EXISTS',
      winner: { provider: 'iceberg' },
    });
    await expect(run(s)).rejects.toThrow(/already exists at file:\/elsewhere\/orders/);
    expect(sent).toEqual(['list <location>/_delta_log', 'list files', 'create', 'describe']);
  });

  // Issue 29: two first runs at once; what each catalog answers the loser (test/unit/spark/errors.test.ts).
  it.each(['TABLE_OR_VIEW_ALREADY_EXISTS', 'DELTA_PROTOCOL_CHANGED', 'DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION'])(
    "goes on with the table another run's create made first (%s), once it is at the location and of the format",
    async (cls) => {
      const { s, sent } = session({ exists: false, location: expected, createFails: cls, winner: { provider: 'iceberg' } });
      await run(s);
      expect(sent).toEqual(['list <location>/_delta_log', 'list files', 'create', 'describe', 'describe provider', 'write']);
    },
  );

  it("refuses (78) another run's table of another format, writing nothing", async () => {
    const { s, sent } = session({ exists: false, location: expected, createFails: 'TABLE_OR_VIEW_ALREADY_EXISTS', winner: { provider: 'parquet' } });
    const err = await run(s).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      { path: 'target.table', message: expect.stringMatching(/by another run at the same time, as a parquet table, not iceberg/) },
    ]);
    expect(sent).not.toContain('write');
  });

  it.each([
    ['goes on with its table once the catalog names it', 4, undefined],
    ['refuses (78) once no catalog names them after about 10 s', undefined, 'TABLE_LOCATION_TAKEN'],
  ] as const)('waits when the location holds files written a moment ago (another run creating the table): %s', async (_, appearsAtProbe, code) => {
    vi.useFakeTimers();
    try {
      const { s, sent } = session({
        exists: false,
        location: expected,
        winner: { provider: 'iceberg' },
        atLocation: { files: [`${expected}/metadata/v1.metadata.json`], ageSeconds: 2 },
        ...(appearsAtProbe ? { appearsAtProbe } : {}),
      });
      const done = run(s).then(
        () => undefined,
        (e: unknown) => e,
      );
      await vi.runAllTimersAsync();
      const err = await done;
      expect((err as { code?: string } | undefined)?.code).toBe(code);
      expect(sent).not.toContain('create');
      expect(sent.includes('write')).toBe(code === undefined);
    } finally {
      vi.useRealTimers();
    }
  });

  it.each([
    ['goes on with its table once the catalog names it', 4, undefined],
    ['exits 75 (CREATE_RACE) when the catalog does not name it after about 10 s', undefined, 'CREATE_RACE'],
  ] as const)('after a create the catalog refused as existing but does not show yet: %s', async (_, appearsAtProbe, code) => {
    vi.useFakeTimers();
    try {
      const { s, sent } = session({
        exists: false,
        location: expected,
        createFails: 'DELTA_PROTOCOL_CHANGED',
        ...(appearsAtProbe ? { appearsAtProbe, winner: { provider: 'iceberg' } } : {}),
      });
      const done = run(s).then(
        () => undefined,
        (e: unknown) => e,
      );
      await vi.runAllTimersAsync();
      const err = await done;
      expect((err as { code?: string } | undefined)?.code).toBe(code);
      if (code) expect((err as { exitCode?: number }).exitCode).toBe(75);
      expect(sent.includes('write')).toBe(code === undefined);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses (78) at once young data files where an Iceberg table is to be created: no create of a runner writes any', async () => {
    const { s, sent } = session({ exists: false, atLocation: { files: [`${expected}/part-0.parquet`], ageSeconds: 2 } });
    const err = await run(s).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as ConfigError).code).toBe('TABLE_LOCATION_TAKEN');
    expect(sent).toEqual(['list <location>/_delta_log', 'list files', 'list files']);
  });
});

describe('probePaths', () => {
  const probe = (paths: string[]): JobPlan => ({
    steps: [
      {
        kind: 'probePaths',
        id: 'probe',
        title: 'probe',
        paths,
        interpret: (missing) => (missing.length ? { skip: `missing ${missing.join(' ')}` } : {}),
      },
      { kind: 'command', id: 'write', title: 'write', command: testQuery('SELECT 1 AS id').writeTo(['lake', 'acme_silver', 'orders'], 'append') },
    ],
  });

  /** Paths exist unless listed in `missing`; `broken` ones fail with another error. */
  function lister(missing: string[], broken: string[] = []) {
    const listed: string[] = [];
    const sent: string[] = [];
    const s: SparkSession = {
      analyze: {
        schema: async (p: Plan) => {
          const json = toJson(PlanSchema, p) as { root: { read: { dataSource: { format: string; paths: string[] } } } };
          const ds = json.root.read.dataSource;
          expect(ds.format).toBe('binaryFile');
          expect(ds.paths).toHaveLength(1);
          const path = ds.paths[0]!;
          listed.push(path);
          if (broken.includes(path)) throw notFound('UNAUTHORIZED_ACCESS');
          if (missing.includes(path)) throw notFound('PATH_NOT_FOUND');
          return {};
        },

        inputFiles: async () => [],
      },
      config: { set: async () => undefined, unset: async () => undefined },
      execute: async () => {
        sent.push('write');
        return { operationId: 'op' };
      },
    };
    return { s, listed, sent };
  }
  const exec = (s: SparkSession, p: JobPlan) =>
    executePlan(p, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });

  it('lists each path on its own and goes on when all exist', async () => {
    const { s, listed, sent } = lister([]);
    const report = await exec(s, probe(['file:///b/d=1', 'file:///b/d=2']));
    expect(listed).toEqual(['file:///b/d=1', 'file:///b/d=2']);
    expect(report.skipped).toBeUndefined();
    expect(sent).toEqual(['write']);
  });

  it('hands the missing paths to the step, which skips the rest of the job', async () => {
    const { s, sent } = lister(['file:///b/d=2']);
    const report = await exec(s, probe(['file:///b/d=1', 'file:///b/d=2']));
    expect(report.skipped).toBe('missing file:///b/d=2');
    expect(sent).toEqual([]);
  });

  it('lets any other listing error fail the run', async () => {
    const { s, sent } = lister([], ['file:///b/d=1']);
    await expect(exec(s, probe(['file:///b/d=1']))).rejects.toMatchObject({ errorClass: 'UNAUTHORIZED_ACCESS' });
    expect(sent).toEqual([]);
  });
});

describe("ensureTable and the platform's other catalogs", () => {
  /** The target is missing; `others` says what each other catalog holds under the same name. */
  function withOthers(others: Record<string, Other>) {
    const { s, sent } = session({ exists: false, others });
    const go = () =>
      executePlan(plan, {
        session: s,
        logger: pino({ level: 'silent' }),
        tags: [],
        signal: new AbortController().signal,
        catalogs: ['lake', ...Object.keys(others)],
      });
    return { go, sent };
  }

  it("refuses to create a table where another catalog's table of the same name lives (78, TABLE_LOCATION_TAKEN), creating nothing", async () => {
    const { go, sent } = withOthers({ spark_catalog: 'file:/lake/acme/silver/orders' });
    const e = await go().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).report()).toMatchObject({ code: 'TABLE_LOCATION_TAKEN', path: 'target.table' });
    expect((e as ConfigError).message).toContain('`spark_catalog`.`acme_silver`.`orders` of catalog spark_catalog is there');
    expect(sent).toEqual(['describe spark_catalog']);
  });

  it('creates it when the other catalogs have no such table, are not catalogs of this server, or keep theirs elsewhere', async () => {
    const { go, sent } = withOthers({ spark_catalog: 'missing', hms: 'not-a-catalog', rest: 'file:///elsewhere/orders' });
    await go();
    expect(sent).toEqual(['describe rest', 'list <location>/_delta_log', 'list files', 'create', 'write']);
  });
});

describe('an IF NOT EXISTS command that lost a create race', () => {
  // What the REST catalog (on JDBC) answered the loser of eight namespace creates at once.
  const lost = () =>
    new SparkError({
      grpcCode: 13,
      message:
        'Server error: UncheckedSQLException: Failed to execute: INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?,?,?,?)',
      messageParameters: {},
      classes: ['org.apache.iceberg.exceptions.ServiceFailureException', 'org.apache.iceberg.exceptions.RESTException'],
      causes: [],
    });
  const namespace = (ifNotExists: boolean): JobPlan => ({
    steps: [
      {
        kind: 'command',
        id: 'create-namespace',
        title: 'namespace',
        command: testQuery('SELECT 1 AS id').writeTo(['lake', 'acme_silver', 'orders'], 'append'),
        ...(ifNotExists ? { ifNotExists: true as const } : {}),
      },
    ],
  });
  const failingOnce = (failures: number) => {
    let calls = 0;
    const s: SparkSession = {
      analyze: { schema: async () => ({}), inputFiles: async () => [] },
      config: { set: async () => undefined },
      execute: async () => {
        if (calls++ < failures) throw lost();
        return { operationId: 'op' };
      },
    };
    return { s, calls: () => calls };
  };
  const exec = (p: JobPlan, s: SparkSession) =>
    executePlan(p, { session: s, logger: pino({ level: 'silent' }), tags: [], signal: new AbortController().signal });

  it('is sent once more and finds the winner’s', async () => {
    const { s, calls } = failingOnce(1);
    await exec(namespace(true), s);
    expect(calls()).toBe(2);
  });

  it('fails 75 (retryable) when it loses twice, and a command without the flag is not sent again', async () => {
    for (const [flag, failures, sends] of [
      [true, 2, 2],
      [false, 1, 1],
    ] as const) {
      const { s, calls } = failingOnce(failures);
      await expect(exec(namespace(flag), s)).rejects.toMatchObject({ exitCode: 75, code: 'CREATE_RACE' });
      expect(calls()).toBe(sends);
    }
  });
});
