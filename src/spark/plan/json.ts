import { toJson } from '@bufbuild/protobuf';
import { PlanSchema } from '../proto/gen/spark/connect/base_pb.js';
import type { CompiledPlan } from './compile.js';

/** A compiled plan as protobuf's canonical JSON (what `plan --format json` prints). */
export function planToJson(plan: CompiledPlan): unknown {
  return toJson(PlanSchema, plan);
}
