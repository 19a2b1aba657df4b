/**
 * What a GitHub App and an installation of it are once the fake holds them (apps.ts keeps them;
 * a credential names its App: auth.ts).
 */
import type { KeyObject } from 'node:crypto';
import type { Repo } from './data.js';

export interface FakeApp {
  id: number;
  slug: string;
  name: string;
  /** GitHub's client id shape (`Iv23li` and 14 hex digits), derived from the id. */
  clientId: string;
  /** Login of the owning account, as the data set spells it. */
  owner: string;
  publicKey: KeyObject;
  createdAt: number;
}

export interface FakeInstallation {
  id: number;
  appId: number;
  /** Login of the account, as the data set spells it. */
  account: string;
  selection: 'all' | 'selected';
  /** The selected repositories' ids (empty with `all`). */
  repositoryIds: Set<number>;
  /** core and graphql per window for its tokens; null: the fake's tokenLimit. */
  rateLimit: number | null;
  suspendedAt: number | null;
  deleted: boolean;
  createdAt: number;
  /** Whether the installation reaches a repository (private ones included). */
  covers(repo: Repo): boolean;
}
