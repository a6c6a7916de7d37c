import { createRegistry, toJson } from '@bufbuild/protobuf';
import { file_lakehouse_jobs_plugins } from '../proto/gen/lakehouse/jobs/plugins_pb.js';
import { PlanSchema } from '../proto/gen/spark/connect/base_pb.js';
import type { CompiledPlan } from './compile.js';

/** The plugin messages a plan may carry in an extension (google.protobuf.Any): JSON shows their fields. */
export const pluginRegistry = createRegistry(file_lakehouse_jobs_plugins);

/** A compiled plan as protobuf's canonical JSON (what `plan --format json` prints). */
export function planToJson(plan: CompiledPlan): unknown {
  return toJson(PlanSchema, plan, { registry: pluginRegistry });
}
