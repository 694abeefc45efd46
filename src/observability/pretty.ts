import type { DestinationStream } from 'pino';

/** pino's numeric levels, as a person reads them. */
const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** ANSI colours of the level names, only when the output is a terminal. */
const LEVEL_COLOURS: Readonly<Record<number, string>> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };

/** Fields the line already shows (time, level, message), or that say the same on every line of one process. */
const SHOWN_ELSEWHERE = new Set(['time', 'level', 'msg', 'pid', 'hostname', 'name']);

/** A space or `=` would make a bare `key=value` ambiguous; quotes, backslashes and control characters JSON escapes. */
const NEEDS_QUOTES = /[\s=]/;

export interface PrettyOptions {
  readonly colours: boolean;
}

/**
 * Formats one pino JSON line as `HH:MM:SS.mmm LEVEL message key=value …`, with an error's stack on the lines
 * below. The line it reads has been redacted already (pino redacts before it serialises), so nothing here can
 * reveal what the JSON form would not. A line that is not JSON is passed through as it is.
 */
export function formatPrettyLine(line: string, options: PrettyOptions): string {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return `${line.trimEnd()}\n`;
  const fields = record as Record<string, unknown>;
  const level = typeof fields.level === 'number' ? fields.level : 30;
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const colour = LEVEL_COLOURS[level];
  const shownLevel = options.colours && colour !== undefined ? `\u001b[${colour}m${name}\u001b[39m` : name;
  const parts = [clockTime(fields.time), shownLevel, typeof fields.msg === 'string' ? fields.msg : ''];
  let stack: string | undefined;
  for (const [key, value] of Object.entries(fields)) {
    if (SHOWN_ELSEWHERE.has(key) || value === undefined) continue;
    if (key === 'err' && isSerializedError(value)) {
      parts.push(`err=${shown(value.message)}`);
      stack = typeof value.stack === 'string' ? value.stack : undefined;
      continue;
    }
    parts.push(`${key}=${shown(value)}`);
  }
  const head = parts.filter((part) => part !== '').join(' ');
  return stack === undefined ? `${head}\n` : `${head}\n${indent(stack)}\n`;
}

/** A destination that writes pretty lines to `target` (the gateway's stderr). */
export function prettyDestination(target: DestinationStream, options: PrettyOptions): DestinationStream {
  return { write: (line: string) => target.write(formatPrettyLine(line, options)) };
}

function clockTime(time: unknown): string {
  const date = typeof time === 'number' ? new Date(time) : new Date();
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

function shown(value: unknown): string {
  if (typeof value === 'string') {
    const json = JSON.stringify(value);
    return value !== '' && json.length === value.length + 2 && !NEEDS_QUOTES.test(value) ? value : json;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return JSON.stringify(value);
}

function isSerializedError(value: unknown): value is { message: string; stack?: unknown } {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}
