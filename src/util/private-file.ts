import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * A secret kept in a file of its own beside the database (the API-key HMAC secret, the receipt signing key):
 * read only when nobody else could have read or replaced it, and created at most once even when two processes
 * start together. The caller turns each `problem` into its own error.
 */
export interface PrivateFileOptions {
  /** Builds the error for a problem with the file ("is not a regular file", …). */
  readonly fail: (problem: string, cause?: unknown) => Error;
  /** What an operator should do besides chmod when the file was readable by others ("rotate keys"…). */
  readonly leakAdvice: string;
  /** Larger files are refused before they are read. */
  readonly maxBytes?: number;
}

/** The file's text, or `undefined` when there is no file; refuses anything but a regular file of mode 0600 or less. */
export async function readPrivateFile(path: string, options: PrivateFileOptions): Promise<string | undefined> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw options.fail('cannot be read', error);
  }
  if (!info.isFile()) throw options.fail('is not a regular file');
  if ((info.mode & 0o077) !== 0) {
    const mode = (info.mode & 0o777).toString(8).padStart(3, '0');
    throw options.fail(`is accessible to group or others (mode ${mode}); run chmod 600 on it, and ${options.leakAdvice}`);
  }
  if (options.maxBytes !== undefined && info.size > options.maxBytes) throw options.fail(`is larger than ${options.maxBytes} bytes`);
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw options.fail('cannot be read', error);
  }
}

/**
 * Writes `content` to `path` unless a file is there already: a uniquely named temp file (O_EXCL, 0600) is
 * written and synced, then hard-linked into place. `link` fails with EEXIST instead of replacing, so exactly one
 * of two processes starting together wins, and nobody ever sees a half-written file. Returns whether this call
 * created the file; when it did not, the caller reads the winner's.
 */
export async function createPrivateFileOnce(path: string, content: string, fail: PrivateFileOptions['fail']): Promise<boolean> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    await handle.writeFile(content, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, path);
    return true;
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw fail('cannot be created', error);
    return false;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

function isErrno(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
