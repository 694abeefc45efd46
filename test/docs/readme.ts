/**
 * The README's fenced blocks and how the readme-commands test treats each `sh` block. Every `sh` block is
 * preceded by a marker comment (invisible when rendered):
 *
 *   <!-- readme-test: run <walkthrough> -->        runs as written, in order with the walkthrough's other blocks
 *   <!-- readme-test: serve <walkthrough> -->      a command that serves in the foreground: run in the background
 *                                                  until the gateway answers /readyz, stopped when the walkthrough ends
 *   <!-- readme-test: inspector <walkthrough> -->  MCP Inspector commands: run only when the pinned Inspector is in
 *                                                  the npm cache (the test stays offline), else skipped with the reason
 *   <!-- readme-test: skip <reason> -->            illustrative: only checked for syntax, commands and config files
 */

export type Marker =
  | { readonly kind: 'run' | 'serve' | 'inspector'; readonly walkthrough: string }
  | { readonly kind: 'skip'; readonly reason: string };

export interface Block {
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly text: string;
  /** The marker on the last non-blank line before the fence; `null` when there is none or it is malformed. */
  readonly marker: Marker | null;
  /** The raw marker comment, when the line before the fence is one (well-formed or not). */
  readonly markerText?: string;
}

const FENCE_OPEN = /^```(\S*)\s*$/;
const FENCE_CLOSE = /^```\s*$/;
const MARKER = /^<!--\s*readme-test:\s*(.*?)\s*-->$/;
const MARKER_BODY = /^(run|serve|inspector)\s+([a-z][a-z0-9-]*)$|^skip\s+(\S.*)$/;

export function parseMarker(body: string): Marker | null {
  const match = MARKER_BODY.exec(body);
  if (match === null) return null;
  if (match[3] !== undefined) return { kind: 'skip', reason: match[3] };
  return { kind: match[1] as 'run' | 'serve' | 'inspector', walkthrough: match[2] as string };
}

export function readmeBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = FENCE_OPEN.exec(lines[index] as string);
    if (open === null) continue;
    const start = index;
    const body: string[] = [];
    for (index++; index < lines.length && !FENCE_CLOSE.test(lines[index] as string); index++) body.push(lines[index] as string);
    let previous = start - 1;
    while (previous >= 0 && (lines[previous] as string).trim() === '') previous--;
    const comment = previous >= 0 ? MARKER.exec((lines[previous] as string).trim()) : null;
    blocks.push({
      line: start + 1,
      lang: open[1] as string,
      text: `${body.join('\n')}\n`,
      marker: comment === null ? null : parseMarker(comment[1] as string),
      ...(comment === null ? {} : { markerText: comment[0] }),
    });
  }
  return blocks;
}

/** One thing the test runs: consecutive `run` blocks of a walkthrough share one shell (so `$!` and `wait` work). */
export interface Step {
  readonly kind: 'run' | 'serve' | 'inspector';
  readonly lines: readonly number[];
  readonly text: string;
}

export function walkthroughs(blocks: readonly Block[]): Map<string, Step[]> {
  const result = new Map<string, Step[]>();
  for (const block of blocks) {
    const marker = block.marker;
    if (marker === null || marker.kind === 'skip') continue;
    const steps = result.get(marker.walkthrough) ?? [];
    const last = steps.at(-1);
    if (marker.kind === 'run' && last?.kind === 'run') {
      steps[steps.length - 1] = { kind: 'run', lines: [...last.lines, block.line], text: last.text + block.text };
    } else {
      steps.push({ kind: marker.kind, lines: [block.line], text: block.text });
    }
    result.set(marker.walkthrough, steps);
  }
  return result;
}

/**
 * Shell variables and functions a step defines, so the next step (another bash process) starts with them, as
 * the next command in the reader's terminal would.
 */
export function definedNames(text: string): { variables: string[]; functions: string[] } {
  const variables = new Set<string>();
  for (const match of text.matchAll(/(?:^|[\s;&(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=/gm)) variables.add(match[1] as string);
  const functions = new Set<string>();
  for (const match of text.matchAll(/^\s*([A-Za-z_][A-Za-z0-9_-]*)\(\)\s*\{/gm)) functions.add(match[1] as string);
  return { variables: [...variables], functions: [...functions] };
}

/** The `mcpgate` command paths a block invokes (`["catalog", "approve"]`), at most two words deep. */
export function mcpgateCommands(text: string): string[][] {
  const commands: string[][] = [];
  for (const line of text.split('\n')) {
    const code = line.replace(/\s#.*$/, '');
    for (const match of code.matchAll(/(?:^|[\s|;&(])mcpgate(?![\w.-])((?:\s+\S+)*)/g)) {
      const words: string[] = [];
      for (const word of (match[1] as string).trim().split(/\s+/)) {
        if (words.length === 2 || !/^[a-z][a-z-]*$/.test(word)) break;
        words.push(word);
      }
      if (words.length > 0) commands.push(words);
    }
  }
  return commands;
}

/** Relative config files a block names with `-c`/`--config` or in a `NAME=<file>.yaml` assignment. */
export function configFiles(text: string): string[] {
  const files = new Set<string>();
  for (const match of text.matchAll(/(?:^|\s)(?:-c|--config)\s+([^\s$'"]+)/gm)) files.add(match[1] as string);
  for (const match of text.matchAll(/(?:^|\s)[A-Za-z_][A-Za-z0-9_]*=([^\s$'"]+\.ya?ml)(?=\s|$)/gm)) files.add(match[1] as string);
  return [...files].filter((file) => !file.startsWith('/'));
}
