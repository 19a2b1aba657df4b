/**
 * The consumer gate: before a request takes any path (a cache lookup, GraphQL, a pass-through),
 * the consumer its credentials name is checked against its scope (src/pool/rules/allow.ts). A
 * refusal is a value (the reply and what the rejections counter counts); nothing of the request
 * is looked up or sent. The headers are only read here: resolveCredential (credential.ts) takes
 * the consumer credentials out afterwards.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../../http/errors.js';
import type { ErrorReply } from '../../http/reply.js';
import { allows } from '../rules/allow.js';
import { CONSUMER_KEY_HEADER, type ConsumerIdentity, type Consumers, type Identity } from './consumers.js';

/** etagere_consumer_rejections_total's reasons. */
export type RejectionReason = 'key' | 'token' | 'scope' | 'claim';

/** A request the gate refuses: the reply, and the consumer (its label; "-" when unknown) and reason it counts for. */
export interface Refusal {
  readonly reply: ErrorReply;
  readonly consumer: string;
  readonly reason: RejectionReason;
}

/** The consumer label of a request refused before any consumer was known. */
export const UNKNOWN_CONSUMER = '-';

/**
 * The consumer a request's credentials name, X-Etagere-Key's first, else Authorization's; its
 * headers are left as they are. `connection` lets a key sent again on one connection skip its digest.
 */
export function presentedConsumer(headers: IncomingHttpHeaders, consumers: Consumers, connection?: object): Identity {
  const keyHeader = headers[CONSUMER_KEY_HEADER];
  const key = Array.isArray(keyHeader) ? keyHeader[0] : keyHeader;
  if (key !== undefined) {
    const identity = consumers.match(key.trim(), connection);
    if (identity.kind === 'consumer') return identity;
  }
  const authorization = headers.authorization;
  if (authorization === undefined || authorization.trim().length === 0) return { kind: 'none' };
  return consumers.inAuthorization(authorization, connection);
}

/** A scoped consumer's request that no rule allows: the refusal; undefined when it may go on. */
export function scopeRefusal(consumer: ConsumerIdentity, method: string, apiPath: string): Refusal | undefined {
  if (consumer.scope === undefined || allows(consumer.scope, method, apiPath)) return undefined;
  return { reply: errors.scopeRefused(consumer.name, method), consumer: consumer.name, reason: 'scope' };
}
