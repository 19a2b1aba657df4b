/** The pure rule for writes on the admin port: JSON only, from no other origin (src/http/headers/admin-write.ts). */
import { describe, expect, it } from 'vitest';
import { adminOriginOf, adminWriteRefusal, isAdminWrite } from '../../src/http/headers/admin-write.js';

const JSON_TYPE = { host: '127.0.0.1:9090', 'content-type': 'application/json' };

describe('admin writes', () => {
  it('are every method but GET, HEAD and OPTIONS', () => {
    expect(['GET', 'HEAD', 'OPTIONS'].map(isAdminWrite)).toEqual([false, false, false]);
    expect(['POST', 'PUT', 'PATCH', 'DELETE', 'PURGE'].map(isAdminWrite)).toEqual([true, true, true, true, true]);
  });

  it("take the admin address's origin from its Host, as a browser serialises it", () => {
    expect(adminOriginOf('127.0.0.1:9090')).toBe('http://127.0.0.1:9090');
    expect(adminOriginOf('LocalHost:80')).toBe('http://localhost');
    expect(adminOriginOf('[::1]:9090')).toBe('http://[::1]:9090');
    expect(adminOriginOf('evil.example/x')).toBeUndefined();
    expect(adminOriginOf(undefined)).toBeUndefined();
  });

  it('pass JSON without Origin (the CLI, curl) and from the own origin', () => {
    expect(adminWriteRefusal(JSON_TYPE)).toBeUndefined();
    expect(adminWriteRefusal({ ...JSON_TYPE, 'content-type': 'Application/JSON; charset=utf-8' })).toBeUndefined();
    expect(adminWriteRefusal({ ...JSON_TYPE, origin: 'http://127.0.0.1:9090', 'sec-fetch-site': 'same-origin' })).toBeUndefined();
    expect(adminWriteRefusal({ ...JSON_TYPE, 'sec-fetch-site': 'none' })).toBeUndefined();
  });

  it('refuse another origin, another scheme or port, Origin null, and cross-site or same-site fetches', () => {
    for (const origin of [
      'https://127.0.0.1:9090',
      'http://127.0.0.1:9091',
      'http://localhost:9090',
      'null',
      'http://127.0.0.1:9090, http://evil.example',
    ])
      expect(adminWriteRefusal({ ...JSON_TYPE, origin })?.status).toBe(403);
    expect(adminWriteRefusal({ ...JSON_TYPE, host: undefined, origin: 'http://127.0.0.1:9090' })?.status).toBe(403);
    for (const site of ['cross-site', 'same-site', 'bogus'])
      expect(adminWriteRefusal({ ...JSON_TYPE, 'sec-fetch-site': site })?.status).toBe(403);
  });

  it('refuse any body type but JSON with 415', () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonp',
      undefined,
    ])
      expect(adminWriteRefusal({ ...JSON_TYPE, 'content-type': type })?.status).toBe(415);
  });
});
