/**
 * The admin token: the pure rule of which admin paths need it and what a request must send
 * (src/http/headers/admin-token.ts), and the config that fails closed when the admin port leaves
 * loopback without one (src/platform/config/schema.ts).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OPEN_ADMIN_PATHS, adminTokenRefusal, adminTokenRule } from '../../src/http/headers/admin-token.js';
import { ConfigError, loadAdminConfig, loadConfig } from '../../src/platform/config/load.js';
import { maskedConfig } from '../../src/platform/config/masked.js';

const TOKEN = 'adm-6c1f0d2b9e8a4f7c';
const rule = adminTokenRule(TOKEN);
const PROTECTED = [
  '/admin/cache?path=/repos/a/b&body=1',
  '/admin/purge',
  '/admin/tokens',
  '/admin/consumers',
  '/admin/quota',
  '/admin/status',
  '/admin/cache/stats',
  '/admin/nope',
  '//admin/tokens',
  '/metrics/',
  '/HEALTHZ',
  'http://127.0.0.1:9090/admin/tokens',
];

describe('the admin token rule', () => {
  it('without a token every path is open (a loopback admin port)', () => {
    for (const path of PROTECTED) expect(adminTokenRefusal(adminTokenRule(null), path, undefined)).toBeUndefined();
  });

  it('leaves /, /healthz, /readyz and /metrics open, with or without a query', () => {
    for (const path of [...OPEN_ADMIN_PATHS, '/metrics?name[]=x', '/readyz?verbose'])
      expect(adminTokenRefusal(rule, path, undefined)).toBeUndefined();
  });

  it('lets the right token through on every other path, the scheme in any case', () => {
    for (const path of PROTECTED) {
      expect(adminTokenRefusal(rule, path, `Bearer ${TOKEN}`)).toBeUndefined();
      expect(adminTokenRefusal(rule, path, `bearer   ${TOKEN} `)).toBeUndefined();
    }
  });

  it.each([
    ['no Authorization', undefined, /^Requires the admin token: send Authorization: Bearer/],
    ['an empty one', '  ', /^Requires the admin token: send Authorization: Bearer/],
    ['a wrong token', 'Bearer adm-6c1f0d2b9e8a4f7d', /^Bad admin token$/],
    ['a token of the wrong length', `Bearer ${TOKEN}x`, /^Bad admin token$/],
    ['a prefix of the token', `Bearer ${TOKEN.slice(0, 8)}`, /^Bad admin token$/],
    ['the token under another scheme', `token ${TOKEN}`, /as Authorization: Bearer/],
    ['the token as Basic credentials', `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, /as Authorization: Bearer/],
    ['the token without a scheme', TOKEN, /as Authorization: Bearer/],
    ['two tokens', `Bearer ${TOKEN} ${TOKEN}`, /as Authorization: Bearer/],
  ])('hostile: %s is a 401 that repeats nothing sent', (_what, authorization, message) => {
    for (const path of PROTECTED) {
      const refused = adminTokenRefusal(rule, path, authorization);
      expect(refused?.status).toBe(401);
      expect(refused?.message).toMatch(message);
      expect(refused?.message).not.toContain(TOKEN.slice(4));
      expect(refused?.headers['www-authenticate']).toMatch(/^Bearer realm="etagere admin"/);
    }
  });

  it('hostile: the token in the query is not taken, and the answer says where it goes', () => {
    for (const query of [`?token=${TOKEN}`, `?access_token=${TOKEN}`, `?path=/x&admin_token=${TOKEN}`]) {
      const refused = adminTokenRefusal(rule, `/admin/tokens${query}`, undefined);
      expect(refused?.message).toBe('Requires the admin token in Authorization: Bearer, not in the query');
    }
  });
});

describe('admin.token and admin.open in the config', () => {
  it('ETAGERE_ADMIN_TOKEN sets admin.token; check-config masks it', () => {
    const config = loadConfig({ env: { ETAGERE_ADMIN_TOKEN: TOKEN } });
    expect(config.admin.token).toBe(TOKEN);
    expect(JSON.stringify(maskedConfig(config))).not.toContain(TOKEN);
    expect(loadAdminConfig({ env: { ETAGERE_ADMIN_TOKEN: TOKEN } }).admin.token).toBe(TOKEN);
  });

  it('loopback needs no token', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1', '127.0.0.2'])
      expect(loadConfig({ env: { ADMIN_HOST: host } }).admin.token).toBeNull();
  });

  it.each(['0.0.0.0', '::', '192.0.2.10', 'etagere.internal'])(
    'hostile: admin.host %s without a token refuses to start, on one line naming the key',
    (host) => {
      let message = '';
      try {
        loadConfig({ env: { ADMIN_HOST: host } });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toMatch(/admin\.token: is not set and admin\.host is .*not a loopback address/);
      expect(message).toContain('ETAGERE_ADMIN_TOKEN');
      expect(message).toContain('admin.open: true');
      expect(message).not.toContain('\n');
    },
  );

  it('starts beyond loopback with a token, or with admin.open: true on purpose', () => {
    expect(loadConfig({ env: { ADMIN_HOST: '0.0.0.0', ETAGERE_ADMIN_TOKEN: TOKEN } }).admin.token).toBe(TOKEN);
    const file = { admin: { host: '0.0.0.0', open: true } };
    expect(loadConfig({ env: {}, file: withFile(JSON.stringify(file)) }).admin.open).toBe(true);
  });

  it('hostile: a short or spaced token is refused without being shown', () => {
    for (const bad of ['short-token', 'has a space in it long']) {
      expect(() => loadConfig({ env: { ETAGERE_ADMIN_TOKEN: bad } })).toThrow(/ETAGERE_ADMIN_TOKEN: must be 16-1024 printable characters/);
      try {
        loadConfig({ env: { ETAGERE_ADMIN_TOKEN: bad } });
      } catch (err) {
        expect((err as Error).message).not.toContain(bad);
      }
    }
  });
});

function withFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'etagere-admin-token-')), 'etagere.yaml');
  writeFileSync(file, text);
  return file;
}
