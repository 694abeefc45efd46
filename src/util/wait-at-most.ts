/**
 * Resolves once `promise` settles or `ms` have passed, whichever comes first, and never rejects: the caller looks
 * at the state it waited for, not at the promise. The timer is cleared either way, so it neither keeps the
 * process alive nor outlives the wait.
 */
export async function waitAtMost(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    const settled = promise.then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([settled, elapsed]);
  } finally {
    clearTimeout(timer);
  }
}
