/** The tenant policy (docs/security-policy.md): the session's binding and tenant logic, judged on the server (spark-plugins/). */
export * from './binding.js';
export * from './refusals.js';
export * from './tenant-logic.js';
