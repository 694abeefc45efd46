// Aggregation across rounds (median with min–max, as issue 3 asks) and the least-squares slope used for
// memory per session and memory growth per minute.

export function median(values) {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** { median, min, max, n } of the finite values. */
export function spread(values) {
  const finite = values.filter((value) => Number.isFinite(value));
  if (finite.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}

/** Spread of one field (a dotted path) over a list of per-round results. */
export function spreadOf(results, path) {
  return spread(results.map((result) => path.split('.').reduce((value, key) => value?.[key], result)));
}

/** Least-squares slope and intercept of y over x. */
export function slope(points) {
  const n = points.length;
  if (n < 2) return { slope: NaN, intercept: NaN };
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - meanX) * (y - meanY);
    den += (x - meanX) ** 2;
  }
  const value = den === 0 ? NaN : num / den;
  return { slope: value, intercept: meanY - value * meanX };
}

/** Formats a spread: `12.3 (11.9–13.0)`; a single value without its range. */
export function fmt(value, digits = 1) {
  if (value === undefined || value === null) return '–';
  if (typeof value === 'number') return Number.isFinite(value) ? value.toFixed(digits) : '–';
  if (!Number.isFinite(value.median)) return '–';
  const main = value.median.toFixed(digits);
  if (value.n <= 1 || value.min === value.max) return main;
  return `${main} (${value.min.toFixed(digits)}–${value.max.toFixed(digits)})`;
}

/** Ratio of two spreads' medians, formatted `×0.85`. */
export function ratio(a, b, digits = 2) {
  const top = typeof a === 'number' ? a : a?.median;
  const bottom = typeof b === 'number' ? b : b?.median;
  if (!Number.isFinite(top) || !Number.isFinite(bottom) || bottom === 0) return '–';
  return `×${(top / bottom).toFixed(digits)}`;
}

export function mib(bytes, digits = 1) {
  return Number.isFinite(bytes) ? (bytes / 1048576).toFixed(digits) : '–';
}
