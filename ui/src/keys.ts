import { admin, ApiError } from './api.js';
import { el, show, table, type Child } from './dom.js';

interface KeyView {
  readonly id: string;
  readonly prefix: string;
  readonly principalId: string;
  readonly principalKind: string;
  readonly label: string;
  readonly status: string;
  readonly createdAt: string;
  readonly expiresAt?: string;
}

/** Keys (`/admin/v1/keys`): list, create (the key text shown once) and revoke, each the admin API's own operation. */
export async function showKeys(notice?: Child): Promise<void> {
  const { keys } = await admin<{ keys: KeyView[] }>('GET', '/keys');
  const rows = keys.map((key): Child[] => {
    const revoke = el('button', { type: 'button', 'aria-label': `Revoke key ${key.prefix}` }, 'Revoke');
    revoke.addEventListener('click', () => {
      if (!window.confirm(`Revoke ${key.prefix}? Its next request is refused.`)) return;
      admin('POST', `/keys/${encodeURIComponent(key.id)}/revoke`, {}).then(
        () => showKeys(el('p', {}, `Revoked ${key.prefix}.`)),
        (error: unknown) => showKeys(el('p', { class: 'error' }, `Not revoked: ${String(error)}`)),
      );
    });
    return [key.prefix, key.label, `${key.principalKind} ${key.principalId}`, key.status, key.createdAt, key.expiresAt ?? '', key.status === 'active' ? revoke : ''];
  });

  const principal = el('input', { id: 'principal', name: 'principal', required: '', autocomplete: 'off' });
  const label = el('input', { id: 'label', name: 'label', autocomplete: 'off' });
  const expires = el('input', { id: 'expires', name: 'expires', type: 'datetime-local' });
  const message = el('p', { role: 'status' });
  const form = el(
    'form',
    { 'aria-labelledby': 'create-title' },
    el('h2', { id: 'create-title' }, 'Create a key'),
    el('label', { for: 'principal' }, 'Principal id (user or agent)'),
    principal,
    el('label', { for: 'label' }, 'Label'),
    label,
    el('label', { for: 'expires' }, 'Expires (optional)'),
    expires,
    el('button', { type: 'submit' }, 'Create key'),
    message,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const body = {
      principalId: principal.value.trim(),
      ...(label.value === '' ? {} : { label: label.value }),
      ...(expires.value === '' ? {} : { expiresAt: new Date(expires.value).toISOString() }),
    };
    admin<{ key: string; record: KeyView }>('POST', '/keys', body).then(
      (created) =>
        showKeys(
          el(
            'div',
            {},
            el('p', {}, `Key ${created.record.prefix} created. Copy it now: it is shown this once and never again.`),
            el('p', { class: 'secret', id: 'new-key' }, created.key),
          ),
        ),
      (error: unknown) => {
        message.textContent = error instanceof ApiError ? `Not created: ${error.message}` : `Not created: ${String(error)}`;
        message.className = 'error';
      },
    );
  });
  // What the last action did, announced to screen readers as it appears.
  show(el('h1', {}, 'Keys'), notice === undefined ? null : el('div', { role: 'status' }, notice), table('Gateway API keys', ['Prefix', 'Label', 'Principal', 'Status', 'Created', 'Expires', 'Actions'], rows), form);
}
