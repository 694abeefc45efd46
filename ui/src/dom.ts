/**
 * The one way the UI makes DOM: elements, attributes by `setAttribute`, and every value as a Text node. Nothing in
 * the UI parses a string as HTML (test/admin/ui.test.ts checks the sources), so a tool description, key label or
 * audit field holding markup shows as the characters it is (issue 28, XSS); the Content-Security-Policy is the
 * second wall.
 */
export type Child = Node | string | number | boolean | null | undefined;

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Readonly<Record<string, string>> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  append(element, children);
  return element;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** A table with a header row: each row's cells are children as `el` takes them. */
export function table(caption: string, headers: readonly string[], rows: readonly (readonly Child[])[]): HTMLTableElement {
  return el(
    'table',
    {},
    el('caption', {}, caption),
    el('thead', {}, el('tr', {}, ...headers.map((header) => el('th', { scope: 'col' }, header)))),
    el('tbody', {}, ...rows.map((cells) => el('tr', {}, ...cells.map((cell) => el('td', {}, cell))))),
  );
}

/** Replaces what `main` shows and moves focus there, so that keyboard and screen-reader users land on the new page. */
export function show(...children: Child[]): void {
  const main = document.getElementById('main');
  if (main === null) return;
  main.replaceChildren();
  append(main, children);
  main.focus();
}

/**
 * A labelled input as a form's children: its label, the input (id `${form}-${name}`) and, with a hint, the hint
 * the input is described by.
 */
export function field(form: string, name: string, label: string, value: string, options: { readonly required?: boolean; readonly hint?: string } = {}): Child[] {
  const id = `${form}-${name}`;
  const attributes: Record<string, string> = { id, name, value, autocomplete: 'off' };
  if (options.required === true) attributes.required = '';
  if (options.hint !== undefined) attributes['aria-describedby'] = `${id}-hint`;
  return [el('label', { for: id }, label), el('input', attributes), options.hint === undefined ? null : el('small', { id: `${id}-hint` }, options.hint)];
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element, attributes by `setAttribute` and text as Text nodes, as {@link el} makes HTML. */
export function svg(tag: string, attributes: Readonly<Record<string, string | number>> = {}, ...children: Child[]): SVGElement {
  const element = document.createElementNS(SVG, tag) as SVGElement;
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  append(element, children);
  return element;
}
