import { describe, expect, it } from 'vitest';
import { redactQuery, secretParameter } from '../../src/platform/log/logger.js';

describe('redactQuery', () => {
  it('returns a URL without credential parameters unchanged', () => {
    for (const url of ['/repos/o/r', '/repos/o/r?z=1', '/repos/o/r/issues?per_page=100&page=2', '/search?q=token', '/x?mytoken=1&tokens=2'])
      expect(redactQuery(url)).toBe(url);
  });
  it('masks every credential parameter, whatever its case and place', () => {
    expect(redactQuery('/x?access_token=ghp_a&page=2')).toBe('/x?access_token=[REDACTED]&page=2');
    expect(redactQuery('/x?page=2&Token=abc#frag')).toBe('/x?page=2&Token=[REDACTED]#frag');
    expect(redactQuery('/x?CLIENT_SECRET=s&code=c&state=st&password=p')).toBe(
      '/x?CLIENT_SECRET=[REDACTED]&code=[REDACTED]&state=[REDACTED]&password=[REDACTED]',
    );
    expect(redactQuery('/x?token=a&token=b')).toBe('/x?token=[REDACTED]&token=[REDACTED]');
  });
  it('gives the same answer on repeated calls (no regex state carried between them)', () => {
    for (let i = 0; i < 3; i++) {
      expect(redactQuery('/x?token=secret')).toBe('/x?token=[REDACTED]');
      expect(redactQuery('/y?page=1')).toBe('/y?page=1');
    }
  });
  it('decodes names before matching: percent-encoded and double-encoded names are masked too', () => {
    expect(redactQuery('/x?access%5Ftoken=ghp_a&page=2')).toBe('/x?access%5Ftoken=[REDACTED]&page=2');
    expect(redactQuery('/x?client%5Fsecret=s')).toBe('/x?client%5Fsecret=[REDACTED]');
    expect(redactQuery('/x?%74oken=t')).toBe('/x?%74oken=[REDACTED]');
    expect(redactQuery('/x?access%255Ftoken=t')).toBe('/x?access%255Ftoken=[REDACTED]');
    expect(redactQuery('/x?access+token=t')).toBe('/x?access+token=[REDACTED]');
  });
  it('covers token, secret, key, password, signature and code, as words of the name in any spelling', () => {
    for (const name of [
      'api_key',
      'apiKey',
      'APIKEY',
      'key',
      'X-Amz-Signature',
      'sig',
      'signature',
      'passwd',
      'db.password',
      'auth_code',
      'refreshToken',
      'private-key',
    ])
      expect(redactQuery(`/x?${name}=v&page=1`), name).toBe(`/x?${name}=[REDACTED]&page=1`);
    for (const url of ['/x?keyword=1', '/x?monkey=1', '/search?q=api_key', '/x?sort=created&direction=desc', '/x?passage=1'])
      expect(redactQuery(url), url).toBe(url);
  });
  it('hostile: broken escapes, empty names and odd separators neither throw nor leak', () => {
    expect(redactQuery('/x?%E0%A4%A=1&token%ZZ=2')).toBe('/x?%E0%A4%A=1&token%ZZ=[REDACTED]');
    expect(redactQuery('/x?=1&&token==x=y')).toBe('/x?=1&&token=[REDACTED]');
    expect(redactQuery('/x?page=1;access_token=t')).toBe('/x?page=1;access_token=[REDACTED]');
    expect(redactQuery('/x?a=1#token=t')).toBe('/x?a=1#token=t');
    expect(secretParameter('%')).toBe(false);
  });
});
