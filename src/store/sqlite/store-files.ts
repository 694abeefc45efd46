import { accessSync, constants, statSync } from 'node:fs';

/**
 * What is wrong with an SQLite file's parts that its connections cannot be trusted to report: undefined when
 * nothing is.
 *
 * In WAL mode every connection maps `<file>-shm` (the WAL index) with `mmap` and writes it in place, readers
 * included (their read marks). When that file is made immutable (`chattr +i`) or its file system read-only, the
 * kernel answers the next write to a page written back since with SIGBUS (ext4 refuses `page_mkwrite` on an
 * immutable inode), and the process dies without a line of log (issue 23 §5). No SQLite setting avoids the map
 * but `locking_mode = EXCLUSIVE`, which would lock out the writer thread's connection and the CLI. So each
 * connection asks before it touches the file: `access(W_OK)` fails with EPERM on an immutable file even for root
 * and with EROFS on a read-only mount. The check narrows the window to one statement or batch; it cannot close it.
 */
export function walIndexProblem(path: string): string | undefined {
  try {
    accessSync(`${path}-shm`, constants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // No WAL index before the first transaction, nor once deleted: nothing is mapped that could fault.
    return code === 'ENOENT' ? undefined : `${path}-shm cannot be written (${code ?? 'error'})`;
  }
}

/**
 * {@link walIndexProblem}, and whether a write would reach a file anyone reads again: the database must be
 * writable at its path and, with `inode` (the file's when it was opened), still be that file. A file deleted or
 * replaced while open takes every later commit with it when the process exits (issue 23 §6).
 */
export function storeFilesProblem(path: string, inode?: number): string | undefined {
  const walIndex = walIndexProblem(path);
  if (walIndex !== undefined) return walIndex;
  try {
    accessSync(path, constants.W_OK);
  } catch (error) {
    return `${path} cannot be written (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  if (inode === undefined || fileInode(path) === inode) return undefined;
  return `${path} was replaced while open`;
}

/** The database file's inode, to tell later that the path names another file (or none). */
export function fileInode(path: string): number | undefined {
  return statSync(path, { throwIfNoEntry: false })?.ino;
}
