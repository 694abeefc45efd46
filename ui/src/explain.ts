import { admin, ApiError } from './api.js';
import { el, show, table, type Child } from './dom.js';

interface Line {
  readonly level: string;
  readonly subjectId: string;
  readonly record: string;
  readonly verdict: string;
  readonly reason: string;
}

interface Explanation {
  readonly allowed: boolean;
  readonly summary: string;
  readonly tool?: { readonly exposed?: string; readonly server?: string; readonly upstream?: string; readonly visible?: boolean; readonly reason?: string };
  readonly policy?: { readonly decidingLevel?: string; readonly denial?: string; readonly lines?: readonly Line[]; readonly warnings?: readonly string[] };
  readonly cedar?: unknown;
}

function input(name: string, label: string, value: string, required: boolean): Child[] {
  return [el('label', { for: `explain-${name}` }, label), el('input', { id: `explain-${name}`, name, value, autocomplete: 'off', ...(required ? { required: '' } : {}) })];
}

/**
 * The explain playground (`GET /admin/v1/explain`): whether a key may call a tool and why, level by level, with
 * the Cedar decision when policies are configured. Nothing reaches an upstream.
 */
export async function showExplain(values: Readonly<Record<string, string>> = {}): Promise<void> {
  const form = el(
    'form',
    { 'aria-labelledby': 'explain-title' },
    el('h2', { id: 'explain-title' }, 'Ask'),
    ...input('key', 'Key id or prefix', values.key ?? '', true),
    ...input('tool', 'Tool, as a client names it', values.tool ?? '', true),
    ...input('server', 'Server (for an unprefixed name)', values.server ?? '', false),
    ...input('ip', 'Client address', values.ip ?? '', false),
    el('button', { type: 'submit' }, 'Explain'),
  );
  let answer: Child = null;
  if (values.key !== undefined && values.tool !== undefined) {
    const params = new URLSearchParams();
    for (const name of ['key', 'tool', 'server', 'ip']) {
      const value = values[name]?.trim() ?? '';
      if (value !== '') params.set(name, value);
    }
    try {
      const { explanation } = await admin<{ explanation: Explanation }>('GET', `/explain?${params.toString()}`);
      const lines = explanation.policy?.lines ?? [];
      answer = el(
        'section',
        { 'aria-labelledby': 'explain-verdict' },
        el('h2', { id: 'explain-verdict' }, explanation.allowed ? 'Allowed' : 'Denied'),
        el('p', {}, explanation.summary),
        explanation.tool === undefined ? null : el('p', {}, `Tool ${explanation.tool.exposed ?? ''} → server ${explanation.tool.server ?? '?'}, upstream name ${explanation.tool.upstream ?? '?'}: ${explanation.tool.reason ?? ''}`),
        table('Each level', ['Level', 'Subject', 'Record', 'Verdict', 'Reason'], lines.map((line): Child[] => [line.level, line.subjectId, line.record, line.verdict, line.reason])),
        explanation.cedar === undefined ? null : el('figure', {}, el('figcaption', {}, 'Cedar'), el('pre', {}, JSON.stringify(explanation.cedar, null, 2))),
        ...(explanation.policy?.warnings ?? []).map((warning) => el('p', { class: 'error' }, warning)),
      );
    } catch (error) {
      answer = el('p', { class: 'error', role: 'alert' }, error instanceof ApiError ? error.message : String(error));
    }
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next: Record<string, string> = {};
    for (const name of ['key', 'tool', 'server', 'ip']) next[name] = String(data.get(name) ?? '');
    void showExplain(next);
  });
  show(el('h1', {}, 'Explain'), form, answer);
}
