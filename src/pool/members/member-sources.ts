/**
 * The one place that changes the pool's membership. The members come from separate sources, kept
 * apart here so that none of them drops another's:
 *
 * - the tokens: ETAGERE_TOKENS / pool.tokens and pool.tokens_file's lines (a reload replaces them:
 *   reload.ts);
 * - each GitHub App's installation tokens (each change of an App's set replaces that App's:
 *   app-members.ts).
 *
 * Each change recomposes the whole list (membership.ts `composeMembers`) and hands it to
 * `MemberPool.replaceMembers`. An App member whose name or value another member has is left out
 * and logged once, by name.
 */
import type { Logger } from '../../platform/log/logger.js';
import { composeMembers } from '../rules/membership.js';
import type { MemberPool, MembershipChange, PoolToken } from '../rules/types.js';

export interface MemberSources {
  /** Replaces the tokens (checked by the caller); the Apps' members stay. */
  setTokens(tokens: readonly PoolToken[]): MembershipChange;
  /** Replaces one App's members; the tokens and the other Apps' stay. */
  setApp(app: string, members: readonly PoolToken[]): MembershipChange;
}

export function createMemberSources(
  pool: MemberPool,
  tokens: readonly PoolToken[],
  appNames: readonly string[],
  log: Pick<Logger, 'error'>,
): MemberSources {
  let current = tokens;
  const apps = new Map<string, readonly PoolToken[]>(appNames.map((app) => [app, []]));
  /** Skipped members already logged, so that a clash is one line, not one per refresh. */
  const reported = new Set<string>();

  const apply = (): MembershipChange => {
    const { members, skipped } = composeMembers({ tokens: current, apps: [...apps.entries()] });
    for (const skip of skipped) {
      const key = `${skip.name}|${skip.why}`;
      if (reported.has(key)) continue;
      reported.add(key);
      log.error(
        { app: skip.app, tokenName: skip.name },
        skip.why === 'name'
          ? 'an App installation member has the name of a pool token: left out of the pool (rename the token)'
          : 'an App installation token is the value of another member: left out of the pool',
      );
    }
    return pool.replaceMembers(members);
  };

  return {
    setTokens(next) {
      current = next;
      return apply();
    },
    setApp(app, members) {
      apps.set(app, members);
      return apply();
    },
  };
}
