/**
 * The pool's side of GitHub App members, without the network: how the members are composed from
 * the tokens and the Apps (an App member that clashes is left out, never the whole list), the one
 * place that changes them (a tokens reload keeps the Apps' members, an App's change keeps the
 * tokens), and a worker's renew over IPC (the credential named by a digest, never sent back).
 */
import { describe, expect, it } from 'vitest';
import { createIpcTokenPool, credentialDigest, servePool } from '../../src/pool/backends/ipc-pool.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { createMemberSources } from '../../src/pool/members/member-sources.js';
import { composeMembers } from '../../src/pool/rules/membership.js';
import type { Acquired, Renewal } from '../../src/pool/rules/types.js';
import { channelPair } from '../helpers/ipc-channel.js';

const token = (name: string, value = `value_${name}`) => ({ name, value });

function localPool(tokens = [token('a'), token('b')]) {
  return createTokenPool({ tokens, equivalent: true, perTokenConcurrency: 5, maxConcurrency: 50, queueTimeoutMs: 0, maxQueue: 10 });
}

describe('composeMembers', () => {
  it('is the tokens, then each App in config order', () => {
    const { members, skipped } = composeMembers({
      tokens: [token('a'), token('b')],
      apps: [
        ['ci', [token('ci-1'), token('ci-2')]],
        ['bot', [token('bot-7')]],
      ],
    });
    expect(members.map((member) => member.name)).toEqual(['a', 'b', 'ci-1', 'ci-2', 'bot-7']);
    expect(skipped).toEqual([]);
  });

  it('hostile: leaves out an App member whose name or value another member has, and says which by name', () => {
    const { members, skipped } = composeMembers({
      tokens: [token('ci-1', 'shared_value')],
      apps: [['ci', [token('ci-1', 'minted_1'), token('ci-2', 'shared_value'), token('ci-3')]]],
    });
    expect(members).toEqual([token('ci-1', 'shared_value'), token('ci-3')]);
    expect(skipped).toEqual([
      { app: 'ci', name: 'ci-1', why: 'name' },
      { app: 'ci', name: 'ci-2', why: 'value' },
    ]);
    expect(JSON.stringify(skipped)).not.toContain('shared_value');
  });
});

describe('MemberSources: the one place that changes the members', () => {
  it("a tokens reload keeps the Apps' members, an App's change keeps the tokens and the other Apps'", () => {
    const pool = localPool();
    const errors: unknown[] = [];
    const sources = createMemberSources(pool, [token('a'), token('b')], ['ci', 'bot'], {
      error: (...args: unknown[]) => errors.push(args),
    });
    expect(sources.setApp('ci', [token('ci-1'), token('ci-2')]).added).toEqual(['ci-1', 'ci-2']);
    sources.setApp('bot', [token('bot-7')]);
    expect(pool.names).toEqual(['a', 'b', 'ci-1', 'ci-2', 'bot-7']);

    const reload = sources.setTokens([token('a'), token('c')]);
    expect(reload).toMatchObject({ added: ['c'], removed: ['b'] });
    expect(pool.names).toEqual(['a', 'c', 'ci-1', 'ci-2', 'bot-7']);

    // A re-mint is an update of the App's member; an expired installation leaves: nothing else moves.
    const remint = sources.setApp('ci', [token('ci-1', 'new_value')]);
    expect(remint).toMatchObject({ updated: ['ci-1'], removed: ['ci-2'], added: [] });
    expect(pool.names).toEqual(['a', 'c', 'ci-1', 'bot-7']);
    expect(pool.authorizationOf('ci-1')).toBe('token new_value');
    expect(errors).toEqual([]);
    pool.close();
  });

  it('hostile: an App member named like a token is left out with one error line, however often the App changes', () => {
    const pool = localPool([token('ci-1')]);
    const errors: Array<[Record<string, unknown>, string]> = [];
    const sources = createMemberSources(pool, [token('ci-1')], ['ci'], {
      error: (fields: Record<string, unknown>, msg: string) => errors.push([fields, msg]),
    } as never);
    sources.setApp('ci', [token('ci-1', 'minted_a'), token('ci-2')]);
    sources.setApp('ci', [token('ci-1', 'minted_b'), token('ci-2')]);
    expect(pool.names).toEqual(['ci-1', 'ci-2']);
    expect(pool.authorizationOf('ci-1')).toBe('token value_ci-1');
    expect(errors).toHaveLength(1);
    expect(errors[0]![0]).toEqual({ app: 'ci', tokenName: 'ci-1' });
    expect(JSON.stringify(errors)).not.toMatch(/minted_/);
    pool.close();
  });
});

const leaseOf = (acquired: Acquired) => {
  if (acquired.kind !== 'lease') throw new Error(`expected a lease, got ${acquired.kind}`);
  return acquired.lease;
};

describe('renew over IPC (cluster workers without Redis)', () => {
  it("asks the primary, which renews the member's current credential; the credential is named by a digest only", async () => {
    const owned = localPool([token('app-1', 'installation_token_one')]);
    const asked: Array<[string, string]> = [];
    const primaryPool = {
      ...owned,
      renew: (name: string, authorization: string): Promise<Renewal> => {
        asked.push([name, authorization]);
        owned.replaceMembers([token('app-1', 'installation_token_two')]);
        return Promise.resolve('renewed');
      },
    };
    const { primary, worker, messages } = channelPair();
    const served = servePool(primaryPool, primary, () => owned.generation());
    const remote = createIpcTokenPool(worker, [], true, new Map());
    const lease = leaseOf(await remote.acquire());
    expect(lease.authorization).toBe('token installation_token_one');
    lease.settle(401, () => undefined, undefined);

    expect(await remote.renew!('app-1', lease.authorization)).toBe('renewed');
    expect(asked).toEqual([['app-1', 'token installation_token_one']]);
    // A late 401 of the old credential: replaced already, the primary renews nothing.
    expect(await remote.renew!('app-1', lease.authorization)).toBe('renewed');
    expect(asked).toHaveLength(1);
    // The next lease brings the new credential.
    expect(leaseOf(await remote.acquire()).authorization).toBe('token installation_token_two');

    // A member that left the pool is gone: try another.
    owned.replaceMembers([token('app-2', 'installation_token_three')]);
    expect(await remote.renew!('app-1', 'token installation_token_two')).toBe('gone');

    const renews = messages.filter((message) => (message as { op?: string }).op === 'renew');
    expect(renews).toHaveLength(3);
    expect(renews[0]).toMatchObject({ name: 'app-1', digest: credentialDigest('token installation_token_one') });
    expect(JSON.stringify(renews)).not.toContain('installation_token');
    served.close();
    remote.close();
    owned.close();
  });

  it('a primary without renew (static tokens only) answers no, and a closed worker pool answers no at once', async () => {
    const owned = localPool();
    const { primary, worker } = channelPair();
    const served = servePool(owned, primary);
    const remote = createIpcTokenPool(worker, ['a', 'b'], true, new Map());
    expect(await remote.renew!('a', 'token value_a')).toBe('no');
    remote.close();
    expect(await remote.renew!('a', 'token value_a')).toBe('no');
    served.close();
    owned.close();
  });
});
