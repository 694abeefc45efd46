import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths redacted in every log line. Keys are matched wherever they appear one or two levels down, so a
 * header bag or a server env logged by mistake still comes out clean.
 */
const SECRET_KEYS = [
  'authorization',
  'Authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-mcpgate-key',
  'x-api-key',
  'apiKey',
  'api_key',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'clientSecret',
  'client_secret',
  'password',
  'secret',
  'env',
];

const REDACT_PATHS = SECRET_KEYS.flatMap((key) => [key, `*.${key}`, `*.*.${key}`]);

/** Strings that look like credentials even when they sit under an innocent key. */
const CREDENTIAL_PATTERN =
  /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}|\b(mcpg_|sk-|ghp_|xox[abp]-|AKIA)[A-Za-z0-9_-]{8,}|(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)/g;

/** Masks credential-looking substrings. Exported so that other sinks (audit, errors) use the same rule. */
export function redactString(value: string): string {
  return value.replace(CREDENTIAL_PATTERN, (_match, bearer: string | undefined, prefix: string | undefined) => {
    if (bearer !== undefined) return `${bearer}[REDACTED]`;
    if (prefix !== undefined) return `${prefix}[REDACTED]`;
    return '[REDACTED]';
  });
}

export interface LoggerSettings {
  level: string;
  name?: string;
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
  return settings.destination ? pino(options, settings.destination) : pino(options, pino.destination({ fd: 2, sync: false }));
}
