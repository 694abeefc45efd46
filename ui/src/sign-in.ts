import { ApiError, signIn } from './api.js';
import { el, show } from './dom.js';

/** The admin token is sent once, exchanged for the session cookie, and never stored by the page. */
export function showSignIn(onSignedIn: () => void): void {
  const input = el('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: '' });
  const message = el('p', { role: 'alert', class: 'error' });
  const form = el('form', { 'aria-labelledby': 'sign-in-title' }, el('label', { for: 'token' }, 'Admin token (gateway.admin.token)'), input, el('button', { type: 'submit' }, 'Sign in'), message);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    message.textContent = '';
    signIn(input.value).then(
      () => {
        input.value = '';
        onSignedIn();
      },
      (error: unknown) => {
        message.textContent = error instanceof ApiError && error.status === 401 ? 'That token was not accepted.' : `Sign-in failed: ${String(error)}`;
      },
    );
  });
  show(el('h1', { id: 'sign-in-title' }, 'Sign in'), form);
  input.focus();
}
