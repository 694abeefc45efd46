// The order contenders take their turns in (W1's slices and rounds), as a Williams design: a Latin square of
// orders in which every contender comes right after every other one equally often.
//
// Why not a plain rotation (A B C D, B C D A, …): it puts each contender after the same predecessor nearly every
// time (B after A, C after B, …), so whatever a contender leaves running on the shared core when its turn ends
// (its audit writer's ingest of the turn's rows, its GC) always lands on the same successor. In W1 that read as
// an A/A lean of 1.038 over 39 rounds, `mcpgate (again)`, which always followed `mcpgate`, above it in 28
// (docs/benchmarks.md, "The runs of 2026-12-06, night").

/** The first order of the design: 0, 1, n−1, 2, n−2, …; the others are it shifted. */
function firstOrder(n) {
  const order = [0];
  for (let step = 1; order.length < n; step += 1) {
    order.push(step);
    if (order.length < n) order.push(n - step);
  }
  return order;
}

/**
 * The `k`-th order of `n` contenders (indices 0…n−1). Over n consecutive orders (2n when n is odd, the second n
 * being the first reversed) every ordered pair of contenders is adjacent equally often; each contender also
 * takes each place equally often, as a rotation's do.
 */
export function turnOrder(n, k) {
  if (n <= 1) return n === 1 ? [0] : [];
  const rows = n % 2 === 0 ? n : 2 * n;
  const row = ((k % rows) + rows) % rows;
  const shifted = firstOrder(n).map((index) => (index + row) % n);
  return row >= n ? shifted.reverse() : shifted;
}
