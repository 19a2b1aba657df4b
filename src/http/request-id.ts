/** X-Request-Id: the client's own when it is a sane token, else a cheap unique one. */
import { randomBytes } from 'node:crypto';

const SANE = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export type RequestIds = (fromClient: string | string[] | undefined) => string;

/**
 * The request ids of one app: a random prefix of its own and a counter, so ids do not collide
 * across apps, workers and replicas.
 */
export function createRequestIds(): RequestIds {
  const prefix = randomBytes(6).toString('hex');
  let counter = 0;
  return (fromClient) => {
    if (typeof fromClient === 'string' && SANE.test(fromClient)) return fromClient;
    counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
    return `${prefix}-${counter.toString(36)}`;
  };
}
