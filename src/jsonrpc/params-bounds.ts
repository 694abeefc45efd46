/**
 * What the gateway forwards of a request's params, checked before any upstream sees them (issue 23 §1-2). An
 * upstream that cannot read a message drops it, so a malformed one costs its caller a call timeout and costs the
 * server's health for everyone; a value nested deeper than the call stack allows breaks whatever serialises it.
 * Both are the caller's fault, so the caller gets -32602 at once and the upstream gets nothing.
 */

/**
 * How many objects or arrays deep a value under `params` may nest, `params` itself not counted: `arguments`
 * and `_meta` are at depth 1, so `{"arguments":{"a":{"b":1}}}` nests 2. JSON Schema documents, the deepest
 * honest arguments, stay far below; V8's JSON.stringify gives up at a few thousand.
 */
export const MAX_PARAMS_DEPTH = 64;

/**
 * The size of `_meta`, counted as one per value plus the length (UTF-16 units) of every string and key: about
 * its JSON length. `_meta` carries a progress token, trace context and a few flags; 64 Ki is far above that.
 * `arguments` are bounded by `limits.maxBodyBytes` alone.
 */
export const MAX_META_SIZE = 65_536;

/** What a method's `arguments` must be: any object (tools/call), or an object of strings (prompts/get). */
export type ArgumentsShape = 'object' | 'strings';

/**
 * Why `params` may not be forwarded, or undefined when they may. `argumentsShape` undefined: the method has no
 * `arguments` member of its own. Cheap: the checks of named members come first, then one walk over `params`
 * that stops at the first value too deep and allocates nothing per value.
 */
export function paramsProblem(params: Readonly<Record<string, unknown>>, argumentsShape?: ArgumentsShape): string | undefined {
  const meta = params._meta;
  if (meta !== undefined) {
    if (!isPlainObject(meta)) return 'params._meta must be an object';
    const token = meta.progressToken;
    // Spec 2025-11-25: ProgressToken = string | number. The upstream sees a number of the gateway's own instead.
    if (token !== undefined && typeof token !== 'string' && !(typeof token === 'number' && Number.isFinite(token))) {
      return 'params._meta.progressToken must be a string or a number';
    }
  }
  if (argumentsShape !== undefined && params.arguments !== undefined) {
    const args = params.arguments;
    if (!isPlainObject(args)) return 'params.arguments must be an object';
  }
  if (exceeds(params, MAX_PARAMS_DEPTH + 1, Number.POSITIVE_INFINITY) === 'depth') return `params nest deeper than ${MAX_PARAMS_DEPTH} levels`;
  if (argumentsShape === 'strings' && isPlainObject(params.arguments)) {
    const args = params.arguments;
    for (const key in args) if (typeof args[key] !== 'string') return 'params.arguments must map each argument name to a string';
  }
  if (meta !== undefined && exceeds(meta, Number.POSITIVE_INFINITY, MAX_META_SIZE) === 'size') return `params._meta is larger than ${MAX_META_SIZE} characters`;
  return undefined;
}

/**
 * What `completion/complete` needs beyond {@link paramsProblem} (spec 2025-11-25, CompleteRequest): `argument`
 * is `{ name: string, value: string }` and `context.arguments`, when present, maps names to strings. An upstream
 * answers anything else with -32603 and a schema dump, which is the caller's fault passed on as the server's.
 */
export function completionProblem(params: Readonly<Record<string, unknown>>): string | undefined {
  const argument = params.argument;
  if (!isPlainObject(argument) || typeof argument.name !== 'string' || typeof argument.value !== 'string') {
    return 'params.argument must be an object with a string name and a string value';
  }
  const context = params.context;
  if (context === undefined) return undefined;
  if (!isPlainObject(context)) return 'params.context must be an object';
  const args = context.arguments;
  if (args === undefined) return undefined;
  if (!isPlainObject(args)) return 'params.context.arguments must be an object';
  for (const key in args) if (typeof args[key] !== 'string') return 'params.context.arguments must map each argument name to a string';
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Containers still to visit and their depths; shared by every walk (they run to the end synchronously). */
const pending: object[] = [];
const depths: number[] = [];

/**
 * Whether `root` nests more than `maxDepth` containers deep (`root` is depth 1), or its size (see
 * {@link MAX_META_SIZE}) passes `maxSize`. Iterative, so any depth is measured without touching the call stack.
 */
function exceeds(root: object, maxDepth: number, maxSize: number): 'depth' | 'size' | undefined {
  let size = 1;
  pending.push(root);
  depths.push(1);
  try {
    while (pending.length > 0) {
      const node = pending.pop() as object;
      const depth = depths.pop() as number;
      if (Array.isArray(node)) {
        for (const item of node as unknown[]) {
          size += typeof item === 'string' ? item.length + 1 : 1;
          if (typeof item === 'object' && item !== null) {
            if (depth >= maxDepth) return 'depth';
            pending.push(item);
            depths.push(depth + 1);
          }
        }
      } else {
        const record = node as Record<string, unknown>;
        for (const key in record) {
          const item = record[key];
          size += key.length + (typeof item === 'string' ? item.length + 1 : 1);
          if (typeof item === 'object' && item !== null) {
            if (depth >= maxDepth) return 'depth';
            pending.push(item);
            depths.push(depth + 1);
          }
        }
      }
      if (size > maxSize) return 'size';
    }
    return undefined;
  } finally {
    // An early exit leaves entries behind; the next walk must start empty and hold no caller's values.
    pending.length = 0;
    depths.length = 0;
  }
}
