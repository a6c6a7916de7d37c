import { InternalError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Step } from '../jobs/steps.js';
import type { Rel } from '../spark/plan/relations.js';
import { type PolicySession, type PolicyVerdicts, type TenantReadPolicy, checkStepPolicy, commandInputs } from '../spark/policy/index.js';
import { stepPolicyInputs } from './steps/index.js';

/**
 * The second wall: a step carrying config logic runs only if the server's analysis of its plan
 * reads nothing but the tenant's data and uses only allowed functions (src/spark/policy).
 */
export async function checkPolicy(
  step: Step,
  opts: { session: PolicySession; logger: Logger; policy?: TenantReadPolicy },
  verdicts: PolicyVerdicts,
): Promise<void> {
  const subject = { step: step.id, configPaths: step.untrusted ?? [] };
  if (!opts.policy) throw new InternalError(`step ${step.id} carries config logic but the run has no tenant read policy`);
  const checked = await checkStepPolicy(opts.session, stepRelations(step, subject), opts.policy, subject, { verdicts });
  // Say what was judged now: a step whose relations were all judged by an earlier step was not analysed again.
  const verdict =
    checked.relations === 0 && checked.cached > 0
      ? 'allowed (its relations were judged earlier in this run)'
      : `allowed (${checked.relations} relation(s) analysed by the server)`;
  opts.logger.info({ step: step.id, policy: { ...checked, configPaths: subject.configPaths } }, `tenant read policy: ${verdict}`);
}

/** The relations a step sends, as the policy analyses them. */
export function stepRelations(step: Step, subject: { step: string; configPaths: readonly string[] }): Rel[] {
  const inputs = stepPolicyInputs(step);
  return 'command' in inputs ? commandInputs(inputs.command, subject) : [...inputs.relations];
}
