import { admin, ApiError } from './api.js';
import { el, show, table, type Child } from './dom.js';

interface Org {
  readonly id: string;
  readonly name: string;
}
interface Team {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
}
interface Principal {
  readonly id: string;
  readonly kind: string;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
}
interface Toolset {
  readonly name: string;
  readonly entries: readonly { readonly server: string; readonly toolGlob: string }[];
}

const LEVELS = ['org', 'team', 'user', 'agent', 'key'];

function message(error: unknown): string {
  return error instanceof ApiError ? error.message : String(error);
}

/** What a permission document must look like before it is sent; the admin API checks it again, strictly. */
export function permissionProblem(document: unknown): string | undefined {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) return 'a permission document is a JSON object';
  const { kind, ...rest } = document as Record<string, unknown>;
  if (kind === 'none') return Object.keys(rest).length === 0 ? undefined : '"none" takes no other field';
  if (kind !== 'allow') return 'kind must be "allow" or "none"';
  for (const [name, value] of Object.entries(rest)) {
    if (name === 'servers' || name === 'toolsets') {
      if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) return `${name} must be a list of strings`;
    } else if (name === 'tools') {
      if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.values(value).every((globs) => Array.isArray(globs) && globs.every((glob) => typeof glob === 'string'))) {
        return 'tools maps each server to a list of tool globs';
      }
    } else return `unknown field "${name}"`;
  }
  return undefined;
}

/** The permission document editor: load a subject's document, check it as typed, save or delete it. */
function permissionEditor(): HTMLElement {
  const level = el('select', { id: 'perm-level', name: 'level' }, ...LEVELS.map((name) => el('option', { value: name }, name)));
  const subject = el('input', { id: 'perm-subject', name: 'subject', required: '', autocomplete: 'off' });
  const text = el('textarea', { id: 'perm-document', name: 'document', rows: '8', 'aria-describedby': 'perm-status' });
  const status = el('p', { id: 'perm-status', role: 'status' });
  const say = (line: string, error = false): void => {
    status.textContent = line;
    status.className = error ? 'error' : '';
  };
  const path = (): string => `/permissions/${level.value}/${encodeURIComponent(subject.value.trim())}`;
  const load = el('button', { type: 'button' }, 'Load');
  load.addEventListener('click', () => {
    admin<{ permissions: { document: unknown } }>('GET', path()).then(
      ({ permissions }) => {
        text.value = JSON.stringify(permissions.document, null, 2);
        say('Loaded.');
      },
      (error: unknown) => {
        if (error instanceof ApiError && error.status === 404 && /no permission/i.test(error.message)) {
          text.value = '{ "kind": "allow" }';
          say('This subject has no document: its level does not restrict.');
        } else say(`Not loaded: ${message(error)}`, true);
      },
    );
  });
  text.addEventListener('input', () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text.value);
    } catch {
      say('Not valid JSON yet.', true);
      return;
    }
    const problem = permissionProblem(parsed);
    say(problem === undefined ? 'Valid.' : problem, problem !== undefined);
  });
  const save = el('button', { type: 'submit' }, 'Save');
  const remove = el('button', { type: 'button' }, 'Delete document');
  remove.addEventListener('click', () => {
    admin('DELETE', path()).then(
      () => say('Deleted: this level no longer restricts the subject.'),
      (error: unknown) => say(`Not deleted: ${message(error)}`, true),
    );
  });
  const form = el(
    'form',
    { 'aria-labelledby': 'perm-title' },
    el('h2', { id: 'perm-title' }, 'Permission document'),
    el('label', { for: 'perm-level' }, 'Level'),
    level,
    el('label', { for: 'perm-subject' }, 'Subject id'),
    subject,
    load,
    el('label', { for: 'perm-document' }, 'Document (JSON)'),
    text,
    status,
    save,
    remove,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text.value);
    } catch {
      say('Not saved: the document is not valid JSON.', true);
      return;
    }
    const problem = permissionProblem(parsed);
    if (problem !== undefined) {
      say(`Not saved: ${problem}.`, true);
      return;
    }
    admin('PUT', path(), parsed).then(
      () => say('Saved. Every replica applies it at once.'),
      (error: unknown) => say(`Not saved: ${message(error)}`, true),
    );
  });
  return form;
}

