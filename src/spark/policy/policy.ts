import { createHash } from 'node:crypto';
import { toBinary } from '@bufbuild/protobuf';
import { ConfigError, type ErrorCategory, type ErrorReport, type ExitCode, InternalError, LakehouseError } from '../../core/errors.js';
import { SparkError } from '../errors.js';
import { isUnderRoot } from '../../core/tenant.js';
import type { Cmd } from '../plan/commands.js';
import { compileRelationPlan } from '../plan/compile.js';
import { isConfigExpr } from '../plan/config-expression.js';
import type { Expr } from '../plan/expressions.js';
import type { Rel } from '../plan/relations.js';
import { type Plan, PlanSchema } from '../proto/gen/spark/connect/base_pb.js';
import { ALLOWED_FUNCTIONS, ALLOWED_NODES, ALLOWED_SOURCE_FORMATS, REGEX_FUNCTIONS } from './allow-list.js';
import { type AnalyzedPlan, parseAnalyzedPlan } from './plan-text.js';

/**
 * The tenant read policy, the second wall: before a step that carries config-supplied logic runs,
 * the server analyses its plan and we refuse (78) unless every relation it reads is the tenant's
 * (its namespaces, a namespace the platform grants it, or files under its storage roots) and every
 * plan node and function is on the allow-list (allow-list.ts). It holds on its own: it does not
 * assume the config's expressions were screened before, and the tenant-SQL templates rely on it.
 *
 * Refusals name the offending relation, path or function as the tenant wrote it, never data.
 */

export interface TenantReadPolicy {
  readonly tenant: string;
  /** `catalog.namespace` pairs the tenant may read: its own layers in every catalog, plus grants. */
  readonly namespaces: readonly string[];
  /** Storage roots every file read must be under (the tenant's, plus roots of granted data). */
  readonly roots: readonly string[];
}

/** What the policy needs from a Spark Connect session. */
export interface PolicySession {
  readonly analyze: {
    explain(plan: Plan, mode: 'extended'): Promise<string>;
    inputFiles(plan: Plan): Promise<string[]>;
  };
  readonly config: {
    set(pairs: Readonly<Record<string, string>>): Promise<unknown>;
    getOption(keys: readonly string[]): Promise<Record<string, string | undefined>>;
    unset(keys: readonly string[]): Promise<unknown>;
  };
}

/**
 * Session settings the check needs: without them Spark cuts long expression lists short
 * (`... 6 more fields`), and what is cut cannot be judged (the parser refuses truncated text).
 */
export const POLICY_SESSION_CONF: Readonly<Record<string, string>> = {
  'spark.sql.debug.maxToStringFields': '100000',
  'spark.sql.maxPlanStringLength': '2147483632',
  // A SQL script (`BEGIN … END`) runs while it is analysed and its result comes back as a plain
  // LocalRelation: the check would see neither what it read nor what it did. No template uses one.
  'spark.sql.scripting.enabled': 'false',
};

/**
 * Optimizer rules that evaluate expressions while a plan is explained (the extended explain and
 * InputFiles both optimize it): constant folding, and a Project or Filter over literal rows turned
 * into rows. They are left out while the check runs, and only then, so that the check computes
 * nothing a tenant wrote: a literal regular expression that backtracks would otherwise run for
 * hours inside the check (config expressions send no regex, and gold's screen refuses them, but
 * this wall does not rely on either). Spark evaluates a `VALUES` list already in analysis: there
 * only those screens stand.
 */
export const EXCLUDED_RULES_KEY = 'spark.sql.optimizer.excludedRules';
export const CHECK_EXCLUDED_RULES: readonly string[] = [
  'org.apache.spark.sql.catalyst.optimizer.ConstantFolding',
  'org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation',
];

/**
 * How SQL text of a relation may start: a query. `EXECUTE IMMEDIATE` runs its statement while it
 * is analysed (a DROP TABLE would happen during the check), and scripts run likewise; other
 * statements are refused anyway by the plan-node allow-list, but need not be sent at all. No
 * leading comment: Spark's comments nest, and a differing reading of them must not let a statement
 * pass as a query.
 */
