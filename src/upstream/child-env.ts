/**
 * The only variables a child inherits from the gateway unasked (DESIGN.md invariant 8, issue 4 §4): the gateway's
 * environment holds its own secrets. Anything else (LANG, TMPDIR, TZ, …) must be listed in `env.allow`.
 * NODE_OPTIONS should never be: it could inject code into Node-based servers.
 */
const INHERITED_ENV = ['PATH', 'HOME'] as const;

/** What {@link buildChildEnv} builds the child's environment from. */
export interface ChildEnvSpec {
  /** `env.allow`: names of `parent` variables passed through when set. */
  allow?: readonly string[];
  /** `env.set`: variables given to the child, winning over everything else. */
  set?: Readonly<Record<string, string>>;
  /** HOME for the child, instead of the parent's. */
  home?: string;
}

/**
 * The child's environment: exactly PATH and HOME (`home` if given) of `parent`, the `allow`ed variables of
 * `parent` that are set, then `set`. Nothing else of `parent` (issue 4 §4).
 */
export function buildChildEnv(spec: ChildEnvSpec, parent: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...INHERITED_ENV, ...(spec.allow ?? [])]) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  if (spec.home !== undefined) env['HOME'] = spec.home;
  return { ...env, ...spec.set };
}
