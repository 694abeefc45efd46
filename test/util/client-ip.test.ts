import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CidrSet, clientIpOf, normalizeIp, UNKNOWN_CLIENT_IP } from '../../src/util/client-ip.js';

// Issue 5 §5: X-Forwarded-For is honoured only when it comes from configured trusted proxies.
describe('clientIpOf', () => {
  const proxies = ['10.0.0.0/8', '::1', '2001:db8:ff::/48'];

  it('ignores X-Forwarded-For from an untrusted peer (spoofing)', () => {
    assert.equal(clientIpOf('198.51.100.7', '10.1.1.1', proxies), '198.51.100.7');
    assert.equal(clientIpOf('198.51.100.7', ['10.1.1.1', '127.0.0.1'], proxies), '198.51.100.7');
    assert.equal(clientIpOf('198.51.100.7', '10.1.1.1', []), '198.51.100.7', 'no proxies configured: never honoured');
  });

  it('honours X-Forwarded-For from a trusted peer', () => {
    assert.equal(clientIpOf('10.0.0.2', '198.51.100.7', proxies), '198.51.100.7');
    assert.equal(clientIpOf('::1', '2001:DB8::9', proxies), '2001:db8::9');
    assert.equal(clientIpOf('2001:db8:ff::1', '198.51.100.7', proxies), '198.51.100.7');
  });

  it('walks right to left, skipping trusted proxies, and stops at the first untrusted hop', () => {
    // The client claimed 10.9.9.9 (a proxy address) itself; the real client 198.51.100.7 was appended by our proxy.
    assert.equal(clientIpOf('10.0.0.2', '10.9.9.9, 198.51.100.7, 10.0.0.3', proxies), '198.51.100.7');
    assert.equal(clientIpOf('10.0.0.2', ['203.0.113.1, 198.51.100.7', '10.0.0.3'], proxies), '198.51.100.7');
  });

  it('takes the leftmost hop when every hop is trusted, and the peer when the header is empty', () => {
    assert.equal(clientIpOf('10.0.0.2', '10.0.0.5, 10.0.0.3', proxies), '10.0.0.5');
    assert.equal(clientIpOf('10.0.0.2', '', proxies), '10.0.0.2');
    assert.equal(clientIpOf('10.0.0.2', undefined, proxies), '10.0.0.2');
  });

  it('stops with "unknown" at a malformed hop forwarded by a trusted proxy', () => {
    assert.equal(clientIpOf('10.0.0.2', '198.51.100.7, not-an-ip', proxies), UNKNOWN_CLIENT_IP);
    assert.equal(clientIpOf(undefined, '198.51.100.7', proxies), UNKNOWN_CLIENT_IP);
    // Garbage left of the first untrusted hop is never reached.
    assert.equal(clientIpOf('10.0.0.2', 'garbage, 198.51.100.7', proxies), '198.51.100.7');
  });

  it('normalises IPv4-mapped IPv6 peers and hops, ports and brackets', () => {
    assert.equal(clientIpOf('::ffff:10.0.0.2', '::ffff:198.51.100.7', proxies), '198.51.100.7');
    assert.equal(clientIpOf('::ffff:198.51.100.7', '10.1.1.1', proxies), '198.51.100.7');
    assert.equal(normalizeIp('198.51.100.7:4431'), '198.51.100.7');
    assert.equal(normalizeIp('[2001:DB8::1]:443'), '2001:db8::1');
    assert.equal(normalizeIp('fe80::1%eth0'), 'fe80::1');
    assert.equal(normalizeIp('0:0:0:0:0:ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(normalizeIp('example.com'), undefined);
  });
});

describe('CidrSet', () => {
  it('matches IPv4 and IPv6 ranges and single addresses, including IPv4-mapped forms', () => {
    const set = new CidrSet(['192.168.0.0/16', '2001:db8::/32', '203.0.113.5'], 'test');
    assert.equal(set.has('192.168.44.1'), true);
    assert.equal(set.has('::ffff:192.168.44.1'), true);
    assert.equal(set.has('192.169.0.1'), false);
    assert.equal(set.has('2001:db8:1::5'), true);
    assert.equal(set.has('2001:db9::5'), false);
    assert.equal(set.has('203.0.113.5'), true);
    assert.equal(set.has('203.0.113.6'), false);
    assert.equal(set.has(UNKNOWN_CLIENT_IP), false);
  });
});