const QUERY_START = /^\s*(?:\(|(?:SELECT|WITH|FROM|VALUES|TABLE)\b)/i;

/** Where a refusal points: the config paths whose logic the step carries. */
export interface PolicySubject {
  readonly step: string;
  readonly configPaths: readonly string[];
}

export interface PolicyCheckReport {
  /** The relations analysed, and the time the check took (AnalyzePlan round trips included). */
  readonly relations: number;
  /** Relations not analysed again: this run already allowed the very same relation. */
  readonly cached: number;
  readonly durationMs: number;
}

/**
 * The relations one run has already allowed, by a fingerprint of their compiled plan. The steps
 * of a template share the relation that carries the config logic (every step of cdc-silver-merge
 * reads the same filtered bronze events): it is analysed once per run, not once per step. Never
 * shared between runs: a run analyses everything itself against the catalog as it finds it.
 */
export class PolicyVerdicts {
  readonly #allowed = new Set<string>();
  has(fingerprint: string): boolean {
    return this.#allowed.has(fingerprint);
  }
  allow(fingerprint: string): void {
    this.#allowed.add(fingerprint);
  }
}

/** A relation's identity: the SHA-256 of its compiled plan (secrets included, so kept only as a hash, in memory). */
export function relationFingerprint(rel: Rel): string {
  return createHash('sha256')
    .update(toBinary(PlanSchema, compileRelationPlan(rel, { reveal: true })))
    .digest('hex');
}

/** Glob characters Hadoop expands in paths: a path with them could match another tenant's files. */
const GLOB = /[*?[\]{}\\]/;

/**
 * Check the relations a step will send (its query, or its command's input) against the policy.
 * Throws a ConfigError (78) listing every violation; passes silently otherwise.
 */
export async function checkStepPolicy(
  session: PolicySession,
  rels: readonly Rel[],
  policy: TenantReadPolicy,
  subject: PolicySubject,
  opts: { verdicts?: PolicyVerdicts } = {},
): Promise<PolicyCheckReport> {
  const started = performance.now();
  const refuse = (messages: string[]) => {
    const path = subject.configPaths.join(', ');
    const unique = [...new Set(messages)];
    return new ConfigError(unique.map((m) => ({ path, message: `refused by the tenant read policy (step ${subject.step}): ${m}` })));
  };
  // Before anything is sent: the sources the plan names itself (so Spark never lists or infers the
  // schema of files outside the roots), in the whole of every relation.
  const early = rels.flatMap((rel) => relTreeViolations(rel, policy));
  if (early.length) throw refuse(early);
  // The server analyses only what carries config logic (the rest is the template's own plan,
  // whose reads the static check above has judged), each distinct relation once per run.
  const subjects = new Map<string, Rel>();
  for (const rel of rels) for (const sub of configSubtrees(rel)) subjects.set(relationFingerprint(sub), sub);
  const pending = [...subjects].filter(([fp]) => !opts.verdicts?.has(fp));
  if (pending.length === 0) return { relations: 0, cached: subjects.size, durationMs: Math.round(performance.now() - started) };
  const before = (await session.config.getOption([EXCLUDED_RULES_KEY]))[EXCLUDED_RULES_KEY];
  const excluded = [
    ...new Set([
      ...(before ?? '')
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean),
      ...CHECK_EXCLUDED_RULES,
    ]),
  ].join(',');
  await session.config.set({ ...POLICY_SESSION_CONF, [EXCLUDED_RULES_KEY]: excluded });
  try {
    await judgePending(session, pending, policy, refuse, opts, subject.step);
  } finally {
    // The run's own queries are optimized as the platform configured them.
    await (before === undefined ? session.config.unset([EXCLUDED_RULES_KEY]) : session.config.set({ [EXCLUDED_RULES_KEY]: before }));
  }
  return { relations: pending.length, cached: subjects.size - pending.length, durationMs: Math.round(performance.now() - started) };
}

