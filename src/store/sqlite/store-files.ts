import { accessSync, constants, statSync } from 'node:fs';

/**
 * What is wrong with an SQLite file's parts that its connections cannot be trusted to report: undefined when
 * nothing is.
 *
 * In WAL mode every connection maps `<file>-shm` (the WAL index) with `mmap` and writes it in place. When that
 * file is made immutable (`chattr +i`) or its file system read-only, the kernel answers the next write to a page
 * written back since with SIGBUS (ext4 refuses `page_mkwrite` on an immutable inode), and the process dies without
 * a line of log (issue 23 §5). No SQLite setting avoids the map except `locking_mode = EXCLUSIVE`, which would
 * lock out the writer thread's connection and the CLI. So each connection asks before it touches the file:
 * `access(W_OK)` fails with EPERM on an immutable file even for root and with EROFS on a read-only mount; the
 * database file answers ENOENT once deleted. The check narrows the window to one statement or batch rather than closing it.
 *
 * `inode`, when given, is the database file's inode when it was opened: a different one (or none) means the file
 * was deleted or replaced, and a connection would go on writing to a file nobody will read again (§6).
 */
export function storeFilesProblem(path: string, inode?: number): string | undefined {
  for (const file of [`${path}-shm`, path]) {
    try {
      accessSync(file, constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // No WAL index before the first transaction, nor once deleted: nothing is mapped that could fault.
      if (code === 'ENOENT' && file !== path) continue;
      return `${file} cannot be written (${code ?? 'error'})`;
    }
  }
  if (inode === undefined) return undefined;
  const now = statSync(path, { throwIfNoEntry: false })?.ino;
  return now === inode ? undefined : `${path} was deleted or replaced while open`;
}

/** The database file's inode, to tell later that the path names another file (or none). */
export function fileInode(path: string): number | undefined {
  return statSync(path, { throwIfNoEntry: false })?.ino;
}
