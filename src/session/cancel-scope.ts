/**
 * Cancellation of one downstream request. Lighter than an AbortController (no EventTarget), which matters
 * because every call creates one (issue 3 profile); it fits the `CancelSignal` shape UpstreamClient takes.
 */
export class CancelScope {
  aborted = false;
  private listener: (() => void) | undefined;

  /** One listener at a time: a request is forwarded to exactly one upstream. Returns its remover. */
  subscribe(listener: () => void): () => void {
    this.listener = listener;
    return () => {
      if (this.listener === listener) this.listener = undefined;
    };
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listener = this.listener;
    this.listener = undefined;
    listener?.();
  }
}
