/**
 * A Map for the few entries a hot structure holds at a time (the calls in flight on one upstream session or one
 * client session), in two
 * packed arrays searched linearly. A `Map` that many short-lived entries go through grows a hash table in the old
 * generation that points at young objects, and the scavenger pays for it: W1 with 32 calls in flight on one
 * session promoted 207 MB in 8 s through the upstream client's pending `Map`, against 40 MB spread over 32
 * sessions (docs/benchmarks.md). The search is linear, so this is for tables that stay small (tens, not thousands).
 */
export class PackedTable<K, V> {
  readonly #keys: K[] = [];
  readonly #values: V[] = [];

  get size(): number {
    return this.#keys.length;
  }

  get(key: K): V | undefined {
    const index = this.#keys.indexOf(key);
    return index < 0 ? undefined : this.#values[index];
  }

  set(key: K, value: V): void {
    const index = this.#keys.indexOf(key);
    if (index >= 0) {
      this.#values[index] = value;
      return;
    }
    this.#keys.push(key);
    this.#values.push(value);
  }

  delete(key: K): boolean {
    const index = this.#keys.indexOf(key);
    if (index < 0) return false;
    // The last entry moves into the hole: order means nothing here.
    const last = this.#keys.length - 1;
    this.#keys[index] = this.#keys[last] as K;
    this.#values[index] = this.#values[last] as V;
    this.#keys.pop();
    this.#values.pop();
    return true;
  }

  clear(): void {
    this.#keys.length = 0;
    this.#values.length = 0;
  }

  values(): IterableIterator<V> {
    return this.#values.values();
  }

  /** A snapshot of the entries, so that a loop over them may delete. */
  entries(): Array<[K, V]> {
    return this.#keys.map((key, index) => [key, this.#values[index] as V]);
  }
}
