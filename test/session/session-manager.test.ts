import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { Caller } from '../../src/model/caller.js';
import { SessionManager } from '../../src/session/session-manager.js';
import { SessionSealer } from '../../src/session/session-token.js';
import { captureLogger } from '../fixtures/upstream/rpc-helper.js';

/** Issue 22 A4: the per-caller session cap, how each way a session ends gives its place back, and SSE slots. */

const managers: SessionManager[] = [];
afterEach(() => {
  for (const manager of managers.splice(0)) manager.closeAll();
});

function manager(maxSessionsPerKey: number, now = () => 0): SessionManager {
  const sessions = new SessionManager({ maxSessions: 100, maxSessionsPerKey, idleTimeoutMs: 1_000, logger: captureLogger().logger, now });
  managers.push(sessions);
  return sessions;
}

function caller(keyId: string): Caller {
  return { keyId, principalId: `p-${keyId}`, principalKind: 'user', orgId: 'o', clientIp: '127.0.0.1' };
}

function init(who: Caller | undefined) {
  return { transport: 'streamable-http' as const, protocolVersion: '2025-11-25' as const, clientCapabilities: {}, clientInfo: {}, caller: who };
}

function limitError(error: unknown): boolean {
  return GatewayError.is(error) && error.code === 'MCPGATE_ERR_SESSION_LIMIT_PER_KEY' && error.httpStatus === 429 && error.data?.maxSessionsPerKey === 2;
}

describe('SessionManager: sessions per caller', () => {
  it('refuses the session past maxSessionsPerKey for that key only; without auth all clients share one count', () => {
    const sessions = manager(2);
    sessions.create(init(caller('a')));
    sessions.create(init(caller('a')));
    assert.throws(() => sessions.create(init(caller('a'))), limitError);
    assert.equal(sessions.size, 2, 'a refused session is not kept');
    sessions.create(init(caller('b')));
    sessions.create(init(undefined));
    sessions.create(init(undefined));
    assert.throws(() => sessions.create(init(undefined)), limitError);
    assert.equal(sessions.countFor('a'), 2);
    assert.equal(sessions.countFor(undefined), 2);
  });

  it('DELETE, a transport closing its session, and idle expiry each give the place back once', () => {
    let now = 0;
    const sessions = manager(2, () => now);
    const deleted = sessions.create(init(caller('a')));
    const closed = sessions.create(init(caller('a')));
    assert.ok(sessions.delete(deleted.id));
    assert.equal(sessions.countFor('a'), 1);
    closed.close();
    closed.close();
    assert.equal(sessions.countFor('a'), 0);
    assert.equal(sessions.size, 0, 'a session its transport closed leaves the manager');

    const idle = sessions.create(init(caller('a')));
    sessions.create(init(caller('a')));
    now = 500;
    sessions.touch([...sessions.all()].find((session) => session !== idle)?.id ?? '', 'a');
    now = 1_200;
    sessions.reap();
    assert.equal(sessions.touch(idle.id, 'a'), undefined);
    assert.equal(sessions.countFor('a'), 1);
    sessions.create(init(caller('a')));
    assert.throws(() => sessions.create(init(caller('a'))), limitError);
  });

  it('a reserved slot (an SSE stream) counts; its session takes it over; released, it frees the place', () => {
    const sessions = manager(2);
    const slot = sessions.reserve('a');
    const other = sessions.reserve('a');
    assert.throws(() => sessions.reserve('a'), limitError);
    assert.throws(() => sessions.create(init(caller('a'))), limitError);
    // Another caller's slot is no place of this one.
    assert.throws(() => sessions.create(init(caller('a')), sessions.reserve('b')), limitError);

    const session = sessions.create(init(caller('a')), slot);
    assert.equal(sessions.countFor('a'), 2, 'the session holds the slot\'s place, not a second one');
    slot.release();
    assert.equal(sessions.countFor('a'), 2, 'a slot handed to a session is no longer the stream\'s to release');
    other.release();
    other.release();
    assert.equal(sessions.countFor('a'), 1);
    sessions.delete(session.id);
    assert.equal(sessions.countFor('a'), 0);
  });
});

describe('SessionManager: sealed sessions resumed on another replica (issue 27 §3)', () => {
  const key = 'issue-27-session-manager-key-0123456789abcdef';

  function sealedManager(): SessionManager {
    const sessions = new SessionManager({
      maxSessions: 100,
      maxSessionsPerKey: 4,
      idleTimeoutMs: 1_000,
      logger: captureLogger().logger,
      sealer: new SessionSealer(key, 60_000),
      maxAgeMs: 60_000,
    });
    managers.push(sessions);
    return sessions;
  }

  it('two requests racing on one unknown id resume one session, counted once against its caller', async () => {
    const made = sealedManager().create(init(caller('a')));
    assert.ok(SessionSealer.isSealed(made.wireId));
    const other = sealedManager();
    const [first, second] = await Promise.all([other.resume(made.wireId, caller('a')), other.resume(made.wireId, caller('a'))]);
    assert.ok(first !== undefined && first === second);
    assert.equal(first.id, made.id, 'the same inner id: audit records and receipts name one session');
    assert.equal(first.initialized, true);
    assert.equal(other.size, 1);
    assert.equal(other.countFor('a'), 1);
    assert.equal(other.touch(made.wireId, 'a'), first);
  });

  it('resumes nothing for another caller, and the per-key cap holds for resumed sessions too', async () => {
    const maker = sealedManager();
    const ids = Array.from({ length: 5 }, (_, index) => (index < 4 ? maker : sealedManager()).create(init(caller('a'))).wireId);
    const other = sealedManager();
    assert.equal(await other.resume(ids[0] as string, caller('b')), undefined);
    assert.equal(await other.resume(ids[0] as string, undefined), undefined);
    for (const id of ids.slice(0, 4)) assert.ok((await other.resume(id, caller('a'))) !== undefined);
    await assert.rejects(other.resume(ids[4] as string, caller('a')), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_SESSION_LIMIT_PER_KEY');
  });

  it('a legacy SSE session is never sealed: it cannot move off its stream', () => {
    const made = sealedManager().create({ ...init(caller('a')), transport: 'legacy-sse' as const });
    assert.equal(made.wireId, made.id);
  });
});
