/**
 * The pure host rules behind "defaults that fail closed" (src/platform/host.ts):
 * which listen addresses are loopback, and which Host headers the admin port answers.
 */
import { describe, expect, it } from 'vitest';
import { adminHostAllowed, hostOf, isLoopbackAddress } from '../../src/platform/host.js';

describe('loopback listen addresses', () => {
  it.each(['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]', '::ffff:127.0.0.1'])('%s is loopback', (host) => {
    expect(isLoopbackAddress(host)).toBe(true);
  });
  it.each([
    '0.0.0.0',
    '::',
    '[::]',
    '192.0.2.10',
    '10.0.0.1',
    'example.com',
    '127.0.0.1.nip.io',
    'localhost.evil.example',
    '127.0.0.256',
    '::ffff:10.0.0.1',
  ])('hostile: %s is not', (host) => {
    expect(isLoopbackAddress(host)).toBe(false);
  });
});

describe('admin Host check', () => {
  const allowed = new Set(['etagere', '[fd00::9]']);
  it.each([
    ['127.0.0.1:9090', undefined],
    ['localhost', undefined],
    ['[::1]:9090', undefined],
    ['Etagere:9090', undefined],
    ['[FD00::9]', undefined],
    // The address the connection arrived on (a kubelet probe or a scraper on the pod IP).
    ['10.1.2.3:9090', '10.1.2.3'],
    ['10.1.2.3', '::ffff:10.1.2.3'],
    ['[fd00::2]:9090', 'fd00::2'],
  ])('Host %s (local address %s) is served', (host, local) => {
    expect(adminHostAllowed(host, allowed, local)).toBe(true);
  });
  it.each([
    [undefined, '127.0.0.1'],
    ['', '127.0.0.1'],
    ['evil.example', '127.0.0.1'],
    ['evil.example:9090', '10.1.2.3'],
    ['10.1.2.3', '127.0.0.1'],
    ['10.1.2.4:9090', '10.1.2.3'],
    ['etagere.evil.example', '127.0.0.1'],
    ['localhost:9090@evil.example', '127.0.0.1'],
    ['127.0.0.1 evil', '127.0.0.1'],
    ['[::1', '127.0.0.1'],
    ['[::1]x', '127.0.0.1'],
  ])('hostile: Host %j (local address %s) is refused', (host, local) => {
    expect(adminHostAllowed(host, allowed, local)).toBe(false);
  });
  it('reads the host part of a Host value', () => {
    expect(hostOf('Example.COM:80')).toBe('example.com');
    expect(hostOf('[::1]:1')).toBe('[::1]');
    expect(hostOf('a b')).toBeUndefined();
  });
});
