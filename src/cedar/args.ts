import type { CedarValueJson } from '@cedar-policy/cedar-wasm/nodejs';

/**
 * Bounds on the arguments handed to Cedar. Every call pays for converting and copying them into wasm, and a
 * client controls their size, so the work per call must not grow with what the client sends.
 */
export interface ArgsLimits {
  /** Containers nested deeper than this below `context.args` are dropped. */
  readonly maxDepth: number;
  /** Values (scalars and containers) converted in all; the rest are dropped. */
  readonly maxValues: number;
  /** Longer strings are cut to this many UTF-16 code units. */
  readonly maxStringLength: number;
}

export const DEFAULT_ARGS_LIMITS: ArgsLimits = { maxDepth: 8, maxValues: 1000, maxStringLength: 8192 };

export type CedarRecord = { [key: string]: CedarValueJson };

export interface ConvertedArgs {
  readonly value: CedarRecord;
  /**
   * True when a bound dropped or cut something. A deny-list rule on the arguments can be dodged by padding
   * them past a bound, so policies that must not be dodged also forbid `context.argsTruncated`.
   */
  readonly truncated: boolean;
}

/**
 * Cedar's JSON reads a record with one of these keys as an entity reference or extension call (or, for the
 * retired `__expr`, rejects the whole request), so a client could otherwise forge `principal`-like entities
 * inside its own arguments or make every policy fail.
 */
const ESCAPE_KEYS: ReadonlySet<string> = new Set(['__entity', '__extn', '__expr']);

/**
 * Converts tool arguments (parsed JSON) to Cedar values: objects become records, arrays become sets (Cedar sets
 * may mix types, so arrays are kept whatever they hold; order and duplicates are lost), safe integers become
 * Longs, other numbers become their decimal string (Cedar has no floats, and integers beyond 2^53 were already
 * rounded by JSON.parse), `null` and `undefined` disappear, and the escape keys are dropped. A non-object
 * top level gives an empty record: MCP arguments are always an object.
 */
export function toCedarArgs(args: unknown, limits: ArgsLimits = DEFAULT_ARGS_LIMITS): ConvertedArgs {
  const state = { budget: limits.maxValues, truncated: false };
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return { value: {}, truncated: false };
  const value = convertRecord(args as Record<string, unknown>, 1, limits, state) ?? {};
  return { value, truncated: state.truncated };
}

interface State {
  budget: number;
  truncated: boolean;
}

function convert(value: unknown, depth: number, limits: ArgsLimits, state: State): CedarValueJson | undefined {
  if (value === null || value === undefined) return undefined;
  if (state.budget <= 0) {
    state.truncated = true;
    return undefined;
  }
  switch (typeof value) {
    case 'boolean':
      state.budget--;
      return value;
    case 'string':
      state.budget--;
      if (value.length <= limits.maxStringLength) return wellFormed(value);
      state.truncated = true;
      return wellFormed(value.slice(0, limits.maxStringLength));
    case 'number':
      state.budget--;
      // `-0` would otherwise reach Cedar as a float-looking value on some serialisers; it is plainly 0.
      if (Number.isSafeInteger(value)) return value === 0 ? 0 : value;
      return String(value);
    case 'bigint':
      state.budget--;
      return value.toString();
    case 'object':
      if (depth >= limits.maxDepth) {
        state.truncated = true;
        return undefined;
      }
      return Array.isArray(value) ? convertArray(value, depth + 1, limits, state) : convertRecord(value as Record<string, unknown>, depth + 1, limits, state);
    default:
      // Functions and symbols cannot come from JSON; dropping them keeps a caller's mistake from reaching wasm.
      return undefined;
  }
}

function convertArray(items: readonly unknown[], depth: number, limits: ArgsLimits, state: State): CedarValueJson[] | undefined {
  state.budget--;
  const out: CedarValueJson[] = [];
  for (const item of items) {
    if (state.budget <= 0) {
      state.truncated = true;
      break;
    }
    const converted = convert(item, depth, limits, state);
    if (converted !== undefined) out.push(converted);
  }
  return out;
}

function convertRecord(source: Record<string, unknown>, depth: number, limits: ArgsLimits, state: State): CedarRecord | undefined {
  state.budget--;
  // No prototype: a `__proto__` key from JSON.parse must become an attribute, not replace the prototype.
  const out = Object.create(null) as CedarRecord;
  for (const key of Object.keys(source)) {
    if (state.budget <= 0) {
      state.truncated = true;
      break;
    }
    if (ESCAPE_KEYS.has(key)) continue;
    const converted = convert(source[key], depth, limits, state);
    if (converted !== undefined) out[wellFormed(key)] = converted;
  }
  return out;
}

/** ES2024 string methods, present in Node 20 but not in the ES2023 lib the project compiles against. */
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/**
 * Replaces lone UTF-16 surrogates (which JSON.parse accepts from `"\ud800"`) with U+FFFD: cedar-wasm cannot
 * encode them and throws, which would fail every set closed for a call whose only fault is one odd string.
 */
export function wellFormed(text: string): string {
  const view = text as unknown as WellFormedString;
  return view.isWellFormed() ? text : view.toWellFormed();
}
