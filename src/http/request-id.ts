/** X-Request-Id: the client's own when it is a sane token, else a cheap unique one. */
import { randomBytes } from 'node:crypto';

const PREFIX = randomBytes(6).toString('hex');
let counter = 0;
const SANE = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export function requestId(fromClient: string | string[] | undefined): string {
  if (typeof fromClient === 'string' && SANE.test(fromClient)) return fromClient;
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return `${PREFIX}-${counter.toString(36)}`;
}
