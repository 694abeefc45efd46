import type { Logger } from '../observability/logger.js';
import { watchFiles, type FileWatch } from '../util/watch-files.js';
import { catalogSnapshotHash, emptyCatalog, readCatalog } from './catalog-file.js';
import type { CatalogGuard } from './catalog-guard.js';
import { errorMessage } from '../errors/error-message.js';

const EMPTY_SNAPSHOT = catalogSnapshotHash(emptyCatalog());

/** One reload attempt that changed the approvals in force or was refused (not one that found the same approvals). */
export interface CatalogReloadEvent {
  readonly ok: boolean;
  /** The snapshot hash in force after the attempt: the new one, or the old one that stays. */
  readonly snapshotHash: string;
  readonly error?: string;
}

export interface CatalogFileStatus {
  readonly file: string;
  /** When the approvals in force were read (ISO 8601). */
  readonly loadedAt: string;
  /** Why the file's latest change was not applied; cleared by the next load that works. */
  readonly lastError?: string;
}

export interface CatalogReloaderOptions {
  /** The approvals file, absolute: the one the guard was built from. */
  readonly file: string;
  readonly logger: Pick<Logger, 'info' | 'warn'>;
  /** Reread the file when it changes. Without it only {@link CatalogReloader.reload} does. */
  readonly watch: boolean;
  /** Quiet period after the last file event; `mcpgate catalog approve` renames a whole file over the old one. */
  readonly debounceMs?: number;
  readonly onReload?: (event: CatalogReloadEvent) => void;
  readonly now?: () => Date;
}

/**
 * Puts a changed approvals file in force in a running gateway, so that `mcpgate catalog approve` releases a
 * quarantined tool without a restart (issue 7 §2). A file that is invalid (a hand edit with a wrong hash, broken
 * JSON) or missing keeps the approvals in force: refusing to start on it is right, but dropping the approvals of a
 * running gateway would quarantine every tool in `pinned` mode, or stop reporting drift in `observe` mode. The
 * error is logged, reported by the admin status, and recorded by the caller's `onReload`.
 */
export class CatalogReloader {
  readonly #guard: CatalogGuard;
  readonly #file: string;
  readonly #logger: Pick<Logger, 'info' | 'warn'>;
  readonly #onReload: ((event: CatalogReloadEvent) => void) | undefined;
  readonly #now: () => Date;
  readonly #watch: FileWatch | undefined;
  #loadedAt: Date;
  #lastError: string | undefined;
  #queue: Promise<void> = Promise.resolve();

  constructor(guard: CatalogGuard, options: CatalogReloaderOptions) {
    this.#guard = guard;
    this.#file = options.file;
    this.#logger = options.logger;
    this.#onReload = options.onReload;
    this.#now = options.now ?? (() => new Date());
    this.#loadedAt = this.#now();
    this.#watch = options.watch
      ? watchFiles([[options.file, 'catalog']], {
          debounceMs: options.debounceMs ?? 100,
          onChange: () => void this.reload(),
          onError: (dir, error) => this.#logger.warn({ dir, err: error.message }, 'catalog directory cannot be watched; approvals written there are applied at the next restart'),
        })
      : undefined;
  }

  status(): CatalogFileStatus {
    return { file: this.#file, loadedAt: this.#loadedAt.toISOString(), ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }) };
  }

  /** Rereads the file now; resolves once the approvals it holds are in force, or it was refused. Never rejects. */
  reload(): Promise<void> {
    // One at a time: two reads racing a rename could otherwise apply the older file last. Whatever goes wrong is
    // this attempt's refusal, never a rejection that would stop the queue (or the process, from a file event).
    this.#queue = this.#queue.then(() => this.#reloadOnce()).catch((error: unknown) => this.#refuse(errorMessage(error)));
    return this.#queue;
  }

  close(): void {
    this.#watch?.close();
  }

  async #reloadOnce(): Promise<void> {
    // An unreadable or invalid file throws: `reload` makes that this attempt's refusal.
    const approvals = await readCatalog(this.#file);
    if (approvals === undefined) {
      // No file and no approvals in force (observe mode starts so): nothing changed. A file that held the
      // approvals in force and is gone is another matter: they stay, and that is reported.
      if (this.#guard.snapshotHash === EMPTY_SNAPSHOT) this.#lastError = undefined;
      else this.#refuse(`approvals file ${this.#file} does not exist`);
      return;
    }
    const snapshotHash = catalogSnapshotHash(approvals);
    this.#lastError = undefined;
    // The same approvals (a rewrite, another key order, an edit undone): nothing to apply and nothing to record.
    if (snapshotHash === this.#guard.snapshotHash) return;
    this.#guard.reload(approvals);
    this.#loadedAt = this.#now();
    this.#logger.info({ file: this.#file, snapshotHash }, 'catalog approvals reloaded');
    this.#report({ ok: true, snapshotHash });
  }

  #refuse(error: string): void {
    this.#lastError = error;
    this.#logger.warn({ file: this.#file, err: error }, 'catalog approvals not reloaded: the approvals in force stay');
    this.#report({ ok: false, snapshotHash: this.#guard.snapshotHash, error });
  }

  /** A throwing handler is logged: the approvals in force are what they are whatever it does. */
  #report(event: CatalogReloadEvent): void {
    try {
      this.#onReload?.(event);
    } catch (error) {
      this.#logger.warn({ file: this.#file, err: errorMessage(error) }, 'catalog reload handler failed');
    }
  }
}
