/**
 * Pure `Surrogate-Control` (W3C Edge Architecture Specification 1.0): the origin's directives for
 * the caches it runs in front of itself, which take precedence over `Cache-Control` for them.
 * etagere honours them under `rfc9111` only, announces itself with `Surrogate-Capability`, and
 * reads `no-store` and `max-age=N[+M]` (the `+M` is ignored), untargeted or targeted at its
 * device token (`max-age=60;etagere`); a directive targeted at another device is ignored, and
 * targeted directives replace untargeted ones.
 */
import type { Directives } from '../../http/headers/fields.js';

/** The device token etagere answers to. */
export const SURROGATE_TOKEN = 'etagere';

/** The request header that tells the origin a surrogate is there (Edge Architecture section 2.2). */
export const SURROGATE_CAPABILITY = `${SURROGATE_TOKEN}="Surrogate/1.0"`;

export interface SurrogateDirectives {
  noStore: boolean;
  /** Seconds, capped at 2^31 (RFC 9111 section 1.2.2), or undefined. */
  maxAge: number | undefined;
}

const MAX_DELTA_SECONDS = 2_147_483_648;

/** The directives aimed at this surrogate, or undefined when the field says nothing to it. */
export function parseSurrogateControl(header: string | readonly string[] | undefined): SurrogateDirectives | undefined {
  if (header === undefined) return undefined;
  const text = typeof header === 'string' ? header : header.join(',');
  const general: SurrogateDirectives = { noStore: false, maxAge: undefined };
  const targeted: SurrogateDirectives = { noStore: false, maxAge: undefined };
  let anyGeneral = false;
  let anyTargeted = false;
  for (const part of text.split(',')) {
    const semi = part.indexOf(';');
    const directive = (semi === -1 ? part : part.slice(0, semi)).trim();
    const target = semi === -1 ? undefined : part.slice(semi + 1).trim();
    if (target !== undefined && target !== SURROGATE_TOKEN) continue;
    const into = target === undefined ? general : targeted;
    if (/^no-store$/i.test(directive)) into.noStore = true;
    else {
      const maxAge = /^max-age=(\d+)(?:\+\d+)?$/i.exec(directive);
      if (maxAge === null) continue;
      into.maxAge = Math.min(Number(maxAge[1]), MAX_DELTA_SECONDS);
    }
    if (target === undefined) anyGeneral = true;
    else anyTargeted = true;
  }
  if (anyTargeted) return targeted;
  return anyGeneral ? general : undefined;
}

/**
 * The response directives a surrogate acts on: `Surrogate-Control` `no-store` forbids storing
 * whatever `Cache-Control` says; its `max-age` replaces `Cache-Control`'s freshness and storage
 * directives (`max-age`, `s-maxage`, `no-store`, `no-cache`, `private`), which are then meant
 * for the caches after this one. Without such directives, `Cache-Control`'s own.
 */
export function withSurrogate(res: Readonly<Directives>, surrogate: SurrogateDirectives | undefined): Readonly<Directives> {
  if (surrogate === undefined) return res;
  if (surrogate.noStore) return { ...res, noStore: true };
  if (surrogate.maxAge === undefined) return res;
  const { maxAge: _maxAge, sMaxage: _sMaxage, noStore: _noStore, noCache: _noCache, private: _private, ...rest } = res;
  return { ...rest, maxAge: surrogate.maxAge };
}