async function judgePending(
  session: PolicySession,
  pending: readonly [string, Rel][],
  policy: TenantReadPolicy,
  refuse: (messages: string[]) => ConfigError,
  opts: { verdicts?: PolicyVerdicts },
  step: string,
): Promise<void> {
  for (const [fingerprint, rel] of pending) {
    const plan = compileRelationPlan(rel, { reveal: true });
    const jdbcSources = countJdbcSources(rel);
    // Both analyses at once, saving a round trip, unless the plan reads JDBC: there InputFiles
    // would connect to the database again for nothing (a JDBC relation has no files).
    const files = jdbcSources === 0 ? analysing(() => session.analyze.inputFiles(plan), refuse, step) : undefined;
    files?.catch(() => undefined); // judged below, after the explain
    const analysed = parseAnalyzedPlan(await analysing(() => session.analyze.explain(plan, 'extended'), refuse, step));
    const found = analysisViolations(analysed, policy, { jdbcSources });
    if (found.length) throw refuse(found);
    if (analysed.relations.some((r) => r.kind === 'file-path' || r.kind === 'file-table')) {
      const outside = fileViolations(await (files ?? analysing(() => session.analyze.inputFiles(plan), refuse, step)), policy);
      if (outside.length) throw refuse(outside);
    }
    // A view is judged by its definition, which another session may replace between two steps:
    // a relation reading one is analysed again each time.
    if (!analysed.relations.some((r) => r.kind === 'view')) opts.verdicts?.allow(fingerprint);
  }
}

/**
 * The parts of a relation that carry config logic, each with everything below it: the topmost
 * nodes whose own expressions hold an expression made from config (`configExpr` marks them), and
 * SQL text. Analysing a part alone shows exactly what it shows inside the whole plan: Spark
 * resolves a node against its inputs only, so a config expression can name nothing outside its
 * subtree, and what the rest of the plan adds is the template's own nodes. A relation where no such
 * node is found (config logic put somewhere unmarked) is analysed whole, as before.
 */
export function configSubtrees(rel: Rel): Rel[] {
  const found: Rel[] = [];
  const visit = (r: Rel): void => {
    if (r.kind === 'sql' || ownExpressions(r).some(holdsConfigExpr)) found.push(r);
    else children(r).forEach(visit);
  };
  visit(rel);
  return found.length ? found : [rel];
}

/** The expressions of a node itself, not of its inputs. */
function ownExpressions(rel: Rel): unknown[] {
  switch (rel.kind) {
    case 'filter':
      return [rel.condition];
    case 'project':
      return [...rel.exprs];
    case 'withColumns':
      return rel.columns.map(([, x]) => x);
    case 'join':
      return rel.on ? [rel.on] : [];
    case 'aggregate':
      return [...rel.groupBy, ...rel.aggregates];
    case 'sort':
      return [...rel.orders];
    default:
      return [];
  }
}

function holdsConfigExpr(node: unknown, depth = 0): boolean {
  if (typeof node !== 'object' || node === null || depth > 500) return false;
  if ('kind' in node && isConfigExpr(node as Expr)) return true;
  return (Array.isArray(node) ? node : Object.values(node)).some((v) => holdsConfigExpr(v, depth + 1));
}

/**
 * A plan that does not analyse cannot be checked, so it is refused (78) with Spark's error class
 * only: Spark's message can quote what the plan touched (another tenant's column names in a
 * "did you mean" or a type mismatch). Missing inputs, an unreachable server, timeouts and denied
 * permissions keep their own meaning and exit code: they say nothing about the plan's contents.
 */
async function analysing<T>(call: () => Promise<T>, refuse: (m: string[]) => ConfigError, step: string): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof SparkError && (e.category === 'spark' || e.category === 'config' || e.category === 'data'))
      throw refuse([`the plan does not analyse (${e.errorClass ?? e.code}), so it cannot be checked`]);
    if (e instanceof SparkError) throw new PolicyCheckFailure(e, step);
    throw e;
  }
}

