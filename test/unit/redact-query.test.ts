import { describe, expect, it } from 'vitest';
import { redactQuery } from '../../src/platform/log/logger.js';

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
});
