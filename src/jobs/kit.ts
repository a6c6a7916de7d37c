import { z } from 'zod';
import { jobSection, tenantSection } from '../core/config/validate.js';
import type { Layer } from '../core/naming.js';
import type { JobContext, JobPlan, JobTemplate, TemplateVersion } from './template.js';

/**
 * The template kit: the one way to write a template. A template is one module that calls
 * `defineTemplate` with its newest version (whose config is the spec the plan is built from) and
 * its older versions, each with a migration into that spec. The kit adds what every template shares:
 * the `job` and `tenant` sections (with the version literal written once, here), the strict object,
 * the example and docs locations by convention, and the typed link from the zod schema to `plan`.
 *
 * Conventions a registry test checks for every template: `configs/examples/<name>.v<N>.conf` per
 * version and `docs/templates/<name>.md`.
 */

/** The sections every job config has; the kit adds them to each version's schema. */
type Common = { job: z.infer<ReturnType<typeof jobSection>>; tenant: z.infer<ReturnType<typeof tenantSection>> };

/** The whole config document of a version with these sections, as its schema produces it. */
export type ConfigOf<S extends z.ZodRawShape> = z.infer<z.ZodObject<S>> & Common;

/** The spec a template's plan is built from: its newest version's config without the `job` section. */
export type SpecOf<S extends z.ZodRawShape> = Omit<ConfigOf<S>, 'job'>;

interface VersionBase<V extends number, S extends z.ZodRawShape> {
  readonly version: V;
  /** The template's own sections (job and tenant are added by the kit). */
  readonly sections: S;
  /** Checks across sections, on the whole document (paths from its root). */
  readonly refine?: (config: ConfigOf<S>, ctx: z.RefinementCtx) => void;
}

/** An older version: how its config becomes the newest version's spec. */
export interface OlderVersion<V extends number, S extends z.ZodRawShape, Spec> extends VersionBase<V, S> {
  readonly migrate: (config: ConfigOf<S>) => Spec;
}

/** The newest version: its config (without `job`) is the spec. */
export type NewestVersion<V extends number, S extends z.ZodRawShape> = VersionBase<V, S>;

/** A version as written: the newest as is, an older one after `.migrate(…)`. */
export interface VersionDef<V extends number, S extends z.ZodRawShape> extends NewestVersion<V, S> {
  /** This (older) version's config into the newest spec, typed from this version's sections. */
  migrate<Spec>(migration: (config: ConfigOf<S>) => Spec): OlderVersion<V, S, Spec>;
}

/** Write a version once: its number, its sections, its cross-section checks. */
export function defineVersion<const V extends number, S extends z.ZodRawShape>(version: V, def: Omit<VersionBase<V, S>, 'version'>): VersionDef<V, S> {
  const base: VersionBase<V, S> = { version, ...def };
  return { ...base, migrate: (migration) => ({ ...base, migrate: migration }) };
}

export interface TemplateDefinition<S extends z.ZodRawShape> {
  readonly name: string;
  readonly layer: Layer | 'ops';
  readonly summary: string;
  readonly stability: 'stable' | 'beta' | 'experimental';
  readonly newest: NewestVersion<number, S>;
  /** Older versions, each migrated into the newest spec; any order. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each older version has its own config type; only its migration's result is fixed
  readonly older?: readonly OlderVersion<number, any, SpecOf<S>>[];
  /** The plan, from the newest spec: one function for every version. */
  readonly plan: (ctx: JobContext, spec: SpecOf<S>) => JobPlan;
}

/** The example of a template version, relative to the repository root. */
export const examplePath = (template: string, version: number): string => `configs/examples/${template}.v${version}.conf`;
/** The docs page of a template, relative to the repository root. */
export const docsPath = (template: string): string => `docs/templates/${template}.md`;

/** Build a catalog row from a template definition. */
export function defineTemplate<S extends z.ZodRawShape>(def: TemplateDefinition<S>): JobTemplate {
  const version = <VS extends z.ZodRawShape>(v: VersionBase<number, VS>, toSpec: (config: ConfigOf<VS>) => SpecOf<S>): TemplateVersion => {
    const object = z.object({ job: jobSection(def.name, v.version), tenant: tenantSection(), ...v.sections }).strict();
    const refine = v.refine;
    const schema = refine ? object.superRefine((c, ctx) => refine(c as ConfigOf<VS>, ctx)) : object;
    return {
      version: v.version,
      schema,
      example: examplePath(def.name, v.version),
      // The loader hands over only what this schema accepted: the one place the type is asserted.
      plan: (ctx, config) => def.plan(ctx, toSpec(config as ConfigOf<VS>)),
    };
  };
  const newest = version(def.newest, ({ job: _job, ...spec }) => spec as SpecOf<S>);
  const older = (def.older ?? []).map((v) => version(v, v.migrate));
  const versions = [...older, newest].sort((a, b) => a.version - b.version);
  const seen = new Set<number>();
  for (const v of versions) {
    if (seen.has(v.version)) throw new Error(`${def.name}: schema-version ${v.version} is defined twice`);
    seen.add(v.version);
  }
  if (versions.at(-1) !== newest) throw new Error(`${def.name}: the newest version must have the highest number`);
  return { name: def.name, layer: def.layer, summary: def.summary, stability: def.stability, docs: docsPath(def.name), versions };
}
