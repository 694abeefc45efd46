import { ConfigError, formatConfigIssue } from '../config/config-error.js';
import { GatewayError } from '../errors/gateway-error.js';
import { errorMessage } from '../errors/error-message.js';

/**
 * How a command's failure reaches the operator (issue 22 B7). An expected failure (a GatewayError, a mistake in
 * the command line) is one line, with the error's code when it has one; a configuration error is its issues, one
 * `file:line:col: path: message` line each. Anything else is a bug: one line saying so, and a distinct exit code
 * so that scripts can tell it from a refusal. The stack is printed only with `--debug`, for every kind.
 */

/** Exit code of an unexpected error (sysexits' EX_SOFTWARE), distinct from a command's own 1, 2 and 3. */
export const EXIT_INTERNAL = 70;

/** A mistake in the command line; reported as one line, exit code 1. */
export class UsageError extends Error {}

export interface ErrorReport {
  /** The lines for stderr. */
  readonly lines: readonly string[];
  readonly exitCode: number;
}

/** One line: a message that lists problems on lines of their own is joined, so nothing reads like a stack. */
function flatten(message: string): string {
  return message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
}

/** The report of `error` thrown by `mcpgate <command>`; with `debug`, the stack follows. */
export function reportError(command: string, error: unknown, debug: boolean): ErrorReport {
  const stack = debug && error instanceof Error && error.stack !== undefined ? [error.stack] : [];
  const prefix = `mcpgate ${command}:`;
  if (error instanceof ConfigError) {
    const headline = error.message.split('\n')[0] ?? '';
    const issues = error.issues.map((issue) => formatConfigIssue(error.fileName, issue));
    return { lines: [`${prefix} ${headline} (${error.code})`, ...issues, ...stack], exitCode: 1 };
  }
  if (GatewayError.is(error)) return { lines: [`${prefix} ${flatten(error.message)} (${error.code})`, ...stack], exitCode: 1 };
  if (error instanceof UsageError) return { lines: [`${prefix} ${flatten(error.message)}`, ...stack], exitCode: 1 };
  const hint = debug ? '' : ' (run with --debug for the stack)';
  return { lines: [`${prefix} internal error: ${flatten(errorMessage(error))}${hint}`, ...stack], exitCode: EXIT_INTERNAL };
}
