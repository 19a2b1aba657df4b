/** Reading header values that Node or undici may hand over as a list. Pure. */

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** One header value: a list is joined with ", " (RFC 9110 section 5.3). */
export function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

/** A reader of one header by lower-case name, over a header record. */
export function headerReader(h: Headers): (name: string) => string | undefined {
  return (name) => headerValue(h[name]);
}
