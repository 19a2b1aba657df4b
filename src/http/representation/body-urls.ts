/**
 * Pure rewriting of API addresses inside JSON bodies. GitHub's records carry the API's own URLs
 * (`url`, `repos_url`, `owner.url`, ...), and clients such as PyGithub navigate by them: a string
 * value that starts with the upstream's API base is pointed at the proxy's public base instead, so
 * that the client stays on the proxy. Nothing else changes: other hosts, web addresses
 * (`html_url` on github.com), object keys, and text that merely quotes a URL inside a string.
 *
 * It works on the bytes, without parsing: in JSON text a `"` that is not escaped and is followed by
 * `h` can only open a string (a closing quote is followed by `,` `:` `}` `]` or space), and a string
 * followed by `:` is a key. The result is valid JSON whenever the input is.
 */

const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const COLON = 0x3a;

/** Bytes that may follow the base in a URL under it (never a look-alike host such as api.github.com.evil): / ? # " { */
const AFTER_BASE = new Uint8Array(256);
for (const char of '/?#"{') AFTER_BASE[char.charCodeAt(0)] = 1;
/** JSON's whitespace. */
const JSON_SPACE = new Uint8Array(256);
for (const byte of [0x20, 0x09, 0x0a, 0x0d]) JSON_SPACE[byte] = 1;

/** The needle searched for: an opening quote and the base. */
function needleOf(upstreamBase: string): Buffer {
  return Buffer.from(`"${upstreamBase}`);
}

/** Whether the quote at `at` is escaped (an odd number of backslashes before it). */
function escaped(body: Buffer, at: number): boolean {
  let count = 0;
  for (let index = at - 1; index >= 0 && body[index] === BACKSLASH; index--) count++;
  return count % 2 === 1;
}

/** Whether the string opening at `at` is an object key (its closing quote is followed by a colon). */
function isKey(body: Buffer, at: number): boolean {
  let close = body.indexOf(QUOTE, at + 1);
  while (close !== -1 && escaped(body, close)) close = body.indexOf(QUOTE, close + 1);
  if (close === -1) return false;
  let index = close + 1;
  while (index < body.length && JSON_SPACE[body[index]!] === 1) index++;
  return body[index] === COLON;
}

/** Whether the match of the needle at `at` opens a string value under the base. */
function opensValue(body: Buffer, at: number, needleLength: number): boolean {
  const next = body[at + needleLength];
  return next !== undefined && AFTER_BASE[next] === 1 && !escaped(body, at) && !isKey(body, at);
}

/** Offsets of the string values in `body` that start with the base (each the offset of its opening quote). */
function valuesUnder(body: Buffer, needle: Buffer): number[] {
  const found: number[] = [];
  for (let at = body.indexOf(needle); at !== -1; at = body.indexOf(needle, at + needle.length)) {
    if (opensValue(body, at, needle.length)) found.push(at);
  }
  return found;
}

/** Whether a body holds any string value to rewrite (decides once per entry whether rewriting applies). */
export function hasUrlsUnder(body: Buffer, upstreamBase: string): boolean {
  const needle = needleOf(upstreamBase);
  for (let at = body.indexOf(needle); at !== -1; at = body.indexOf(needle, at + needle.length)) {
    if (opensValue(body, at, needle.length)) return true;
  }
  return false;
}

/**
 * The body with every string value under `upstreamBase` moved to `proxyBase`, or undefined when
 * there is none. `proxyBase` is written JSON-escaped, so no base can break out of its string. The
 * result has an allocation of its own (it is memoized: src/platform/owned-bytes.ts says why).
 */
export function rewriteBodyUrls(body: Buffer, upstreamBase: string, proxyBase: string): Buffer | undefined {
  if (upstreamBase === proxyBase) return undefined;
  const needle = needleOf(upstreamBase);
  const offsets = valuesUnder(body, needle);
  if (offsets.length === 0) return undefined;
  const replacement = Buffer.from(`"${JSON.stringify(proxyBase).slice(1, -1)}`);
  const out = Buffer.allocUnsafeSlow(body.length + offsets.length * (replacement.length - needle.length));
  let from = 0;
  let to = 0;
  for (const at of offsets) {
    to += body.copy(out, to, from, at);
    to += replacement.copy(out, to);
    from = at + needle.length;
  }
  body.copy(out, to, from);
  return out;
}

/** A strong ETag made weak: a body the proxy changed is no longer byte-identical to the upstream's. */
export function weakened(etag: string): string {
  const tag = etag.trim();
  return tag.startsWith('W/') ? tag : `W/${tag}`;
}
