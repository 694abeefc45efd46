/**
 * Who is asking, as authentication resolved it. Every field can change the decision (issue 5 §3, §5), so the
 * memo key (decision-memo.ts) is built from all of them. `clientIp` is the address after `X-Forwarded-For`
 * resolution (see `clientIpOf`), never the raw header.
 */
export interface Caller {
  readonly keyId: string;
  readonly principalId: string;
  readonly principalKind: 'user' | 'agent';
  readonly orgId: string;
  readonly teamId?: string;
  readonly clientIp: string;
}

/** The policy's caller for an authenticated one: the same identity, plus the client IP rules apply to. */
export function callerAt(
  authenticated: Pick<Caller, 'keyId' | 'principalId' | 'principalKind' | 'orgId' | 'teamId'>,
  clientIp: string,
): Caller {
  const { keyId, principalId, principalKind, orgId, teamId } = authenticated;
  return { keyId, principalId, principalKind, orgId, ...(teamId === undefined ? {} : { teamId }), clientIp };
}
