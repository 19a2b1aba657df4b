/**
 * Pure: the selecting header values of a Vary match compared by meaning rather than by bytes
 * (RFC 9111 section 4.1: a cache may normalise them "by combining multiple header fields with the
 * same field name", "normalizing both header field values in a way that is known to have identical
 * semantics"). Used under `rfc9111`:
 *
 * - any field: list members trimmed of whitespace, empty members dropped (RFC 9110 section 5.6.1);
 * - Accept-Language: tags case-insensitive (RFC 5646 section 2.1.1), members sorted by weight,
 *   then by tag (members of equal weight are equally preferred, RFC 9110 section 12.4.2).
 */

/** The normal form of a selecting header's value (`name` lower-case). */
export function normaliseSelecting(name: string, value: string): string {
  if (value.length === 0) return value;
  if (name === 'accept-language') return normaliseAcceptLanguage(value);
  const members: string[] = [];
  for (const member of value.split(',')) {
    const trimmed = member.trim();
    if (trimmed.length > 0) members.push(trimmed);
  }
  return members.join(',');
}

interface Weighted {
  tag: string;
  weight: number;
}

/** Accept-Language members with their weights; a weight that does not parse counts as 1. */
function weighted(value: string): Weighted[] {
  const out: Weighted[] = [];
  for (const member of value.split(',')) {
    const [rawTag = '', ...params] = member.split(';');
    const tag = rawTag.trim().toLowerCase();
    if (tag.length === 0) continue;
    let weight = 1;
    for (const param of params) {
      const match = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(param);
      if (match !== null) weight = Math.min(1, Number(match[1]));
    }
    out.push({ tag, weight });
  }
  return out;
}

function normaliseAcceptLanguage(value: string): string {
  return weighted(value)
    .sort((a, b) => b.weight - a.weight || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0))
    .map(({ tag, weight }) => (weight === 1 ? tag : `${tag};q=${weight}`))
    .join(',');
}

/**
 * Whether a stored response in `contentLanguage` is the one an `Accept-Language` selects: the
 * request prefers that one language alone above every other (RFC 9110 section 12.5.4), so the
 * origin's negotiation can only have chosen it.
 */
export function languageSelects(acceptLanguage: string, contentLanguage: string | undefined): boolean {
  if (contentLanguage === undefined) return false;
  const language = contentLanguage.trim().toLowerCase();
  if (language.length === 0 || language.includes(',') || language === '*') return false;
  const members = weighted(acceptLanguage).filter((m) => m.weight > 0);
  if (members.length === 0) return false;
  const top = Math.max(...members.map((m) => m.weight));
  const best = members.filter((m) => m.weight === top);
  return best.length === 1 && best[0]!.tag === language;
}
