/**
 * The rules of a consumer scope (src/pool/rules/allow.ts): `*` one segment, `**` any number,
 * paths compared in normal form, tricks matching nothing, the paths that need a rule naming
 * them, claim values that could widen a glob refused, and bad globs refused at config load with
 * the key named.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { allows, bindScope, claimSegments, compileScope, type AllowRule } from '../../src/pool/rules/allow.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createConsumers } from '../../src/pool/consumers/consumers.js';
import { identify } from '../../src/pool/consumers/gate.js';
import { createOidcVerifier } from '../../src/pool/consumers/oidc.js';

const rule = (paths: string[], methods = ['GET', 'HEAD']): AllowRule => ({ paths, methods });

describe('a consumer scope', () => {
  const scope = compileScope([rule(['/repos/acme/**', '/orgs/acme/repos', '/users/*'])]);

  it('matches `*` as one segment and `**` as any number, in normal form', () => {
    expect(allows(scope, 'GET', '/repos/acme')).toBe(true);
    expect(allows(scope, 'GET', '/repos/acme/widget/pulls/1')).toBe(true);
    expect(allows(scope, 'HEAD', '/Repos/ACME/Widget/')).toBe(true);
    expect(allows(scope, 'GET', '/repos/acm%65/widget')).toBe(true);
    expect(allows(scope, 'GET', '/users/octocat')).toBe(true);
    expect(allows(scope, 'GET', '/users/octocat/repos')).toBe(false);
    expect(allows(scope, 'GET', '/users')).toBe(false);
    expect(allows(scope, 'GET', '/orgs/acme/repos')).toBe(true);
    expect(allows(scope, 'GET', '/orgs/acme/repos/x')).toBe(false);
    expect(allows(scope, 'GET', '/repos/acmecorp/x')).toBe(false);
  });

  it('allows only its methods (GET and HEAD by default)', () => {
    expect(allows(scope, 'POST', '/repos/acme/widget/issues')).toBe(false);
    expect(allows(scope, 'DELETE', '/repos/acme/widget')).toBe(false);
    const writer = compileScope([rule(['/repos/acme/*/issues'], ['POST'])]);
    expect(allows(writer, 'POST', '/repos/acme/widget/issues')).toBe(true);
    expect(allows(writer, 'GET', '/repos/acme/widget/issues')).toBe(false);
  });

  it('matches nothing through dot segments, empty segments or encoded separators', () => {
    const everything = compileScope([rule(['/**'])]);
    for (const trick of [
      '/repos/acme/../other',
      '/repos/acme/./x',
      '/repos//acme',
      '//repos/acme',
      '/repos/acme%2Fother',
      '/repos/acme%5cother',
      '/a%00b',
    ])
      expect(allows(everything, 'GET', trick), trick).toBe(false);
    expect(allows(scope, 'GET', '/repos/acme/%2e%2e/other')).toBe(false);
  });

  it('reaches /repositories, /search and /graphql only through a glob naming them', () => {
    const everything = compileScope([rule(['/**', '/*/**'], ['GET', 'POST'])]);
    for (const path of ['/repositories/123', '/repositories/123/contents/x', '/search/code', '/graphql', '/SEARCH/issues'])
      expect(allows(everything, 'GET', path), path).toBe(false);
    const named = compileScope([rule(['/repositories/**', '/search/*', '/graphql'], ['GET', 'POST'])]);
    expect(allows(named, 'GET', '/repositories/123/pulls')).toBe(true);
    expect(allows(named, 'GET', '/search/code')).toBe(true);
    expect(allows(named, 'POST', '/graphql')).toBe(true);
  });

  it('answers a long path against many `**` (no backtracking)', () => {
    const many = compileScope([rule(['/**/a/**/b/**/c/**/d/**/e/**/f/**/g/**/h/**/zz'])]);
    expect(allows(many, 'GET', `/${'a/b/c/d/e/f/g/h/'.repeat(500)}x`)).toBe(false);
    expect(allows(many, 'GET', `/${'a/b/c/d/e/f/g/h/'.repeat(500)}zz`)).toBe(true);
  });

  it('agrees with a plain regular expression on random paths', () => {
    const globs = ['/repos/*/x/**', '/a/**/b', '/**/c', '/*'];
    const compiled = compileScope([rule(globs)]);
    const asRegex = globs.map(
      (glob) =>
        new RegExp(
          `^${glob
            .replace(/\/\*\*/g, '(?:/[^/]+)*')
            .replace(/\/\*(?!\*)/g, '/[^/]+')
            .replace(/^\(\?:/, '(?:')}$`,
        ),
    );
    const segment = fc.constantFrom('repos', 'a', 'b', 'c', 'x', 'acme');
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 8 }), (segments) => {
        const path = `/${segments.join('/')}`;
        expect(allows(compiled, 'GET', path)).toBe(asRegex.some((re) => re.test(path)));
      }),
    );
  });
});

