/**
 * Compiles an RFC 6570 URI template into a RegExp that matches the URIs it can expand to. Only matching is
 * needed (to route resources/read to the server whose template owns the URI), so every expression becomes a
 * permissive group: `{x}` one path segment, `{+x}`/`{#x}` anything, `{?x}`/`{&x}` a query part.
 */
const cache = new Map<string, RegExp>();

export function compileTemplate(template: string): RegExp {
  const hit = cache.get(template);
  if (hit !== undefined) return hit;
  let source = '';
  let last = 0;
  for (const match of template.matchAll(/\{([^}]*)\}/g)) {
    source += escape(template.slice(last, match.index));
    const operator = match[1]?.[0] ?? '';
    if (operator === '+' || operator === '#') source += '.*';
    else if (operator === '?' || operator === '&') source += '(?:[?&][^#]*)?';
    else if (operator === '/' || operator === '.' || operator === ';') source += `(?:\\${operator}[^/?#]*)*`;
    else source += '[^/?#]+';
    last = (match.index ?? 0) + match[0].length;
  }
  source += escape(template.slice(last));
  const compiled = new RegExp(`^${source}$`, 's');
  if (cache.size < 10_000) cache.set(template, compiled);
  return compiled;
}

function escape(literal: string): string {
  return literal.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}
