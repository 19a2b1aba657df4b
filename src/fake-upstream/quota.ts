/**
 * Primary rate limit: one fixed window per credential (anonymous callers per client address,
 * each token on its own). A window starts at its first use and lasts `windowSeconds`;
 * `x-ratelimit-reset` is the end of the window in epoch seconds. Spending never goes past the
 * limit, so limit = remaining + used always holds.
 */

export interface QuotaSettings {
  anonymousLimit: number;
  tokenLimit: number;
  windowSeconds: number;
}

export interface QuotaWindow {
  limit: number;
  used: number;
  endMs: number;
  /** Epoch seconds of the window end. */
  reset: number;
}

export interface QuotaSnapshot {
  limit: number;
  remaining: number;
  used: number;
  reset: number;
  resource: 'core';
}

export class Quotas {
  private readonly windows = new Map<string, QuotaWindow>();

  constructor(private settings: QuotaSettings) {}

  /** Changes the limits; every window starts afresh (documented). */
  configure(settings: QuotaSettings): void {
    this.settings = settings;
    this.windows.clear();
  }

  reset(): void {
    this.windows.clear();
  }

  /** The live window of a key (creating it at first use, or when the old one has ended). */
  window(key: string, anonymous: boolean, now = Date.now()): QuotaWindow {
    let window = this.windows.get(key);
    if (window === undefined || now >= window.endMs) {
      const endMs = now + this.settings.windowSeconds * 1000;
      window = {
        limit: anonymous ? this.settings.anonymousLimit : this.settings.tokenLimit,
        used: 0,
        endMs,
        reset: Math.ceil(endMs / 1000),
      };
      this.windows.set(key, window);
    }
    return window;
  }

  /** The state without starting a window (for GET /rate_limit). */
  peek(key: string, anonymous: boolean, now = Date.now()): QuotaSnapshot {
    const window = this.windows.get(key);
    if (window === undefined || now >= window.endMs) {
      const limit = anonymous ? this.settings.anonymousLimit : this.settings.tokenLimit;
      return { limit, remaining: limit, used: 0, reset: Math.ceil((now + this.settings.windowSeconds * 1000) / 1000), resource: 'core' };
    }
    return snapshot(window);
  }
}

export function remaining(window: QuotaWindow): number {
  return window.limit - window.used;
}

/** Spends one unit if any is left; returns whether it did. */
export function spend(window: QuotaWindow): boolean {
  if (window.used >= window.limit) return false;
  window.used++;
  return true;
}

export function snapshot(window: QuotaWindow): QuotaSnapshot {
  return { limit: window.limit, remaining: window.limit - window.used, used: window.used, reset: window.reset, resource: 'core' };
}

export const anonymousKey = (address: string): string => `ip:${address}`;
export const tokenKey = (token: string): string => `token:${token}`;
