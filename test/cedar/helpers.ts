import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicySetConfig } from '../../src/config/governance-schema.js';
import type { PolicyLogger } from '../../src/cedar/policy-loader.js';
import { buildCedarRequest, type CedarRequestInput } from '../../src/cedar/request.js';
import type { Caller } from '../../src/model/caller.js';

/** A temp directory for policy files, removed by `cleanup`. */
export class PolicyDir {
  readonly path = mkdtempSync(join(tmpdir(), 'mcpgate-cedar-'));

  write(name: string, text: string): string {
    writeFileSync(join(this.path, name), text);
    return name;
  }

  cleanup(): void {
    rmSync(this.path, { recursive: true, force: true });
  }
}

export function set(id: string, files: string[], mode: PolicySetConfig['mode'] = 'enforce'): PolicySetConfig {
  return { id, files, mode };
}

export const CALLER: Caller = { keyId: 'k1', principalId: 'u1', principalKind: 'user', orgId: 'o1', teamId: 't1', clientIp: '10.1.2.3' };

/** A call_tool input at ingress to server "notes" (public, no attributes) unless overridden. */
export function input(overrides: Partial<CedarRequestInput> = {}): CedarRequestInput {
  return {
    caller: CALLER,
    action: 'call_tool',
    server: 'notes',
    tool: 'add_note',
    serverAttributes: {},
    serverSensitivity: 'public',
    sessionSensitivity: 'public',
    phase: 'ingress',
    args: {},
    ...overrides,
  };
}

/** The request built from `input(overrides)`. */
export function request(overrides: Partial<CedarRequestInput> = {}) {
  return buildCedarRequest(input(overrides));
}

export class CaptureLogger implements PolicyLogger {
  readonly lines: Array<{ level: 'info' | 'warn'; details: Record<string, unknown>; message: string }> = [];
  info(details: Record<string, unknown>, message: string): void {
    this.lines.push({ level: 'info', details, message });
  }
  warn(details: Record<string, unknown>, message: string): void {
    this.lines.push({ level: 'warn', details, message });
  }
}

/** Polls `check` until it holds or `timeoutMs` passes; file watching is asynchronous. */
export async function waitFor(check: () => boolean, timeoutMs = 3000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