/** A toolset's entries as the editor shows them: one `server: toolGlob` per line. */
function entriesText(toolset: Toolset | undefined): string {
  return toolset === undefined ? '' : toolset.entries.map((entry) => `${entry.server}: ${entry.toolGlob}`).join('\n');
}

/** The lines of the toolset editor as entries, or what is wrong with the first line that is not one. */
export function parseEntries(text: string): { entries: { server: string; toolGlob: string }[] } | { problem: string } {
  const entries: { server: string; toolGlob: string }[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const match = /^([A-Za-z0-9_.-]{1,64})\s*:\s*(\S+)$/.exec(line);
    if (match === null) return { problem: `line ${index + 1} is not "server: tool-glob"` };
    entries.push({ server: match[1] as string, toolGlob: match[2] as string });
  }
  return entries.length === 0 ? { problem: 'a toolset needs at least one entry' } : { entries };
}

/** The toolset editor: pick one (or name a new one), edit its `server: glob` lines, save or delete it. */
function toolsetEditor(toolsets: readonly Toolset[]): HTMLElement {
  const name = el('input', { id: 'toolset-name', name: 'toolset', required: '', autocomplete: 'off', list: 'toolset-names' });
  const names = el('datalist', { id: 'toolset-names' }, ...toolsets.map((toolset) => el('option', { value: toolset.name })));
  const text = el('textarea', { id: 'toolset-entries', name: 'entries', rows: '5', 'aria-describedby': 'toolset-status' });
  const status = el('p', { id: 'toolset-status', role: 'status' });
  const say = (line: string, error = false): void => {
    status.textContent = line;
    status.className = error ? 'error' : '';
  };
  name.addEventListener('change', () => {
    text.value = entriesText(toolsets.find((toolset) => toolset.name === name.value.trim()));
  });
  const remove = el('button', { type: 'button' }, 'Delete toolset');
  remove.addEventListener('click', () => {
    admin('DELETE', `/toolsets/${encodeURIComponent(name.value.trim())}`).then(
      () => showPrincipals(`Deleted toolset ${name.value.trim()}.`),
      (error: unknown) => say(`Not deleted: ${message(error)}`, true),
    );
  });
  const form = el(
    'form',
    { 'aria-labelledby': 'toolset-title' },
    el('h2', { id: 'toolset-title' }, 'Toolset'),
    el('label', { for: 'toolset-name' }, 'Toolset name'),
    name,
    names,
    el('label', { for: 'toolset-entries' }, 'Entries, one "server: tool-glob" per line'),
    text,
    status,
    el('button', { type: 'submit' }, 'Save toolset'),
    remove,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const parsed = parseEntries(text.value);
    if ('problem' in parsed) {
      say(`Not saved: ${parsed.problem}.`, true);
      return;
    }
    admin('PUT', `/toolsets/${encodeURIComponent(name.value.trim())}`, { entries: parsed.entries }).then(
      () => showPrincipals(`Saved toolset ${name.value.trim()}.`),
      (error: unknown) => say(`Not saved: ${message(error)}`, true),
    );
  });
  return form;
}

/** Adding an organisation, and a team to one: without them a fresh gateway has nowhere to put a user or agent. */
function orgAndTeamForms(orgs: readonly Org[]): HTMLElement[] {
  const status = el('p', { role: 'status' });
  const fail = (error: unknown): void => {
    status.textContent = `Not added: ${message(error)}`;
    status.className = 'error';
  };
  const orgName = el('input', { id: 'new-org-name', name: 'name', required: '', autocomplete: 'off' });
  const orgForm = el('form', { 'aria-labelledby': 'new-org-title' }, el('h2', { id: 'new-org-title' }, 'Add an organisation'), el('label', { for: 'new-org-name' }, 'Organisation name'), orgName, el('button', { type: 'submit' }, 'Add organisation'));
  orgForm.addEventListener('submit', (event) => {
    event.preventDefault();
    admin<{ org: Org }>('POST', '/orgs', { name: orgName.value.trim() }).then(({ org }) => showPrincipals(`Added organisation ${org.name} (${org.id}).`), fail);
  });
  const teamOrg = el('select', { id: 'new-team-org', name: 'org' }, ...orgs.map((item) => el('option', { value: item.id }, item.name)));
  const teamName = el('input', { id: 'new-team-name', name: 'name', required: '', autocomplete: 'off' });
  const teamForm = el(
    'form',
    { 'aria-labelledby': 'new-team-title' },
    el('h2', { id: 'new-team-title' }, 'Add a team'),
    el('label', { for: 'new-team-org' }, 'Organisation of the team'),
    teamOrg,
    el('label', { for: 'new-team-name' }, 'Team name'),
    teamName,
    el('button', { type: 'submit' }, 'Add team'),
  );
  teamForm.addEventListener('submit', (event) => {
    event.preventDefault();
    admin<{ team: Team }>('POST', '/teams', { orgId: teamOrg.value, name: teamName.value.trim() }).then(({ team }) => showPrincipals(`Added team ${team.name} (${team.id}).`), fail);
  });
  return [orgForm, ...(orgs.length === 0 ? [] : [teamForm]), status];
}

