/**
 * Representation-framing headers: a 304 does not overwrite them in the stored response (RFC 9111
 * section 3.2), and the proxy leaves them out of the 304s it sends (RFC 9110 section 15.4.5).
 */
export const REPRESENTATION_FRAMING = new Set(['content-length', 'content-encoding', 'transfer-encoding', 'content-range', 'content-type']);
