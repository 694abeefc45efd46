import { GatewayError } from '../errors/gateway-error.js';
import type { ErrorCode } from '../errors/codes.js';

/** One problem found in a configuration file. */
export interface ConfigIssue {
  /** Dotted path of the offending value or key, e.g. `servers.fs.args.0`; empty for the whole document. */
  readonly path: string;
  readonly message: string;
  /** 1-based position in the file, when it could be located. */
  readonly line?: number;
  readonly column?: number;
}

export type ConfigErrorCode = Extract<
  ErrorCode,
  'MCPGATE_ERR_CONFIG_INVALID' | 'MCPGATE_ERR_CONFIG_ENV_MISSING' | 'MCPGATE_ERR_CONFIG_READ'
>;

/**
 * A configuration that cannot be used: unreadable (`MCPGATE_ERR_CONFIG_READ`), referring to unset environment
 * variables (`MCPGATE_ERR_CONFIG_ENV_MISSING`), or invalid (`MCPGATE_ERR_CONFIG_INVALID`). It carries every
 * issue found, not just the first, so one run of `mcpgate check` shows everything to fix. The message lists
 * the issues too, so a gateway that fails at start-up prints them without special handling.
 */
export class ConfigError extends GatewayError {
  readonly issues: readonly ConfigIssue[];
  /** The file name used in messages, when the text came from a file. */
  readonly fileName: string | undefined;

  constructor(code: ConfigErrorCode, issues: readonly ConfigIssue[], fileName?: string, cause?: unknown) {
    // No `data`: config errors stay in the process, and values may have come from secrets in the environment.
    super(code, describe(code, issues.map(oneLine), fileName), cause === undefined ? {} : { cause });
    this.name = 'ConfigError';
    this.issues = Object.freeze(issues.map((issue) => Object.freeze(oneLine(issue))));
    this.fileName = fileName;
  }
}

/**
 * Keys and values from the file, and parser messages that quote them, may hold line breaks or bidirectional
 * overrides; escaped, each issue stays the one line editors and CI annotators parse, and cannot disguise itself.
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what this matches
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeUnprintable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function oneLine(issue: ConfigIssue): ConfigIssue {
  return { ...issue, path: escapeUnprintable(issue.path), message: escapeUnprintable(issue.message) };
}

/** Formats an issue as `<file>:<line>:<col>: <path>: <message>`, leaving out the parts that are unknown. */
export function formatConfigIssue(fileName: string | undefined, issue: ConfigIssue): string {
  let where = fileName ?? '<config>';
  if (issue.line !== undefined) {
    where += `:${issue.line}`;
    if (issue.column !== undefined) where += `:${issue.column}`;
  }
  return issue.path === '' ? `${where}: ${issue.message}` : `${where}: ${issue.path}: ${issue.message}`;
}

function describe(code: ConfigErrorCode, issues: readonly ConfigIssue[], fileName: string | undefined): string {
  const subject = fileName === undefined ? 'configuration' : `configuration ${fileName}`;
  const headline =
    code === 'MCPGATE_ERR_CONFIG_READ'
      ? `cannot read ${subject}`
      : code === 'MCPGATE_ERR_CONFIG_ENV_MISSING'
        ? `${subject} refers to unset environment variables`
        : `${subject} is invalid`;
  return [headline, ...issues.map((issue) => `  ${formatConfigIssue(fileName, issue)}`)].join('\n');
}