/** Orgs, teams, users and agents, with their ids (what permission documents and keys name), the editor and toolsets. */
export async function showPrincipals(notice?: string): Promise<void> {
  const [{ orgs }, { teams }, { principals }, { toolsets }] = await Promise.all([
    admin<{ orgs: Org[] }>('GET', '/orgs'),
    admin<{ teams: Team[] }>('GET', '/teams'),
    admin<{ principals: Principal[] }>('GET', '/principals'),
    admin<{ toolsets: Toolset[] }>('GET', '/toolsets'),
  ]);
  const orgName = new Map(orgs.map((org) => [org.id, org.name]));
  const teamName = new Map(teams.map((team) => [team.id, team.name]));

  const kind = el('select', { id: 'new-kind', name: 'kind' }, el('option', { value: 'user' }, 'user'), el('option', { value: 'agent' }, 'agent'));
  const org = el('select', { id: 'new-org', name: 'org' }, ...orgs.map((item) => el('option', { value: item.id }, item.name)));
  const team = el('select', { id: 'new-team', name: 'team' }, el('option', { value: '' }, '(none)'), ...teams.map((item) => el('option', { value: item.id }, `${orgName.get(item.orgId) ?? '?'} / ${item.name}`)));
  const name = el('input', { id: 'new-name', name: 'name', required: '', autocomplete: 'off' });
  const created = el('p', { role: 'status' });
  const create = el(
    'form',
    { 'aria-labelledby': 'new-principal-title' },
    el('h2', { id: 'new-principal-title' }, 'Add a user or agent'),
    el('label', { for: 'new-kind' }, 'Kind'),
    kind,
    el('label', { for: 'new-org' }, 'Organisation'),
    org,
    el('label', { for: 'new-team' }, 'Team'),
    team,
    el('label', { for: 'new-name' }, 'Name'),
    name,
    el('button', { type: 'submit' }, 'Add user or agent'),
    created,
  );
  create.addEventListener('submit', (event) => {
    event.preventDefault();
    const body = { kind: kind.value, orgId: org.value, name: name.value.trim(), ...(team.value === '' ? {} : { teamId: team.value }) };
    admin<{ principal: Principal }>('POST', '/principals', body).then(
      ({ principal }) => showPrincipals(`Added ${principal.kind} ${principal.name} (${principal.id}).`),
      (error: unknown) => {
        created.textContent = `Not added: ${message(error)}`;
        created.className = 'error';
      },
    );
  });

  show(
    el('h1', {}, 'Principals'),
    notice === undefined ? null : el('div', { role: 'status' }, el('p', {}, notice)),
    table('Organisations', ['Name', 'Id'], orgs.map((item): Child[] => [item.name, item.id])),
    table('Teams', ['Organisation', 'Name', 'Id'], teams.map((item): Child[] => [orgName.get(item.orgId) ?? item.orgId, item.name, item.id])),
    table('Users and agents', ['Kind', 'Name', 'Organisation', 'Team', 'Id'], principals.map((item): Child[] => [item.kind, item.name, orgName.get(item.orgId) ?? item.orgId, item.teamId === undefined ? '' : (teamName.get(item.teamId) ?? item.teamId), item.id])),
    ...orgAndTeamForms(orgs),
    create,
    permissionEditor(),
    table('Toolsets', ['Name', 'Entries'], toolsets.map((item): Child[] => [item.name, item.entries.map((entry) => `${entry.server}: ${entry.toolGlob}`).join(', ')])),
    toolsetEditor(toolsets),
  );
}
