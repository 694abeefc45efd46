import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkParseContext, checkParseEntities, isAuthorized, type Context } from '@cedar-policy/cedar-wasm/nodejs';
import { toCedarArgs } from '../../src/cedar/args.js';
import { buildCedarRequest, cedarIp, sensitivityRank, type CedarRequest } from '../../src/cedar/request.js';
import { CALLER, request } from './helpers.js';

/** Cedar must accept every request we build: one rejected value fails the whole request (and every set). */
function assertCedarAccepts(built: CedarRequest): void {
  const context = checkParseContext({ context: built.context });
  assert.equal(context.type, 'success', JSON.stringify(context));
  const entities = checkParseEntities({ entities: [...built.entities] });
  assert.equal(entities.type, 'success', JSON.stringify(entities));
}

/** Evaluates one policy condition against a built request, without the store. */
function holds(built: CedarRequest, condition: string): boolean {
  const answer = isAuthorized({
    principal: built.principal,
    action: built.action,
    resource: built.resource,
    context: built.context,
    entities: [...built.entities],
    policies: { staticPolicies: { p: `permit(principal, action, resource) when { ${condition} };` } },
  });
  assert.equal(answer.type, 'success', JSON.stringify(answer));
  if (answer.type !== 'success') return false;
  assert.deepEqual(answer.response.diagnostics.errors, [], condition);
  return answer.response.decision === 'allow';
}

describe('toCedarArgs', () => {
  it('converts scalars: safe integers to Longs, other numbers to strings, null dropped', () => {
    const { value, truncated } = toCedarArgs({
      int: 42,
      negative: -7,
      zero: -0,
      float: 1.5,
      huge: 2 ** 60,
      tiny: 1e-7,
      max: Number.MAX_SAFE_INTEGER,
      text: 'hi',
      yes: true,
      nothing: null,
      missing: undefined,
    });
    assert.deepEqual({ ...value }, {
      int: 42,
      negative: -7,
      zero: 0,
      float: '1.5',
      huge: '1152921504606847000',
      tiny: '1e-7',
      max: Number.MAX_SAFE_INTEGER,
      text: 'hi',
      yes: true,
    });
    assert.equal(truncated, false);
  });

  it('turns objects into records and arrays into sets, mixed types included, nulls removed', () => {
    const { value } = toCedarArgs({ nested: { a: { b: [1, 'x', null, { c: 2.5 }, [true]] } }, empty: [], obj: {} });
    assert.deepEqual(JSON.parse(JSON.stringify(value)), { nested: { a: { b: [1, 'x', { c: '2.5' }, [true]] } }, empty: [], obj: {} });
    const built = request({ args: { nested: { a: { b: [1, 'x', null, { c: 2.5 }, [true]] } }, tags: ['a', 'b'] } });
    assertCedarAccepts(built);
    assert.equal(holds(built, 'context.args.tags.contains("b") && context.args.nested.a.b.contains(1)'), true);
    assert.equal(holds(built, 'context.args.nested.a.b.contains({ c: "2.5" })'), true);
  });

  it('drops Cedar escape keys so arguments cannot forge entities or extension values', () => {
    const args = {
      __entity: { type: 'Mcpgate::Key', id: 'admin' },
      inner: { __extn: { fn: 'ip', arg: '10.0.0.1' }, keep: 1 },
      __expr: 'x',
      ['__proto__']: 'kept',
    };
    const parsed = JSON.parse(JSON.stringify(args)) as unknown;
    const { value } = toCedarArgs(parsed);
    assert.deepEqual(Object.keys(value).sort(), ['__proto__', 'inner']);
    const built = request({ args: parsed });
    assertCedarAccepts(built);
    assert.equal(holds(built, 'context.args.inner == { keep: 1 }'), true);
  });

  it('bounds depth, total size and string length, and says so', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 50; i++) deep = { down: deep };
    const cut = toCedarArgs({ deep });
    assert.equal(cut.truncated, true);
    let depth = 0;
    for (let node: unknown = cut.value; typeof node === 'object' && node !== null; node = (node as { down?: unknown; deep?: unknown }).down ?? (node as { deep?: unknown }).deep) depth++;
    assert.ok(depth <= 8, `depth ${depth}`);

    const wide = toCedarArgs({ items: Array.from({ length: 5000 }, (_, i) => i) });
    assert.equal(wide.truncated, true);
    assert.ok((wide.value.items as unknown[]).length < 1000);

    const long = toCedarArgs({ text: 'x'.repeat(10_000) });
    assert.equal(long.truncated, true);
    assert.equal((long.value.text as string).length, 8192);

    assert.equal(toCedarArgs({ a: 'short' }, { maxDepth: 8, maxValues: 1000, maxStringLength: 8 }).truncated, false);
    assertCedarAccepts(request({ args: { deep, items: Array.from({ length: 5000 }, (_, i) => i) } }));
    assert.equal(holds(request({ args: { deep } }), 'context.argsTruncated'), true);
    assert.equal(holds(request({ args: { a: 1 } }), 'context.argsTruncated'), false);
  });

  it('replaces lone surrogates, which cedar-wasm cannot take', () => {
    const parsed = JSON.parse('{"q":"a\\ud800b","\\udc00":1}') as unknown;
    const { value } = toCedarArgs(parsed);
    assert.deepEqual({ ...value }, { q: 'a\ufffdb', '\ufffd': 1 });
    const built = request({ action: 'read_resource', tool: 'file:///\ud800', args: parsed });
    assertCedarAccepts(built);
    assert.equal(holds(built, 'context.args.q == "a\ufffdb" && resource.uri == "file:///\ufffd"'), true);
  });

  it('gives an empty record for arguments that are not an object', () => {
    for (const args of [undefined, null, 3, 'text', [1, 2]]) assert.deepEqual({ ...toCedarArgs(args).value }, {});
  });
});

