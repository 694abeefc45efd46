import { errorMessage } from '../errors/error-message.js';
import type { Logger } from '../observability/logger.js';
import { Periodic } from '../util/periodic.js';
import { watchFiles, type FileWatch } from '../util/watch-files.js';
import type { CatalogGuard } from './catalog-guard.js';
import { mayHaveChanged, NO_APPROVALS, type CatalogSource, type LoadedCatalog } from './catalog-source.js';

/** One reload attempt that changed the approvals in force or was refused (not one that found the same approvals). */
export interface CatalogReloadEvent {
  readonly ok: boolean;
  /** The snapshot hash in force after the attempt: the new one, or the old one that stays. */
  readonly snapshotHash: string;
  readonly error?: string;
}

export interface CatalogSourceStatus {
  readonly source: CatalogSource['kind'];
  /** The approvals file (`source: file`). */
  readonly file?: string;
  /** The store's version in force (`source: store`); 0 while the store holds none. */
  readonly version?: number;
  /** When the approvals in force were read (ISO 8601). */
  readonly loadedAt: string;
  /** Why the latest change was not applied; cleared by the next read that works. */
  readonly lastError?: string;
}

export interface CatalogReloaderOptions {
  /** Where the guard's approvals came from. */
  readonly source: CatalogSource;
  /** What the guard was built from; absent when there were none. */
  readonly loaded?: LoadedCatalog;
  readonly logger: Pick<Logger, 'info' | 'warn'>;
  /** Follow changes: watch the file, or poll the store every `pollEveryMs`. Without it only {@link CatalogReloader.reload} does. */
  readonly watch: boolean;
  /** Quiet period after the last file event; `mcpgate catalog approve` renames a whole file over the old one. */
  readonly debounceMs?: number;
  /** How often the store is asked for a newer version (`gateway.catalog.pollEvery`). */
  readonly pollEveryMs?: number;
  readonly onReload?: (event: CatalogReloadEvent) => void;
  readonly now?: () => Date;
}

/**
 * Puts changed approvals in force in a running gateway, so that `mcpgate catalog approve` releases a quarantined tool
 * without a restart (issue 7 §2): on every replica, within `pollEvery`, when approvals live in the store. Approvals
 * that cannot be used (a hand edit with a wrong hash, broken JSON), or that are gone, keep the approvals in force:
 * refusing to start on them is right, but dropping the approvals of a running gateway would quarantine every tool
 * in `pinned` mode, or stop reporting drift in `observe` mode. The error is logged, reported by the admin status,
 * and recorded by the caller's `onReload`, once until it changes: a store that stays unreachable is one report,
 * not one every poll.
 */
export class CatalogReloader {
  readonly #guard: CatalogGuard;
  readonly #source: CatalogSource;
  readonly #logger: Pick<Logger, 'info' | 'warn'>;
  readonly #onReload: ((event: CatalogReloadEvent) => void) | undefined;
  readonly #now: () => Date;
  readonly #watch: FileWatch | undefined;
  readonly #poll: Periodic | undefined;
  #loaded: LoadedCatalog | undefined;
  #loadedAt: Date;
  #lastError: string | undefined;
  #queue: Promise<void> = Promise.resolve();

  constructor(guard: CatalogGuard, options: CatalogReloaderOptions) {
    this.#guard = guard;
    this.#source = options.source;
    this.#loaded = options.loaded;
    this.#logger = options.logger;
    this.#onReload = options.onReload;
    this.#now = options.now ?? (() => new Date());
    this.#loadedAt = this.#now();
    const { source } = options;
    this.#watch =
      options.watch && source.kind === 'file'
        ? watchFiles([[source.where, 'catalog']], {
            debounceMs: options.debounceMs ?? 100,
            onChange: () => void this.reload(),
            onError: (dir, error) => this.#logger.warn({ dir, err: error.message }, 'catalog directory cannot be watched; approvals written there are applied at the next restart'),
          })
        : undefined;
    this.#poll = options.watch && source.kind === 'store' ? new Periodic(() => this.reload(), options.pollEveryMs ?? 2000) : undefined;
    this.#poll?.start({ now: false });
  }

  status(): CatalogSourceStatus {
    return {
      source: this.#source.kind,
      ...(this.#source.kind === 'file' ? { file: this.#source.where } : { version: this.#loaded?.version ?? 0 }),
      loadedAt: this.#loadedAt.toISOString(),
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  /** Rereads the approvals now; resolves once the ones read are in force, or were refused. Never rejects. */
  reload(): Promise<void> {
    // One at a time: two reads racing a rename could otherwise apply the older file last. Whatever goes wrong is
    // this attempt's refusal, never a rejection that would stop the queue (or the process, from a file event).
    this.#queue = this.#queue.then(() => this.#reloadOnce()).catch((error: unknown) => this.#refuse(errorMessage(error)));
    return this.#queue;
  }

  /** Stops following changes and waits for a read under way, so none reaches a store or audit log being closed. */
  async close(): Promise<void> {
    this.#watch?.close();
    await this.#poll?.stop();
    await this.#queue;
  }

  async #reloadOnce(): Promise<void> {
    if (!(await mayHaveChanged(this.#source, this.#loaded))) {
      this.#lastError = undefined;
      return;
    }
    // Approvals that cannot be read or used throw: `reload` makes that this attempt's refusal.
    const loaded = await this.#source.read();
    if (loaded === undefined) {
      // None, and none in force (observe mode starts so): nothing changed. Approvals in force that are gone are
      // another matter: they stay, and that is reported.
      if (this.#guard.snapshotHash === NO_APPROVALS.snapshotHash) this.#lastError = undefined;
      else this.#refuse(this.#source.kind === 'file' ? `approvals file ${this.#source.where} does not exist` : 'the control-plane store holds no approvals any more');
      return;
    }
    this.#lastError = undefined;
    this.#loaded = loaded;
    // The same approvals (a rewrite, another key order, an edit undone): nothing to apply and nothing to record.
    if (loaded.snapshotHash === this.#guard.snapshotHash) return;
    this.#guard.reload(loaded.catalog);
    this.#loadedAt = this.#now();
    this.#logger.info({ source: this.#source.where, version: loaded.version, snapshotHash: loaded.snapshotHash }, 'catalog approvals reloaded');
    this.#report({ ok: true, snapshotHash: loaded.snapshotHash });
  }

  #refuse(error: string): void {
    if (error === this.#lastError) return;
    this.#lastError = error;
    this.#logger.warn({ source: this.#source.where, err: error }, 'catalog approvals not reloaded: the approvals in force stay');
    this.#report({ ok: false, snapshotHash: this.#guard.snapshotHash, error });
  }

  /** A throwing handler is logged: the approvals in force are what they are whatever it does. */
  #report(event: CatalogReloadEvent): void {
    try {
      this.#onReload?.(event);
    } catch (error) {
      this.#logger.warn({ source: this.#source.where, err: errorMessage(error) }, 'catalog reload handler failed');
    }
  }
}
