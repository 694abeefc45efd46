import { readFile, stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import type { SecretValue } from '../config/credentials-schema.js';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * Secrets are API tokens, client secrets and PEM keys: kilobytes at most. The cap keeps a mistyped path (a log
 * file, a disk image) from being read into memory and sent as a header.
 */
export const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * Resolves a `SecretValue` to its string: an inline value as is (`${ENV}` was interpolated at load), a `{ file }`
 * read relative to `baseDir` (the config file's folder) and stripped of one trailing newline, because editors
 * and `echo` add one and a newline inside a header value would be refused or worse.
 *
 * `what` labels the value in errors (e.g. `servers.github.credentials.clientSecret`). Errors name the label and
 * the file path, never the content.
 */
export async function resolveSecretValue(value: SecretValue, baseDir?: string, what = 'secret value'): Promise<string> {
  if (typeof value === 'string') {
    if (value.length === 0) throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${what} is empty`, { data: { path: what } });
    return value;
  }
  const path = isAbsolute(value.file) || baseDir === undefined ? resolve(value.file) : resolve(baseDir, value.file);
  let content: string;
  try {
    const info = await stat(path);
    // A FIFO or a device would block the read or never end; only a regular file can hold a secret.
    if (!info.isFile()) {
      throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${what}: ${path} is not a regular file`, { data: { path: what } });
    }
    if (info.size > MAX_SECRET_FILE_BYTES) {
      throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${what}: ${path} is larger than ${MAX_SECRET_FILE_BYTES} bytes`, {
        data: { path: what },
      });
    }
    content = await readFile(path, 'utf8');
  } catch (error) {
    if (GatewayError.is(error)) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new GatewayError('MCPGATE_ERR_CONFIG_READ', `${what}: cannot read the secret file ${path} (${code})`, { data: { path: what } });
  }
  const trimmed = content.endsWith('\r\n') ? content.slice(0, -2) : content.endsWith('\n') ? content.slice(0, -1) : content;
  if (trimmed.length === 0) {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${what}: the secret file ${path} is empty`, { data: { path: what } });
  }
  return trimmed;
}
