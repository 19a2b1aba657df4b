/**
 * Secrets that `etagere check-config` masks stay out of what the proxy prints and serves: a
 * public_url with a user or password (it would be written into every Link and body URL) is a
 * config error on one line that does not repeat it, and the start-up summary shows URLs masked.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/platform/config/load.js';
import { startupSummary } from '../../src/platform/config/summary.js';

const SECRET = 'pw-4f0c2e9a7b';

function loadError(env: Record<string, string>): string {
  try {
    loadConfig({ env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('public_url', () => {
  it('a plain base URL (with a path) is taken as it is', () => {
    expect(loadConfig({ env: { PUBLIC_URL: 'https://proxy.example/github' } }).public_url).toBe('https://proxy.example/github');
  });

  it.each([
    [`https://ops:${SECRET}@proxy.example`, /must not carry a user or password/],
    [`https://${SECRET}@proxy.example`, /must not carry a user or password/],
    [`https://:${SECRET}@proxy.example/`, /must not carry a user or password/],
    [`https://proxy.example/?key=${SECRET}`, /without a query or fragment/],
    [`https://proxy.example/#${SECRET}`, /without a query or fragment/],
  ])('hostile: %s is refused on one line that names the variable and not the secret', (url, message) => {
    const text = loadError({ PUBLIC_URL: url });
    expect(text).toMatch(message);
    expect(text).toMatch(/^invalid config \(environment\): PUBLIC_URL: .*\(public_url\)$/);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('\n');
  });

  it('hostile: the same in a file names the key', () => {
    expect(() =>
      parseConfig({
        public_url: `http://u:${SECRET}@127.0.0.1:8080`,
        upstreams: [{ name: 'g', prefix: '/', url: 'https://api.github.com' }],
      }),
    ).toThrow(/public_url: must not carry a user or password/);
  });

  it("the start-up summary shows the public URL, the upstreams' and Redis' without a secret", () => {
    const config = loadConfig({
      env: {
        PUBLIC_URL: 'https://proxy.example',
        UPSTREAM_URL: `https://user:${SECRET}@ghe.example/api/v3?token=${SECRET}`,
        REDIS_URL: `redis://etagere:${SECRET}@redis:6379/0`,
      },
    });
    const summary = JSON.stringify(startupSummary(config));
    expect(summary).toContain('https://proxy.example');
    expect(summary).not.toContain(SECRET);
  });
});
