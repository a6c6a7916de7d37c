import type { PlatformConfig } from '../core/config/platform.js';
import { InternalError } from '../core/errors.js';
import type { TenantContext } from '../core/tenant.js';
import type { Step } from '../jobs/template.js';
import type { Cmd } from '../spark/plan/commands.js';
import { type CompiledPlan, compileBindTenantCommand } from '../spark/plan/compile.js';
import { Query } from '../spark/plan/query.js';
import { tenantBinding, wrapTenantLogic } from '../spark/policy/index.js';

/**
 * Bind a run's Spark Connect session to its tenant, once, right after it connects and before any
 * plan: from then on the server judges every plan of the session against the binding (its
 * namespaces, roots, grants and limits, from the platform config). A server without the project's
 * plugins refuses the command, and the run stops there.
 */
export async function bindTenant(session: { execute(plan: CompiledPlan): Promise<unknown> }, platform: PlatformConfig, tenant: TenantContext): Promise<void> {
  await session.execute(compileBindTenantCommand(tenantBinding(platform, tenant)));
}

/**
 * A step as the executor sends it: when it carries config logic (`untrusted`), every relation it
 * sends has that logic wrapped as tenant logic, which the server judges when the plan arrives and
 * before anything of the step runs or is created (a CTAS, a MERGE, a stream's sink: the server
 * reads the relation before it plans the command). Steps without config logic are sent as they are,
 * and are judged by the server's tenant boundary like every plan of the bound session.
 */
export function tenantLogicOf(step: Step): Step {
  const paths = step.untrusted;
  if (!paths?.length) return step;
  const query = (q: Query) => Query.of(wrapTenantLogic(q.rel, paths));
  const command = (c: Cmd): Cmd => {
    switch (c.kind) {
      case 'write':
      case 'writeV2':
      case 'createView':
      case 'writeStream':
        return Object.freeze({ ...c, input: wrapTenantLogic(c.input, paths) });
      case 'merge':
        // Conditions and assignments are the template's own plan nodes (expressions carry no SQL
        // text: docs/expressions.md); what the MERGE reads from config is its source.
        return Object.freeze({ ...c, source: wrapTenantLogic(c.source, paths) });
      case 'sqlCommand':
      case 'extension':
        // A template bug, not the tenant's: config logic must be where the server can judge it.
        throw new InternalError(`step ${step.id} carries config logic (${paths.join(', ')}) in a ${c.kind}, where the tenant policy cannot judge it`);
    }
  };
  switch (step.kind) {
    case 'query':
      return {
        ...step,
        query: query(step.query),
        ...(step.predict ? { predict: query(step.predict) } : {}),
        ...(step.samples ? { samples: (rows) => step.samples!(rows).map((s) => ({ ...s, rows: query(s.rows) })) } : {}),
      };
    case 'materialize':
      return { ...step, query: query(step.query) };
    case 'compareSchemas':
    case 'checkColumns':
      return { ...step, source: query(step.source) };
    case 'command':
      return { ...step, command: command(step.command) };
    case 'stream':
      return { ...step, command: Object.freeze({ ...step.command, input: wrapTenantLogic(step.command.input, paths) }) };
    case 'ensureTable':
      return { ...step, create: command(step.create) };
    case 'probePaths':
    case 'fingerprint':
      return step;
  }
}
