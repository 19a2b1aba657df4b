/**
 * Where one upstream's addresses point for a client: Link, Location and (with rewrite_body_urls)
 * the API addresses in JSON bodies are rewritten from the upstream's base to the proxy's public
 * base for this request (link.ts). One instance per upstream, built with its runtime.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { publicBase, withRoutePrefix } from './link.js';

export interface LinkSettings {
  publicUrl: string | null;
  trustForwarded: boolean;
  /** The listener serves HTTPS (listen.tls): a base built from Host is https://. */
  https?: boolean;
}

export class PublicAddresses {
  /**
   * The last proxy base and what it was built from (`public_url`, else the Host value): clients
   * mostly send one Host, so a request compares one string instead of validating it and building a
   * URL. Not used with trust_forwarded (the base then depends on more than one header).
   */
  private from: string | undefined = undefined;
  private base: string | undefined = undefined;

  /**
   * `upstreamBase`: the upstream's URL (origin + base path, no trailing slash) as it appears in
   * Link headers and bodies; `bodies`: JSON bodies have their API addresses rewritten too.
   */
  constructor(
    readonly links: LinkSettings,
    readonly upstreamBase: string,
    private readonly route: { readonly stripPrefix: boolean; readonly prefix: string },
    readonly bodies: boolean,
  ) {}

  /** The proxy base URL that Link, Location and body addresses should point at for this request, or undefined (no rewrite). */
  proxyBase(headers: IncomingHttpHeaders): string | undefined {
    const { publicUrl, trustForwarded } = this.links;
    const from = publicUrl ?? (trustForwarded ? undefined : (headers.host ?? ''));
    if (from !== undefined && from === this.from) return this.base;
    const found = publicBase(
      publicUrl,
      trustForwarded,
      (name) => {
        const value = headers[name];
        return Array.isArray(value) ? value[0] : value;
      },
      this.links.https === true ? 'https' : 'http',
    );
    const base = found === undefined ? undefined : withRoutePrefix(found, this.route.stripPrefix, this.route.prefix);
    if (from !== undefined) {
      this.from = from;
      this.base = base;
    }
    return base;
  }
}
