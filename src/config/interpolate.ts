/**
 * `${VAR}` interpolation over the string values of a parsed configuration document. Keys are never
 * interpolated: a key decides the document's shape, and a shape that depends on the environment could not be
 * checked by reading the file.
 *
 * Syntax, chosen to match the shell and docker compose so that existing habits carry over:
 * - `${VAR}` is replaced by the variable; an unset variable is an error.
 * - `${VAR:-default}` uses `default` when VAR is unset or empty (the shell's `:-`). The default is literal text.
 * - `$${VAR}` is a literal `${VAR}`.
 * - Any other `${…}` (bad name, missing `}`) is an error rather than literal text, so a typo cannot ship.
 */

/** A path into the parsed document: object keys and array indexes. */
export type ConfigPath = readonly (string | number)[];

/** The variables interpolation reads. Callers pass it explicitly (e.g. `process.env`); nothing reads globals. */
export type EnvSource = Readonly<Record<string, string | undefined>>;

export interface InterpolationIssue {
  readonly path: ConfigPath;
  readonly message: string;
  /** Set when the issue is an unset variable (as opposed to malformed syntax). */
  readonly variable?: string;
}

export interface InterpolationResult {
  /** A copy of the input with every string value interpolated. Missing variables become empty strings. */
  readonly value: unknown;
  /** Every problem found, in document order; empty when interpolation succeeded. */
  readonly issues: readonly InterpolationIssue[];
}

// One pass over each string: the escape `$${`, or a reference `${…}` up to the first `}` (or the end, which
// is reported as unterminated).
const TOKEN = /\$\$\{|\$\{([^}]*)(\}|$)/g;
const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/**
 * Interpolates every string value of `value` (recursively through arrays and plain objects) with `env`.
 * Never throws; all unset variables and malformed references are returned as issues with their paths.
 */
export function interpolate(value: unknown, env: EnvSource): InterpolationResult {
  const issues: InterpolationIssue[] = [];
  const result = visit(value, [], env, issues);
  return { value: result, issues };
}

function visit(value: unknown, path: ConfigPath, env: EnvSource, issues: InterpolationIssue[]): unknown {
  if (typeof value === 'string') return interpolateString(value, path, env, issues);
  if (Array.isArray(value)) return value.map((item: unknown, index) => visit(item, [...path, index], env, issues));
  if (isPlainObject(value)) {
    // fromEntries defines own properties, so a `__proto__` key stays data and never becomes a prototype.
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, visit(item, [...path, key], env, issues)]),
    );
  }
  return value;
}

function interpolateString(text: string, path: ConfigPath, env: EnvSource, issues: InterpolationIssue[]): string {
  if (!text.includes('${')) return text;
  return text.replace(TOKEN, (match: string, body: string | undefined, close: string | undefined) => {
    if (match === '$${') return '${';
    if (close !== '}') {
      issues.push({ path, message: `unterminated "\${" (a literal "\${" is written "$\${")` });
      return '';
    }
    const reference = REFERENCE.exec(body ?? '');
    if (reference === null) {
      issues.push({ path, message: `invalid variable reference "${match}": expected \${NAME} or \${NAME:-default}` });
      return '';
    }
    const name = reference[1] ?? '';
    const fallback = reference[2];
    const current = lookup(env, name);
    if (fallback !== undefined) return current === undefined || current === '' ? fallback : current;
    if (current === undefined) {
      issues.push({ path, variable: name, message: `environment variable ${name} is not set` });
      return '';
    }
    return current;
  });
}

// Own properties only: `${constructor}` must not resolve to Object.prototype.constructor.
function lookup(env: EnvSource, name: string): string | undefined {
  if (!Object.hasOwn(env, name)) return undefined;
  const value = env[name];
  return typeof value === 'string' ? value : undefined;
}

/** True for `{}`-style objects (what YAML and JSON parsers produce), false for arrays, null, class instances. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
