/**
 * GitHub's custom media types (REST "Media types"): `application/vnd.github[.v3].PARAM[+json]` in
 * Accept asks for another representation of a resource. Only the ones the fake serves are
 * recognised: `raw` (the file's own bytes, on the README endpoint). GitHub answers such a request
 * with the media type it was asked for as Content-Type (`application/vnd.github.raw; charset=utf-8`,
 * `application/vnd.github.v3.raw+json; charset=utf-8`, ...) and names it in X-GitHub-Media-Type
 * (`github.v3; param=raw`, plus `; format=json` for the `+json` spelling), whatever the body is.
 * Pure: an Accept value in, a choice out.
 */

/** The X-GitHub-Media-Type of a plain JSON answer. */
export const JSON_MEDIA = 'github.v3; format=json';

/** A custom media type the request asked for. */
export interface MediaChoice {
  /** The representation (`raw`). */
  readonly param: 'raw';
  /** The answer's Content-Type: the media type as asked for, with the charset. */
  readonly contentType: string;
  /** The answer's X-GitHub-Media-Type. */
  readonly mediaHeader: string;
}

const CUSTOM = /^application\/vnd\.github(\.v3)?\.(raw)(\+json)?$/;

/** The first custom media type of `accept` the fake serves, or null (the default JSON representation). */
export function customMedia(accept: string): MediaChoice | null {
  if (!accept.includes('vnd.github')) return null;
  for (const range of accept.split(',')) {
    const semi = range.indexOf(';');
    const type = (semi < 0 ? range : range.slice(0, semi)).trim().toLowerCase();
    const match = CUSTOM.exec(type);
    if (match === null) continue;
    const json = match[3] !== undefined;
    return {
      param: 'raw',
      contentType: `${type}; charset=utf-8`,
      mediaHeader: `github.v3; param=raw${json ? '; format=json' : ''}`,
    };
  }
  return null;
}
