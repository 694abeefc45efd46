// Preloaded (node --import) into third-party contenders: the bench may only send traffic to loopback, and some
// peers phone home at start-up (mcp-hub fetches a marketplace catalogue). Any connection or DNS lookup for a
// non-loopback host fails at once, before a packet leaves; loopback traffic is untouched.

import dns from 'node:dns';
import net from 'node:net';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost|::ffff:127\.\d+\.\d+\.\d+)$/i;

function refused(host) {
  const error = new Error(`bench loopback guard: connection to ${host} refused`);
  error.code = 'ECONNREFUSED';
  return error;
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  const first = args[0];
  const options = Array.isArray(first) ? first[0] : first;
  const host = typeof options === 'object' && options !== null ? options.host : typeof args[1] === 'string' ? args[1] : undefined;
  const path = typeof options === 'object' && options !== null ? options.path : typeof first === 'string' ? first : undefined;
  if (path === undefined && host !== undefined && !LOOPBACK.test(String(host))) {
    process.nextTick(() => this.destroy(refused(host)));
    return this;
  }
  return connect.apply(this, args);
};

const lookup = dns.lookup;
dns.lookup = function guardedLookup(hostname, ...rest) {
  const callback = rest[rest.length - 1];
  if (!LOOPBACK.test(String(hostname)) && typeof callback === 'function') {
    process.nextTick(() => callback(refused(hostname)));
    return undefined;
  }
  return lookup.call(this, hostname, ...rest);
};
const promiseLookup = dns.promises.lookup;
dns.promises.lookup = function guardedPromiseLookup(hostname, ...rest) {
  if (!LOOPBACK.test(String(hostname))) return Promise.reject(refused(hostname));
  return promiseLookup.call(this, hostname, ...rest);
};