/**
 * Any other failure of the check's analysis, with its exit code, category, code and Spark error
 * class, but never Spark's text: Spark's message of a failed analysis prints the plan analysed so
 * far, and that part may have resolved a table the tenant may not read (observed on our server: a
 * missing table of the tenant's own, joined with a streaming read of another tenant's table that
 * the first wall let through, answered TABLE_OR_VIEW_NOT_FOUND with the other table's columns in
 * the text). A denied permission names the file it was denied. So neither the message, the causes
 * nor the error itself (as a cause) travel on; a missing table is named as the tenant's text named
 * it (Spark's relationName parameter: a name the query wrote, not one Spark found).
 */
export class PolicyCheckFailure extends LakehouseError {
  readonly exitCode: ExitCode;
  readonly category: ErrorCategory;
  readonly code: string;
  override readonly retryable: boolean;
  readonly errorClass: string | undefined;
  readonly sqlState: string | undefined;

  constructor(e: SparkError, step: string) {
    const missing = e.category === 'input' && e.errorClass?.startsWith('TABLE_OR_VIEW_NOT_FOUND') ? e.messageParameters.relationName : undefined;
    const what: Partial<Record<ErrorCategory, string>> = {
      input: missing ? `the table or view ${missing} does not exist` : 'a table, view or path the step reads does not exist',
      permission: 'the server was denied access to what the step reads',
      transient: 'the analysis failed for a passing reason (retryable)',
      unavailable: 'the Spark Connect server did not answer',
    };
    super(
      `the tenant read policy could not analyse step ${step}: ${what[e.category] ?? 'the analysis failed'} (${e.errorClass ?? e.code}); Spark's message is not shown, as it can quote tables outside the tenant's namespaces`,
    );
    this.exitCode = e.exitCode;
    this.category = e.category;
    this.code = e.code;
    this.retryable = e.retryable;
    this.errorClass = e.errorClass;
    this.sqlState = e.sqlState;
  }

  override report(): ErrorReport {
    return { ...super.report(), ...(this.errorClass ? { sparkErrorClass: this.errorClass } : {}), ...(this.sqlState ? { sqlState: this.sqlState } : {}) };
  }
}

/** The relations of a command the policy can analyse; a command it cannot see into is refused. */
export function commandInputs(cmd: Cmd, subject: PolicySubject): Rel[] {
  switch (cmd.kind) {
    case 'write':
    case 'writeV2':
    case 'createView':
    case 'writeStream':
      return [cmd.input];
    case 'merge':
      // Conditions and assignments are plan nodes built by the template (expressions carry no SQL
      // text: docs/expressions.md); what the MERGE reads is its source and its target.
      return [cmd.source];
    case 'sqlCommand':
      throw unverifiable(subject, 'a SQL statement');
    case 'extension':
      throw unverifiable(subject, 'a server plugin command');
  }
}

function unverifiable(subject: PolicySubject, what: string): InternalError {
  // A template bug, not the tenant's: a step flagged as carrying config logic must put it where the policy can see it.
  return new InternalError(
    `step ${subject.step} carries config logic (${subject.configPaths.join(', ')}) in ${what}, which the tenant read policy cannot analyse`,
  );
}

function children(rel: Rel): Rel[] {
  switch (rel.kind) {
    case 'sql':
    case 'table':
    case 'source':
    case 'range':
    case 'extension':
    case 'materialized':
      return [];
    case 'join':
      return [rel.left, rel.right];
    default:
      return [rel.input];
  }
}

function countJdbcSources(rel: Rel): number {
  return (rel.kind === 'source' && rel.format === 'jdbc' ? 1 : 0) + children(rel).reduce((n, c) => n + countJdbcSources(c), 0);
}

