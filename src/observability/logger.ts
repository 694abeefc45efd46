import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import { prettyDestination } from './pretty.js';
import { credentialKeySpellings, redactText } from '../redact/secret-patterns.js';

export type { Logger };

/**
 * Paths redacted in every log line: the shared credential field names, plus `env` because a server's
 * environment is where upstream credentials live. Keys are matched wherever they appear one or two
 * levels down, so a header bag or a server env logged by mistake still comes out clean.
 */
const SECRET_KEYS = [...new Set([...credentialKeySpellings(), 'env'])];

const REDACT_PATHS = SECRET_KEYS.flatMap((key) => [key, `*.${key}`, `*.*.${key}`]);

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
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    formatters: {
      log(object) {
        for (const key of Object.keys(object)) {
          const value = object[key];
          if (typeof value === 'string') object[key] = redactString(value);
        }
        return object;
      },
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
