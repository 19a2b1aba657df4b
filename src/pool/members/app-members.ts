/**
 * The GitHub Apps of `pool.apps` as pool members: one AppTokenSource per App (src/pool/members/app-source.ts)
 * whose installation tokens, named `<app>-<installation id>`, become that App's members of the
 * pool through MemberSources (member-sources.ts), so that a tokens-file reload and an App's
 * change never drop each other's members.
 *
 * - The Apps' calls (GET /app/installations, POST /app/installations/{id}/access_tokens) go to the
 *   `token_pool` upstream's URL, its base path included (GitHub Enterprise Server's /api/v3), on
 *   a small connection pool of their own.
 * - `remint` answers a 401 on an App member: a new token, once per token value (the source decides).
 * - Every listing and mint is counted (etagere_app_installation_lists_total,
 *   etagere_app_token_mints_total), and each App's installations holding a token are a gauge
 *   (etagere_app_installations). Logs and metrics name the App and the installation, never the
 *   key, a JWT or a token.
 */
import { Pool } from 'undici';
import { AppTokenSource, type AppMember } from './app-source.js';
import { appPrivateKey } from '../../platform/config/app-jwt.js';
import type { AppConfig, UpstreamConfig } from '../../platform/config/schema.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { MemberSources } from './member-sources.js';
import type { MembershipChange } from '../rules/types.js';

/** The sources' clocks, shorter in tests (never a user-facing setting): see AppSourceOptions. */
export interface AppTiming {
  readonly refreshBeforeMs?: number;
  readonly relistIntervalMs?: number;
  readonly retryMs?: number;
}

export interface AppMembersDeps {
  readonly apps: readonly AppConfig[];
  /** The upstream with token_pool: the Apps' calls go to its URL. */
  readonly upstream: UpstreamConfig;
  readonly sources: MemberSources;
  /** A change of the pool an App made (the runtime probes added members, forgets updated and removed ones). */
  changed(change: MembershipChange): void;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'appMints' | 'appLists' | 'appInstallations'>;
  readonly timing?: AppTiming | undefined;
}

export interface AppMembers {
  /** Lists (or takes) every App's installations and mints their tokens; failures are logged, never thrown. */
  start(): Promise<void>;
  /** Whether member `name` is an App's, sending `authorization` now. */
  owns(name: string, authorization: string): boolean;
  /** A 401 on App member `name`, sent with `authorization`: whether a newer token is in place now. */
  remint(name: string, authorization: string): Promise<boolean>;
  /** Lists every App's installations again now (SIGHUP). */
  sync(): Promise<void>;
  close(): void;
}

const authorizationOf = (value: string): string => `token ${value}`;

export function createAppMembers(deps: AppMembersDeps): AppMembers {
  const { metrics, timing } = deps;
  const url = new URL(deps.upstream.url);
  const dispatcher = new Pool(url.origin, {
    connections: 2,
    connectTimeout: deps.upstream.timeouts.connect_ms,
    headersTimeout: deps.upstream.timeouts.headers_ms,
    bodyTimeout: deps.upstream.timeouts.body_ms,
  });
  const log = deps.log.child({ component: 'github-app' });
  /** Each App member's source and the credential it sends. */
  const members = new Map<string, { source: AppTokenSource; authorization: string }>();

  const changedTo = (app: AppConfig, source: AppTokenSource, list: readonly AppMember[]): void => {
    for (const [name, member] of members) if (member.source === source) members.delete(name);
    for (const member of list) members.set(member.name, { source, authorization: authorizationOf(member.value) });
    metrics.appInstallations.set({ app: app.name }, list.length);
    deps.changed(
      deps.sources.setApp(
        app.name,
        list.map(({ name, value }) => ({ name, value })),
      ),
    );
  };

  const sources = deps.apps.map((app) => {
    const source: AppTokenSource = new AppTokenSource({
      // The schema made sure the key is there and is an RSA private key in PEM form.
      app: { name: app.name, appId: app.app_id, privateKey: appPrivateKey(app.private_key ?? ''), installations: app.installations },
      upstream: { baseUrl: deps.upstream.url, dispatcher },
      onChange: (list) => changedTo(app, source, list),
      events: {
        listed: (result) => metrics.appLists.inc({ app: app.name, result }),
        minted: (_installation, result) => metrics.appMints.inc({ app: app.name, result }),
      },
      logger: log,
      ...(timing?.refreshBeforeMs === undefined ? {} : { refreshBeforeMs: timing.refreshBeforeMs }),
      ...(timing?.relistIntervalMs === undefined ? {} : { relistIntervalMs: timing.relistIntervalMs }),
      ...(timing?.retryMs === undefined ? {} : { retryMs: timing.retryMs }),
    });
    metrics.appInstallations.set({ app: app.name }, 0);
    return source;
  });

  return {
    async start() {
      await Promise.all(sources.map((source) => source.start()));
    },
    owns: (name, authorization) => members.get(name)?.authorization === authorization,
    async remint(name, authorization) {
      const member = members.get(name);
      if (member === undefined || member.authorization !== authorization) return false;
      return member.source.remint(name, authorization.slice('token '.length));
    },
    async sync() {
      await Promise.all(sources.map((source) => source.sync()));
    },
    close() {
      for (const source of sources) source.close();
      void dispatcher.close().catch(() => undefined);
    },
  };
}
