/** Reading header values that Node or undici may hand over as a list. Pure. */

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** One header value: a list is joined with ", " (RFC 9110 section 5.3). */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A reader of one header by lower-case name, over a header record. */
export function headerReader(headers: Headers): (name: string) => string | undefined {
  return (name) => headerValue(headers[name]);
}
