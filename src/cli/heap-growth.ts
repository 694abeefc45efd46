import { setFlagsFromString } from 'node:v8';

/**
 * Sets V8's heap growing factor for this process (decision 0030). V8 counts the memory of every Buffer made
 * since the last full collection against the old generation's room, and after a full collection it leaves that
 * room at its floor (about 8 MB over what survived) when the gateway's own objects grow slowly, as they do
 * while it passes large results as bytes. A 1 MiB result makes about 2 MiB of Buffers, which scavenges rarely
 * come round to free, so the room runs out every dozen or so calls and every collection is a full one: W4 read
 * CPU per MB doubled for the rest of the process's life. Growing by a fixed factor keeps the room a multiple of
 * the live heap, which those Buffers do not fill between scavenges.
 *
 * The flag is read at each collection, so setting it after start-up takes effect; one given to node on its
 * command line wins. Returns whether it was set.
 */
export function applyHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv): boolean {
  if (percent === 0) return false;
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  return true;
}
