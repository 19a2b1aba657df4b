/**
 * GET /rate_limit with one credential (free on GitHub): every resource's numbers from its body,
 * else the answer's x-ratelimit-* headers. `askRateLimit` only asks; `probeToken` asks for a
 * pool member and tells the pool what it learnt (a 401 kills the token, a 200 brings a dead one
 * back, and so does GitHub Enterprise Server's 404 "Rate limiting is not enabled.", which makes the
 * token unlimited); its X-OAuth-Scopes are the member's scopes (scopes.ts). Used at start-up, to
 * confirm a 401 (confirm.ts), to revive dead tokens, and for the members a reload adds or updates
 * (reload.ts) before they join.
 */
import { headerReader } from '../../http/headers/fields.js';
import { readCapped } from '../../platform/bytes.js';
import type { Logger } from '../../platform/log/logger.js';
import type { UpstreamClient } from '../../upstream/fetch.js';
import { rateLimitingOff, rateLimitsFromBody, readRateLimit } from '../rules/rate-limit.js';
import type { RateObservation, TokenPool } from '../rules/types.js';

const PROBE_BODY_LIMIT = 64 * 1024;

/**
 * What GET /rate_limit said: its status and numbers (`unlimited`: the upstream applies no rate
 * limit), or why it failed (an error code, never a credential).
 */
export type RateLimitAnswer =
  | { kind: 'answer'; status: number; observations: readonly RateObservation[]; unlimited?: boolean; scopes?: string | undefined }
  | { kind: 'failed'; error: string };

/** What a probe tells of a member: the status, `unlimited` (the 404 of rate limiting off), or undefined when it failed. */
export type ProbeStatus = number | 'unlimited' | undefined;

/** Asks GET /rate_limit (at the client's base path) with `authorization`; never throws. */
export async function askRateLimit(client: UpstreamClient, authorization: string): Promise<RateLimitAnswer> {
  try {
    const res = await client.request({
      method: 'GET',
      path: `${client.basePrefix}/rate_limit`,
      headers: { authorization, accept: 'application/vnd.github+json' },
    });
    const read = await readCapped(res.body, PROBE_BODY_LIMIT);
    if (read.kind === 'failed') throw read.error;
    if (read.kind === 'over') res.body.destroy(); // the rest is not read: a cut body parses as nothing, and the headers tell
    const body = Buffer.concat(read.chunks, read.size).toString('utf8');
    const fromBody = res.statusCode === 200 ? rateLimitsFromBody(body) : [];
    const fromHeaders = readRateLimit(headerReader(res.headers));
    const observations = fromBody.length > 0 ? fromBody : fromHeaders === undefined ? [] : [fromHeaders];
    const scopes = headerReader(res.headers)('x-oauth-scopes'); // the credential's scopes (scopes.ts)
    if (rateLimitingOff(res.statusCode, body)) return { kind: 'answer', status: res.statusCode, observations: [], unlimited: true, scopes };
    return { kind: 'answer', status: res.statusCode, observations, scopes };
  } catch (err) {
    return { kind: 'failed', error: (err as { code?: string }).code ?? 'error' };
  }
}

/** Tells the pool what GET /rate_limit said about member `name`; returns what it told (ProbeStatus). */
export function learnAnswer(pool: TokenPool, name: string, answer: RateLimitAnswer, log: Logger): ProbeStatus {
  if (answer.kind === 'failed') {
    pool.learn(name, 0, undefined, `rate_limit probe failed: ${answer.error}`);
    log.warn({ tokenName: name, err: answer.error }, 'rate_limit probe failed');
    return undefined;
  }
  // Rate limiting off answers 404 to a good credential: its scopes count as a success's.
  pool.learnScopes(name, answer.scopes, answer.unlimited === true ? 200 : answer.status);
  if (answer.unlimited === true) {
    pool.learn(name, answer.status, 'unlimited');
    return 'unlimited';
  }
  pool.learn(name, answer.status, answer.observations);
  if (answer.status !== 200 && answer.status !== 401)
    log.warn({ tokenName: name, status: answer.status }, 'rate_limit probe answered unexpectedly');
  return answer.status;
}

/**
 * Asks the upstream for one member's numbers and tells the pool; returns what it told (undefined
 * when the probe failed or the name is not a member). Never throws.
 */
export async function probeToken(pool: TokenPool, client: UpstreamClient, name: string, log: Logger): Promise<ProbeStatus> {
  const authorization = pool.authorizationOf(name);
  if (authorization === undefined) return undefined;
  return learnAnswer(pool, name, await askRateLimit(client, authorization), log);
}
