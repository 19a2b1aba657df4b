/**
 * Pure: whether a Content-Type promises a JSON body, for the checks and rewrites that read bodies
 * (corrupt JSON in src/cache/rules/policy.ts, API addresses in src/http/representation/body-urls.ts).
 *
 * `application/json` and every `+json` type do (`application/vnd.github+json`,
 * `application/problem+json`), except GitHub's custom media types with a parameter
 * (`application/vnd.github.raw+json`, `application/vnd.github.v3.html+json`): GitHub answers such a
 * request with the media type it was asked for, whatever the body is. Under the raw media type the
 * body is the file's own bytes, which must be neither refused for not parsing nor rewritten.
 */

const JSON_TYPE = /^application\/(?:[a-z0-9!#$&^_.-]+\+)?json$/;
/** application/vnd.github[.vN].PARAM+json, where PARAM is not itself a version (`vnd.github.v3+json` is plain JSON). */
const GITHUB_PARAM_TYPE = /^application\/vnd\.github(?:\.v\d+)?\.(?!v\d+\+json$)[a-z0-9_-]+\+json$/;

export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semicolon = contentType.indexOf(';');
  const type = (semicolon < 0 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  return JSON_TYPE.test(type) && !GITHUB_PARAM_TYPE.test(type);
}