/** Static checks of the plan nodes we built: source formats and paths, table names. */
export function relTreeViolations(rel: Rel, policy: TenantReadPolicy): string[] {
  const out: string[] = [];
  if (rel.kind === 'source') {
    if (!ALLOWED_SOURCE_FORMATS.has(rel.format)) out.push(`reading format "${rel.format}" is not allowed`);
    const optionPaths = Object.entries(rel.options)
      .filter(([k]) => k.toLowerCase() === 'path' || k.toLowerCase() === 'paths')
      .map(([, v]) => (typeof v === 'string' ? v : '[secret]'));
    for (const p of [...rel.paths, ...optionPaths]) out.push(...pathViolations(p, policy));
  }
  if (rel.kind === 'table' && !namespaceAllowed(rel.parts, policy)) out.push(`table ${rel.parts.join('.')} is outside the tenant's namespaces`);
  // Fail closed: what a server plugin reads is its own code's business, not checkable here.
  if (rel.kind === 'extension') out.push(`a server plugin relation (${rel.typeUrl}) cannot be checked`);
  if (rel.kind === 'sql' && !QUERY_START.test(rel.query)) out.push('SQL text must be a query (SELECT, WITH, FROM, VALUES, TABLE), without a leading comment');
  for (const c of children(rel)) out.push(...relTreeViolations(c, policy));
  return out;
}

function pathViolations(path: string, policy: TenantReadPolicy): string[] {
  if (GLOB.test(path)) return [`path ${path} contains glob characters`];
  if (!isUnderRoot(normaliseFileUri(path), policy.roots)) return [`path ${path} is outside the tenant's storage roots`];
  return [];
}

/** Judge the analyzed plan: nodes, relations and functions against the allow-lists and grants. */
export function analysisViolations(plan: AnalyzedPlan, policy: TenantReadPolicy, opts: { jdbcSources: number }): string[] {
  const out: string[] = [...plan.problems.map((p) => `the analysed plan cannot be verified: ${p}`)];
  for (const n of plan.nodes) if (!ALLOWED_NODES.has(n)) out.push(`plan node ${n} is not allowed`);
  for (const f of plan.functions)
    if (REGEX_FUNCTIONS.has(f))
      out.push(
        `${f === 'like' ? 'LIKE' : `function ${f}`} is not allowed: Spark runs it as a regular expression, which can backtrack for hours on the shared server (use startswith, endswith, contains, locate, replace or split_part)`,
      );
    else if (!ALLOWED_FUNCTIONS.has(f)) out.push(`function ${f} is not allowed`);
  let jdbc = 0;
  for (const r of plan.relations) {
    switch (r.kind) {
      case 'v2-table':
      case 'file-table':
        if (!namespaceAllowed(r.identity, policy)) out.push(`table ${r.identity.join('.')} is outside the tenant's namespaces`);
        break;
      case 'view':
        // A view is judged by what it reads (its definition is part of the plan); its name needs no grant.
        break;
      case 'file-path':
        if (!ALLOWED_SOURCE_FORMATS.has(r.format ?? '')) out.push(`reading format "${r.format}" is not allowed`);
        break;
      case 'jdbc':
        // Only the template's own JDBC source: a JDBC relation the step did not declare came from config text.
        if (++jdbc > opts.jdbcSources) out.push('a JDBC relation the step does not declare');
        break;
      case 'local':
      case 'range':
      case 'one-row':
      case 'cte-ref':
        break;
    }
  }
  return out;
}

/** Every file the plan reads must be under the roots (`file:/x` and `file:///x` are one path). */
export function fileViolations(files: readonly string[], policy: TenantReadPolicy): string[] {
  const outside = files.filter((f) => !isUnderRoot(normaliseFileUri(f), policy.roots));
  if (outside.length === 0) return [];
  // No file or directory names: a glob the tenant wrote expands to other tenants' names.
  return [`reads ${outside.length} file(s) outside the tenant's storage roots`];
}

/** Hadoop writes local paths as `file:/x`; our roots are `file:///x`. */
export function normaliseFileUri(uri: string): string {
  const m = /^([a-z][a-z0-9+.-]*):(\/[^/].*|\/)$/i.exec(uri);
  return m ? `${m[1]}://${m[2]}` : uri;
}

/** Is `catalog.namespace.…table` in one of the policy's namespaces? Compared case-insensitively, as Spark resolves names. */
export function namespaceAllowed(identity: readonly string[], policy: TenantReadPolicy): boolean {
  if (identity.length < 3) return false;
  const ns = `${identity[0]}.${identity[1]}`.toLowerCase();
  return policy.namespaces.some((n) => n.toLowerCase() === ns);
}
