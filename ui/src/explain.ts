import { admin, ApiError } from './api.js';
import { el, field, show, table, type Child } from './dom.js';

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
  readonly key?: { readonly id: string; readonly prefix: string; readonly status: string };
  readonly principal?: Principal;
  readonly cedar?: { readonly decision: string; readonly determining: readonly string[]; readonly errors: readonly string[]; readonly advisoryDenies?: readonly string[] };
}

function cedarLine(cedar: NonNullable<Explanation['cedar']>): string {
  const determining = cedar.determining.length === 0 ? 'no enforced policy forbids it' : `forbidden by ${cedar.determining.join(', ')}`;
  const advisory = cedar.advisoryDenies === undefined || cedar.advisoryDenies.length === 0 ? '' : `; advisory denials ${cedar.advisoryDenies.join(', ')}`;
  const errors = cedar.errors.length === 0 ? '' : `; errors: ${cedar.errors.join('; ')}`;
  return `Cedar at ingress: ${cedar.decision}, ${determining}${advisory}${errors}.`;
}

interface Principal {
  readonly id: string;
  readonly kind: string;
  readonly name: string;
}

const FIELDS = ['key', 'principal', 'tool', 'server', 'ip'] as const;

/**
 * The explain playground (`GET /admin/v1/explain`): whether a key, or a principal with no key of its own, may call
 * a tool and why, level by level, with the Cedar decision when policies are configured. Nothing reaches an upstream.
 */
export async function showExplain(values: Readonly<Record<string, string>> = {}): Promise<void> {
  const principals = await admin<{ principals: Principal[] }>('GET', '/principals').then(
    ({ principals: list }) => list,
    () => [],
  );
  const principalField = field('explain', 'principal', 'Principal id (instead of a key)', values.principal ?? '', { hint: 'a user or agent with no key of its own: only its org, team and own levels apply' });
  const form = el(
    'form',
    { 'aria-labelledby': 'explain-title' },
    el('h2', { id: 'explain-title' }, 'Ask'),
    ...field('explain', 'key', 'Key id or prefix', values.key ?? ''),
    ...principalField,
    // Suggestions by name for the principal field; the value sent is the id.
    el('datalist', { id: 'explain-principals' }, ...principals.map((principal) => el('option', { value: principal.id, label: `${principal.name} (${principal.kind})` }))),
    ...field('explain', 'tool', 'Tool, as a client names it', values.tool ?? '', { required: true }),
    ...field('explain', 'server', 'Server (for an unprefixed name)', values.server ?? ''),
    ...field('explain', 'ip', 'Client address', values.ip ?? ''),
    el('button', { type: 'submit' }, 'Explain'),
  );
  form.querySelector('#explain-principal')?.setAttribute('list', 'explain-principals');
  let answer: Child = null;
  if (values.tool !== undefined && (values.key?.trim() ?? '') === '' && (values.principal?.trim() ?? '') === '') {
    answer = el('p', { class: 'error', role: 'alert' }, 'Fill in a key or a principal.');
  } else if (values.tool !== undefined) {
    const params = new URLSearchParams();
    for (const name of FIELDS) {
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
        explanation.key === undefined ? null : el('p', {}, `As key ${explanation.key.prefix} (${explanation.key.id}), ${explanation.key.status}.`),
        explanation.principal === undefined ? null : el('p', {}, `As ${explanation.principal.kind} ${explanation.principal.name} (${explanation.principal.id}), with no key of its own.`),
        explanation.cedar === undefined ? null : el('p', { id: 'explain-cedar' }, cedarLine(explanation.cedar)),
        explanation.tool === undefined ? null : el('p', {}, `Tool ${explanation.tool.exposed ?? ''} → server ${explanation.tool.server ?? '?'}, upstream name ${explanation.tool.upstream ?? '?'}: ${explanation.tool.reason ?? ''}`),
        table('Each level', ['Level', 'Subject', 'Record', 'Verdict', 'Reason'], lines.map((line): Child[] => [line.level, line.subjectId, line.record, line.verdict, line.reason])),
        explanation.cedar === undefined ? null : el('figure', {}, el('figcaption', {}, 'Cedar decision in full'), el('pre', {}, JSON.stringify(explanation.cedar, null, 2))),
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
    for (const name of FIELDS) next[name] = String(data.get(name) ?? '');
    void showExplain(next);
  });
  show(el('h1', {}, 'Explain'), form, answer);
}
