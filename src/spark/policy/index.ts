/** The tenant read policy (docs/security-policy.md): one module, used by the executor and the tenant-SQL templates. */
export * from './allow-list.js';
export * from './inputs.js';
export { type AnalyzedPlan, type RelationRead, parseAnalyzedPlan } from './plan-text.js';
export * from './policy.js';