describe('claims in a scope', () => {
  const rules = [rule(['/repos/${repository}/**', '/orgs/${repository_owner}/repos'])];

  it('fill their placeholders with the claim value, in lower case', () => {
    const bound = bindScope(rules, { repository: 'Acme/Widget', repository_owner: 'acme' });
    expect('rules' in bound).toBe(true);
    if (!('rules' in bound)) return;
    expect(allows(bound, 'GET', '/repos/acme/widget/actions/runs')).toBe(true);
    expect(allows(bound, 'GET', '/repos/acme/other')).toBe(false);
    expect(allows(bound, 'GET', '/orgs/acme/repos')).toBe(true);
  });

  it('refuse a value that could widen a glob, or a missing one', () => {
    for (const repository of [
      'acme/*',
      'acme/**',
      '*/*',
      'acme/..',
      '../x',
      'acme',
      'acme/widget/extra',
      'acme/wid%2Fget',
      'acme/',
      '/acme',
      'a b/c',
      '',
      42,
    ])
      expect(bindScope(rules, { repository, repository_owner: 'acme' }), String(repository)).toEqual({ refusedClaim: 'repository' });
    expect(bindScope(rules, { repository: 'acme/widget' })).toEqual({ refusedClaim: 'repository_owner' });
    expect(bindScope(rules, { repository: 'acme/widget', repository_owner: 'acme/x' })).toEqual({ refusedClaim: 'repository_owner' });
    expect(claimSegments('sub', 'system:serviceaccount:ci:builder')).toEqual(['system:serviceaccount:ci:builder']);
  });
});

describe('allow rules in the config', () => {
  const withAllow = (allow: unknown): unknown => {
    try {
      parseConfig({
        upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com' }],
        consumers: { enabled: true, keys: [{ name: 'ci', value: 'key_ci_123456', allow }] },
      });
      return 'ok';
    } catch (err) {
      return (err as Error).message;
    }
  };

  it('take valid globs and methods', () => {
    expect(withAllow([{ paths: ['/repos/acme/**', '/orgs/acme/repos', '/'] }])).toBe('ok');
    expect(withAllow([{ paths: ['/graphql'], methods: ['post'] }])).toBe('ok');
  });

  it('refuse bad globs, naming the key and never the key value', () => {
    for (const [glob, why] of [
      ['***', 'must start with "/"'],
      ['/repos/***', '"*" and "**" must be whole segments'],
      ['/repos/acme*', '"*" and "**" must be whole segments'],
      ['', 'must start with "/"'],
      ['repos/acme', 'must start with "/"'],
      ['/repos/../x', 'dot segment'],
      ['/repos//x', 'empty segment'],
      ['/repos/x/', 'empty segment'],
      ['/repos/%2e%2e', 'only letters'],
      ['/repos/${repository}', 'only OIDC issuers'],
    ] as const) {
      const message = withAllow([{ paths: [glob] }]);
      expect(message, glob).toContain('consumers.keys[0].allow[0].paths[0]');
      expect(message, glob).toContain(why);
      expect(message).not.toContain('key_ci_123456');
    }
    expect(withAllow([{ paths: ['/x'], methods: ['TRACE'] }])).toContain('consumers.keys[0].allow[0].methods[0]');
    expect(withAllow([])).toContain('consumers.keys[0].allow');
    expect(withAllow([{ paths: [] }])).toContain('consumers.keys[0].allow[0].paths');
  });
});

describe('OIDC issuers in the config', () => {
  const issuer = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    name: 'actions',
    issuer: 'https://token.actions.githubusercontent.com',
    audience: 'https://etagere.example',
    name_claim: 'repository',
    allow: [{ paths: ['/repos/${repository}/**'] }],
    ...overrides,
  });
  const parse = (consumers: Record<string, unknown>): string => {
    try {
      parseConfig({
        upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com' }],
        consumers: { enabled: true, ...consumers },
      });
      return 'ok';
    } catch (err) {
      return (err as Error).message;
    }
  };

  it('are enough to turn consumers on, and their rules may use claims', () => {
    expect(parse({ oidc: [issuer()] })).toBe('ok');
    expect(parse({ oidc: [issuer({ issuer: 'http://127.0.0.1:8123', jwks_url: 'http://localhost:8123/jwks' })] })).toBe('ok');
  });

  it('refuse plain http off loopback, duplicate names and issuers, and bad claim names', () => {
    expect(parse({ oidc: [issuer({ issuer: 'http://issuer.example' })] })).toContain('consumers.oidc[0].issuer: must be an https URL');
    expect(parse({ oidc: [issuer({ jwks_url: 'http://10.0.0.1/jwks' })] })).toContain('consumers.oidc[0].jwks_url');
    expect(parse({ oidc: [issuer({ issuer: 'not a url' })] })).toContain('consumers.oidc[0].issuer');
    expect(parse({ oidc: [issuer(), issuer({ name: 'other' })] })).toContain('consumers.oidc[1].issuer: this issuer is listed twice');
    expect(parse({ keys: [{ name: 'actions', value: 'key_actions_1234' }], oidc: [issuer()] })).toContain(
      'consumers.oidc[0].name: duplicate consumer name "actions"',
    );
    expect(parse({ oidc: [issuer({ name_claim: 'repo-name' })] })).toContain('consumers.oidc[0].name_claim');
    expect(parse({ oidc: [issuer({ allow: [{ paths: ['/repos/${repo-sitory}/**'] }] })] })).toContain(
      'consumers.oidc[0].allow[0].paths[0]',
    );
    expect(parse({ oidc: [issuer({ allow: [] })] })).toContain('consumers.oidc[0].allow');
    expect(parse({ oidc: [issuer({ allow: undefined })] })).toContain('consumers.oidc[0].allow');
  });
});

describe('a consumer key shaped like a JWT', () => {
  it('is still that key, before any OIDC check', () => {
    const jwtShaped = 'eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0.c2lnbmF0dXJlLXBhcnQ';
    const consumers = createConsumers([{ name: 'legacy', value: jwtShaped }]);
    const oidc = createOidcVerifier([]);
    const identified = identify({ 'x-etagere-key': jwtShaped }, consumers, oidc);
    expect(identified).toMatchObject({ kind: 'consumer', identity: { name: 'legacy' } });
    expect(identify({ 'x-etagere-key': `${jwtShaped}x` }, consumers, oidc)).toMatchObject({ kind: 'refused' });
  });
});
