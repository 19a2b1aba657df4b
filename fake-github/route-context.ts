/**
 * What a route of the code-hosting API (routes.ts, search.ts, app-routes.ts) is given, and what it
 * answers for the server (server.ts) to send.
 */
import type { Viewer } from './auth.js';
import type { World } from './data.js';
import type { Rendered } from './etag.js';
import type { ApiVersion } from './render.js';
import type { FakeState } from './state.js';

export interface RouteContext {
  state: FakeState;
  world: World;
  viewer: Viewer | null;
  base: string;
  version: ApiVersion;
  path: string;
  query: string;
  /** The request's Accept (custom media types choose a representation). */
  accept: string;
}

export interface ApiResult {
  status: number;
  body: Buffer;
  contentType: string;
  /** Set on cacheable 200 answers: the server derives ETag/Last-Modified and 304s from it. */
  rendered: Rendered | null;
  acceptedScopes: string;
  /** Cache-Control of an answer that has no validators (search: no-cache). */
  cacheControl?: string;
  /** Link of an answer that has no validators (search pages). */
  link?: string | null;
  /** Location of a redirect (a renamed repository's old name). */
  location?: string;
  /** X-GitHub-Media-Type, when not the plain JSON one. */
  mediaType?: string;
}
