/**
 * Compiles a tool-name glob (`*` any run, `?` one character; everything else literal) to a RegExp.
 * Tool names are short ASCII, so anchored regexes are cheap and exact.
 */
export function compileGlob(glob: string): RegExp {
  let source = '';
  for (const char of glob) {
    if (char === '*') source += '.*';
    else if (char === '?') source += '.';
    else source += char.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 's');
}

export function compileGlobs(globs: readonly string[] | undefined): RegExp[] | undefined {
  return globs?.map(compileGlob);
}

export function matchesAny(patterns: readonly RegExp[], value: string): boolean {
  for (const pattern of patterns) if (pattern.test(value)) return true;
  return false;
}
