import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import { prettyDestination } from './pretty.js';
import { isCredentialKey, redactText } from '../redact/secret-patterns.js';

export type { Logger };

/** What a credential-named field shows instead of its value. */
const CENSOR = '[REDACTED]';

/**
 * How far down a logged object is searched. Log fields are shallow (a header bag, a server's env); what lies
 * deeper is replaced, as in audit records: dropping a subtree is safer than writing it unscanned.
 */
const MAX_DEPTH = 6;

/** Field names seen so far and whether they name a credential: log keys come from code, so the set stays small. */
const secretKeyCache = new Map<string, boolean>();
const SECRET_KEY_CACHE_LIMIT = 1024;

/** The shared credential field names in any spelling, plus `env`, because a server's environment is where upstream credentials live. */
function isSecretKey(key: string): boolean {
  let secret = secretKeyCache.get(key);
  if (secret === undefined) {
    secret = key === 'env' || isCredentialKey(key);
    // Keys of logged data (headers, say) are the caller's: past the limit they are checked each time, not kept.
    if (secretKeyCache.size < SECRET_KEY_CACHE_LIMIT) secretKeyCache.set(key, secret);
  }
  return secret;
}

/**
 * `value` with every credential-named field censored and every credential-shaped substring masked, at any depth
 * up to {@link MAX_DEPTH}. Nothing is changed in place (a logged header bag is the request's own), and a copy is
 * made only of what changes, so a line without secrets costs a walk and no allocation. Values that serialise
 * themselves (`toJSON`: dates, URLs, buffers) are left to do so; errors go through the `err` serializer.
 */
function redactLogged(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return redactText(value);
  if (typeof value !== 'object' || value === null || value instanceof Error || typeof (value as { toJSON?: unknown }).toJSON === 'function') return value;
  if (depth >= MAX_DEPTH) return '[REDACTED:too-deep]';
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let index = 0; index < value.length; index += 1) {
      const item: unknown = value[index];
      const redacted = redactLogged(item, depth + 1);
      if (redacted !== item) (copy ??= value.slice())[index] = redacted;
    }
    return copy ?? value;
  }
  const record = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(record)) {
    const child = record[key];
    const redacted = child !== undefined && isSecretKey(key) ? CENSOR : redactLogged(child, depth + 1);
    if (redacted !== child) (copy ??= { ...record })[key] = redacted;
  }
  return copy ?? value;
}

/** pino's error serializer, with the message and stack masked like any other text. */
function serializeError(error: unknown): unknown {
  if (!(error instanceof Error)) return redactLogged(error, 0);
  const serialized = pino.stdSerializers.err(error);
  serialized.message = redactText(serialized.message);
  if (typeof serialized.stack === 'string') serialized.stack = redactText(serialized.stack);
  return serialized;
}

/** Masks credential-looking substrings, using the same shapes as audit records and tool results. */
export function redactString(value: string): string {
  return redactText(value);
}

/** `json`: one JSON object a line, for machines. `pretty`: `time LEVEL message key=value`, for a person. */
export type LogFormat = 'json' | 'pretty';

export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

/** The format asked for, else pretty on a terminal and JSON everywhere else (a file, a pipe, a collector). */
export function resolveLogFormat(requested: LogFormat | undefined, isTerminal: boolean): LogFormat {
  return requested ?? (isTerminal ? 'pretty' : 'json');
}

export interface LoggerSettings {
  level: string;
  name?: string;
  /** Default `json`. Redaction happens before either format sees a line. */
  format?: LogFormat;
  /** Default: stderr. */
  destination?: DestinationStream;
}

export function createLogger(settings: LoggerSettings): Logger {
  const options: LoggerOptions = {
    level: settings.level,
    name: settings.name ?? 'mcpgate',
    base: { pid: process.pid },
    // Redaction walks each line's fields itself rather than through pino's `redact` paths: wildcard paths for
    // every credential spelling at three depths made each line cost about a millisecond (issue 22 C12, the
    // access line is written on every call).
    serializers: { err: serializeError },
    formatters: {
      log: (object) => redactLogged(object, 0) as Record<string, unknown>,
    },
    hooks: {
      logMethod(args, method) {
        const patched = args.map((arg) => (typeof arg === 'string' ? redactString(arg) : arg)) as typeof args;
        method.apply(this, patched);
      },
    },
  };
  const target = settings.destination ?? pino.destination({ fd: 2, sync: false });
  if (settings.format !== 'pretty') return pino(options, target);
  // Colours only for a person at a terminal who has not asked for none (https://no-color.org).
  const colours = settings.destination === undefined && process.stderr.isTTY === true && (process.env.NO_COLOR ?? '') === '';
  return pino(options, prettyDestination(target, { colours }));
}