describe('buildCedarRequest', () => {
  it('makes the key the principal, with its holder, team and org as parents and attributes', () => {
    const built = request();
    assert.deepEqual(built.principal, { type: 'Mcpgate::Key', id: 'k1' });
    assertCedarAccepts(built);
    for (const condition of [
      'principal in Mcpgate::User::"u1"',
      'principal in Mcpgate::Team::"t1"',
      'principal in Mcpgate::Org::"o1"',
      'principal.user == "u1" && principal.team == "t1" && principal.org == "o1"',
      'principal.kind == "user" && principal.id == "k1"',
      'action == Mcpgate::Action::"call_tool"',
      'resource == Mcpgate::Tool::"notes/add_note" && resource in Mcpgate::Server::"notes"',
      'resource.server == "notes" && resource.tool == "add_note"',
      'context.clientIp.isInRange(ip("10.0.0.0/8"))',
    ]) {
      assert.equal(holds(built, condition), true, condition);
    }
    const agent = request({ caller: { keyId: 'k2', principalId: 'a1', principalKind: 'agent', orgId: 'o1', clientIp: '::1' } });
    assertCedarAccepts(agent);
    assert.equal(holds(agent, 'principal in Mcpgate::Agent::"a1" && principal.kind == "agent" && !(principal has team)'), true);
    assert.equal(holds(agent, 'context.clientIp.isLoopback()'), true);
  });

  it('uses an anonymous principal without a caller (auth.mode none)', () => {
    const built = request({ caller: undefined });
    assertCedarAccepts(built);
    assert.deepEqual(built.principal, { type: 'Mcpgate::Anonymous', id: 'anonymous' });
    assert.equal(holds(built, 'principal.kind == "anonymous" && !(context has clientIp)'), true);
  });

  it('picks the resource by action: tool, prompt, resource URI, or the server for list', () => {
    const cases = [
      [request({ action: 'call_tool', tool: 't' }), 'Mcpgate::Tool', 'notes/t', 'resource.tool == "t"'],
      [request({ action: 'get_prompt', tool: 'p' }), 'Mcpgate::Prompt', 'notes/p', 'resource.prompt == "p"'],
      [request({ action: 'read_resource', tool: 'file:///a' }), 'Mcpgate::Resource', 'notes/file:///a', 'resource.uri == "file:///a"'],
      [request({ action: 'list', tool: 'ignored' }), 'Mcpgate::Server', 'notes', 'resource.server == "notes"'],
    ] as const;
    for (const [built, type, id, condition] of cases) {
      assertCedarAccepts(built);
      assert.deepEqual(built.resource, { type, id });
      assert.equal(holds(built, condition), true, condition);
    }
  });

  it('gives the resource the server attributes, sensitivity and rank; configured attributes cannot override them', () => {
    const built = request({ serverAttributes: { zone: 'external', server: 'spoofed', sensitivity: 'public' }, serverSensitivity: 'confidential' });
    assertCedarAccepts(built);
    assert.equal(holds(built, 'resource.zone == "external" && resource.server == "notes"'), true);
    assert.equal(holds(built, 'resource.sensitivity == "confidential" && resource.sensitivityRank == 2'), true);
  });

  it('puts time, hour, session sensitivity, phase and the result in the context', () => {
    const now = new Date('2030-01-02T13:04:05.678Z');
    const built = request({ now, sessionSensitivity: 'restricted', phase: 'egress', result: { bytes: 1234, labels: ['pii'] } });
    assertCedarAccepts(built);
    assert.equal(built.context.time, Math.floor(now.getTime() / 1000));
    assert.equal(built.context.timeIso, '2030-01-02T13:04:05.678Z');
    assert.equal(holds(built, 'context.hour == 13 && context.sessionSensitivity == "restricted" && context.sessionSensitivityRank == 3'), true);
    assert.equal(holds(built, 'context.phase == "egress" && context.result.bytes == 1234 && context.result.labels.contains("pii")'), true);
    assert.equal(holds(request(), 'context has result'), false);
    assert.deepEqual(['public', 'internal', 'confidential', 'restricted'].map((label) => sensitivityRank(label as 'public')), [0, 1, 2, 3]);
  });

  it('gives Cedar only addresses its ip() accepts', () => {
    assert.equal(cedarIp('::ffff:10.1.2.3'), '10.1.2.3');
    assert.equal(cedarIp('fe80::1%eth0'), 'fe80::1');
    assert.equal(cedarIp('[2001:db8::1]:443'), '2001:db8::1');
    assert.equal(cedarIp('::1.2.3.4'), undefined);
    assert.equal(cedarIp('not an ip'), undefined);
    for (const clientIp of ['127.0.0.1', '::1', '::ffff:10.1.2.3', 'fe80::1%eth0', '2001:db8::1', '::1.2.3.4', 'garbage']) {
      const built = buildCedarRequest({
        caller: { ...CALLER, clientIp },
        action: 'list',
        server: 's',
        serverAttributes: {},
        serverSensitivity: 'public',
        sessionSensitivity: 'public',
        phase: 'ingress',
      });
      assertCedarAccepts(built);
      const context: Context = built.context;
      assert.equal('clientIp' in context, cedarIp(clientIp) !== undefined, clientIp);
    }
  });
});
