import { admin, ApiError } from './api.js';
import { el, show, table, type Child } from './dom.js';

interface SessionView {
  readonly id: string;
  readonly transport: string;
  readonly protocolVersion: string;
  readonly clientName?: string;
  readonly clientVersion?: string;
  readonly keyId?: string;
  readonly createdAt: string;
  readonly lastSeenAt: string;
  readonly inflight: number;
  readonly stream: boolean;
}

/** A receipt (`GET …/receipt`) with its signature checked against the gateway's key (`GET …/receipt/verify`). */
async function showReceipt(sessionId: string, into: HTMLElement): Promise<void> {
  const path = `/sessions/${encodeURIComponent(sessionId)}/receipt`;
  try {
    const [receipt, verdict] = await Promise.all([admin<unknown>('GET', path), admin<{ valid: boolean; reason?: string }>('GET', `${path}/verify`)]);
    into.replaceChildren(
      el('p', { class: verdict.valid ? '' : 'error' }, verdict.valid ? 'The signature verifies with the gateway\'s key.' : `INVALID: ${verdict.reason ?? 'unknown reason'}`),
      el('pre', { id: 'receipt-body' }, JSON.stringify(receipt, null, 2)),
    );
  } catch (error) {
    into.replaceChildren(el('p', { class: 'error' }, error instanceof ApiError && error.status === 404 ? 'No receipt: the session is still open, never existed, or receipts are off.' : String(error)));
  }
}

/** This replica's live legacy sessions (`GET /admin/v1/sessions`), and any ended session's signed receipt. */
export async function showSessions(): Promise<void> {
  const { sessions } = await admin<{ sessions: SessionView[] }>('GET', '/sessions');
  const id = el('input', { id: 'receipt-session', name: 'session', required: '', autocomplete: 'off' });
  const result = el('div', { role: 'status', id: 'receipt-result' });
  const form = el('form', { 'aria-labelledby': 'receipt-title' }, el('h2', { id: 'receipt-title' }, 'Receipt of an ended session'), el('label', { for: 'receipt-session' }, 'Session id'), id, el('button', { type: 'submit' }, 'Show receipt'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void showReceipt(id.value.trim(), result);
  });
  show(
    el('h1', {}, 'Sessions'),
    table(
      `Live sessions on this replica (${sessions.length})`,
      ['Session', 'Client', 'Protocol', 'Key', 'Since', 'Last seen', 'In flight', 'GET stream'],
      sessions.map((session): Child[] => [session.id, `${session.clientName ?? '?'} ${session.clientVersion ?? ''}`, `${session.protocolVersion} (${session.transport})`, session.keyId ?? '', session.createdAt, session.lastSeenAt, session.inflight, session.stream ? 'open' : '']),
    ),
    form,
    result,
  );
}
