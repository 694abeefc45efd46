import { admin } from './api.js';
import { el, show, table, type Child } from './dom.js';

const MODERN = '2026-07-28';

interface AuditRecord {
  readonly chainId: string;
  readonly seq: number;
  readonly time: string;
  readonly decision: string;
  readonly server?: string;
  readonly tool?: string;
  readonly reason?: string;
  readonly latencyMs?: number;
}

function hex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** The JSON-RPC answer of a POST to /mcp: the body, or the last message of an SSE stream. */
async function answerOf(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return text === '' ? { status: response.status } : JSON.parse(text);
  const data = text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim());
  return data.length === 0 ? { status: response.status } : JSON.parse(data[data.length - 1] as string);
}

/**
 * The tool tester: one `tools/call` through the gateway's own `/mcp`, as the key pasted here (a stateless
 * 2026-07-28 request, so no session is left behind), then the audit record it made, found by the trace id the
 * call carried. The key is sent once and never kept by the page.
 */
export function showTester(): void {
  const key = el('input', { id: 'tester-key', name: 'key', type: 'password', autocomplete: 'off', required: '' });
  const tool = el('input', { id: 'tester-tool', name: 'tool', autocomplete: 'off', required: '' });
  const args = el('textarea', { id: 'tester-args', name: 'arguments', rows: '4', 'aria-describedby': 'tester-args-hint' });
  args.value = '{}';
  const result = el('div', { role: 'status', id: 'tester-result' });
  const form = el(
    'form',
    { 'aria-labelledby': 'tester-title' },
    el('h2', { id: 'tester-title' }, 'Call'),
    el('label', { for: 'tester-key' }, 'Gateway API key (mcpg_…)'),
    key,
    el('label', { for: 'tester-tool' }, 'Tool, as a client names it'),
    tool,
    el('label', { for: 'tester-args' }, 'Arguments (JSON object)'),
    args,
    el('small', { id: 'tester-args-hint' }, 'Checked before anything is sent.'),
    el('button', { type: 'submit' }, 'Call tool'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(args.value);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      result.replaceChildren(el('p', { class: 'error' }, 'The arguments must be a JSON object.'));
      return;
    }
    void call(key.value, tool.value.trim(), parsed, result);
  });
  show(el('h1', {}, 'Tool tester'), form, result);
}

async function call(key: string, tool: string, args: object, into: HTMLElement): Promise<void> {
  const traceId = hex(16);
  into.replaceChildren(el('p', {}, 'Calling…'));
  const response = await fetch('/mcp', {
    method: 'POST',
    credentials: 'omit',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${key}`,
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': tool,
      traceparent: `00-${traceId}-${hex(8)}-01`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: tool,
        arguments: args,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': { name: 'mcpgate-admin-ui', version: '1' },
        },
      },
    }),
  });
  const answer = await answerOf(response);
  const { records } = await admin<{ records: AuditRecord[] }>('GET', `/audit?traceId=${traceId}&limit=10`);
  into.replaceChildren(
    el('h2', {}, `Answer (HTTP ${response.status})`),
    el('pre', { id: 'tester-answer' }, JSON.stringify(answer, null, 2)),
    records.length === 0
      ? el('p', {}, 'No audit record carries this call\'s trace id (a call refused before it was authenticated makes none).')
      : table(
          'Its audit record',
          ['Time', 'Chain', 'Decision', 'Server', 'Tool', 'Latency', 'Reason'],
          records.map((record): Child[] => [record.time, `${record.chainId} #${record.seq}`, record.decision, record.server ?? '', record.tool ?? '', record.latencyMs === undefined ? '' : `${record.latencyMs} ms`, record.reason ?? '']),
        ),
  );
}
