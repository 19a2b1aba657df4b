/**
 * Defaults that fail closed, in the deployment files: the default listen address is loopback, so the Docker
 * image and compose say 0.0.0.0 themselves; compose publishes on the host's loopback and opens its
 * pool on purpose (config/container.yaml); the config every start-up path uses still loads.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig, parseConfig } from '../../src/platform/config/load.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');
const TOKENS = { ETAGERE_TOKENS: 'ci=deploy_test_token_0123456789' };

describe('listen defaults in the deployment files', () => {
  it('listen.host defaults to 127.0.0.1, in the schema and in config/default.yaml', () => {
    expect(parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com' }] }).listen.host).toBe('127.0.0.1');
    expect(loadConfig({ file: 'config/default.yaml', env: {} }).listen.host).toBe('127.0.0.1');
    // npm start with a pool: loopback, so it starts.
    expect(loadConfig({ file: 'config/default.yaml', env: TOKENS }).pool.tokens).toHaveLength(1);
  });

  it('the Docker image sets HOST=0.0.0.0 itself, and leaves the admin port on loopback', () => {
    const env = read('Dockerfile')
      .split('\n')
      .filter((line) => !line.trim().startsWith('#'))
      .join('\n');
    expect(env).toMatch(/ENV[^\n]*\\\n(?:\s+\S+=\S+ \\\n)*\s+HOST=0\.0\.0\.0/);
    expect(env).not.toMatch(/ADMIN_HOST/);
    // The image's default start-up with a pool on loopback starts: the admin port needs no token there.
    expect(loadConfig({ file: 'config/default.yaml', env: { HOST: '0.0.0.0' } }).admin.host).toBe('127.0.0.1');
  });

  it('compose sets HOST=0.0.0.0, publishes the proxy and the admin port on loopback, and runs config/container.yaml', () => {
    const compose = parse(read('docker-compose.yml')) as { services: Record<string, Record<string, unknown>> };
    const etagere = compose.services.etagere!;
    expect((etagere.environment as Record<string, string>).HOST).toBe('0.0.0.0');
    expect(etagere.ports).toEqual(['127.0.0.1:8080:8080', '127.0.0.1:9090:9090']);
    expect(etagere.command).toEqual(['node', 'dist/src/main/cli.js', 'serve', '--config', 'config/container.yaml']);
  });

  it("compose's config starts with a pool and the admin port on 0.0.0.0 (pool.open, admin.open on purpose) and lets Prometheus in by name", () => {
    const env = { ...TOKENS, HOST: '0.0.0.0', ADMIN_HOST: '0.0.0.0', UPSTREAM_URL: 'https://api.github.com' };
    const config = loadConfig({ file: 'config/container.yaml', env });
    expect(config.pool.open).toBe(true);
    expect(config.admin.open).toBe(true);
    expect(
      loadConfig({ file: 'config/container.yaml', env: { ...env, ETAGERE_ADMIN_TOKEN: 'compose-admin-token-0123' } }).admin.token,
    ).toBe('compose-admin-token-0123');
    expect(config.admin.allowed_hosts).toContain('etagere');
    expect(config.upstreams[0]).toMatchObject({ url: 'https://api.github.com', token_pool: true });
  });

  it('hostile: ADMIN_HOST=0.0.0.0 with config/default.yaml and no token refuses to start, naming admin.token', () => {
    expect(() => loadConfig({ file: 'config/default.yaml', env: { ADMIN_HOST: '0.0.0.0' } })).toThrow(/admin\.token: is not set/);
  });

  it('hostile: the image default (HOST=0.0.0.0) with a pool and config/default.yaml refuses to start', () => {
    expect(() => loadConfig({ file: 'config/default.yaml', env: { ...TOKENS, HOST: '0.0.0.0' } })).toThrow(ConfigError);
    expect(() => loadConfig({ file: 'config/default.yaml', env: { ...TOKENS, HOST: '0.0.0.0' } })).toThrow(
      /HOST: is 0\.0\.0\.0.*pool\.open.*\(listen\.host\)/s,
    );
  });
});
