import { statSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';

export interface FileWatchOptions<K> {
  /**
   * Quiet period after the last event before the files of a key are looked at (editors write a file in several
   * steps); at most ten times this after the first event of a burst.
   */
  readonly debounceMs: number;
  /**
   * Called after a burst of events in a directory, for every key one of whose files there changed; and once for
   * every key as soon as the watch has started, since a change between the caller's read of the files and the start
   * of the watch raised no event (the caller rereads and finds the same text, or the change).
   */
  readonly onChange: (key: K) => void;
  /** A directory cannot be watched (missing, removed, out of watches): changes there are not seen. Never throws. */
  readonly onError: (dir: string, error: Error) => void;
}

export interface FileWatch {
  /** Stops watching and drops pending changes; idempotent. */
  close(): void;
}

/**
 * Watches files for changes, each under a key (a policy set, the catalog), and reports the key, debounced.
 * Directories are watched, not the files: editors and config-map updates replace a file by renaming a new one
 * over it, after which a watch on the old file sees nothing more. The event's file name is not trusted either (a
 * config-map swaps a `..data` symlink, not the file): after a burst of events in a directory, each file there is
 * stat'ed, and a key is reported only when one of its files is not what it was (another inode, size or time, or
 * gone, or back). So a busy directory (the SQLite database and its journal beside the files) costs a `stat` per
 * burst, not a reread. Watches never keep the process alive.
 */
export function watchFiles<K>(files: readonly (readonly [file: string, key: K])[], options: FileWatchOptions<K>): FileWatch {
  const byDir = new Map<string, Set<K>>();
  const filesOf = new Map<K, string[]>();
  /** Each file's signature when last looked at. */
  const seen = new Map<string, string>();
  for (const [file, key] of files) {
    const dir = dirname(file);
    byDir.set(dir, (byDir.get(dir) ?? new Set<K>()).add(key));
    const list = filesOf.get(key);
    if (list === undefined) filesOf.set(key, [file]);
    else list.push(file);
    seen.set(file, signature(file));
  }
  const changed = (key: K): boolean => {
    let any = false;
    for (const file of filesOf.get(key) ?? []) {
      const now = signature(file);
      if (now !== seen.get(file)) any = true;
      seen.set(file, now);
    }
    return any;
  };
  const timers = new Map<K, { timer: NodeJS.Timeout; firstAt: number }>();
  const watchers: FSWatcher[] = [];
  let closed = false;
  // A quiet period alone would never end in a directory that is written to all the time (the database beside
  // the files, under load): a burst is looked at no later than this after its first event.
  const maxWaitMs = options.debounceMs * 10;
  const schedule = (key: K): void => {
    if (closed) return;
    const now = Date.now();
    const pending = timers.get(key);
    if (pending !== undefined && now - pending.firstAt >= maxWaitMs) return;
    clearTimeout(pending?.timer);
    const timer = setTimeout(() => {
      timers.delete(key);
      if (!closed && changed(key)) options.onChange(key);
    }, options.debounceMs);
    timer.unref();
    timers.set(key, { timer, firstAt: pending?.firstAt ?? now });
  };
  for (const [dir, keys] of byDir) {
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, () => {
        for (const key of keys) schedule(key);
      });
    } catch (error) {
      // A directory that does not exist (yet), or no watches left: the caller says what is not seen, nothing fails.
      options.onError(dir, error instanceof Error ? error : new Error(String(error)));
      continue;
    }
    watcher.on('error', (error) => options.onError(dir, error));
    watchers.push(watcher);
  }
  // After the caller has its handle: the first report may come before any event, but never inside this call.
  queueMicrotask(() => {
    for (const key of filesOf.keys()) if (!closed) options.onChange(key);
  });
  return {
    close() {
      closed = true;
      for (const watcher of watchers.splice(0)) watcher.close();
      for (const { timer } of timers.values()) clearTimeout(timer);
      timers.clear();
    },
  };
}

/** What identifies a version of a file without reading it; `missing` when it cannot be stat'ed. */
function signature(file: string): string {
  try {
    const info = statSync(file, { bigint: true });
    return `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
  } catch {
    return 'missing';
  }
}
