/**
 * Request counters served at GET /__fake/stats. Only API and cyclist requests count, never the
 * control endpoints. Credentials are labelled `anonymous`, `invalid`, or the token's login
 * (never the token value); requests made with a GitHub App installation's tokens are also counted
 * by installation id (every installation of an App has the same bot login). Paths are counted
 * without their query string.
 */

export interface FakeStats {
  total: number;
  byPath: Record<string, number>;
  byStatus: Record<string, number>;
  byCredential: Record<string, number>;
  /** Requests made with an installation token, by installation id. */
  byInstallation: Record<string, number>;
  notModified: number;
  quotaSpent: number;
  /** Highest number of API/cyclist requests in flight at once since the last reset. */
  maxInFlight: number;
}

const MAX_PATHS = 5000;

export class Stats {
  private total = 0;
  private byPath = new Map<string, number>();
  private byStatus = new Map<string, number>();
  private byCredential = new Map<string, number>();
  private byInstallation = new Map<string, number>();
  private notModified = 0;
  private quotaSpent = 0;
  inFlight = 0;
  private maxInFlight = 0;

  begin(): void {
    this.inFlight++;
    if (this.inFlight > this.maxInFlight) this.maxInFlight = this.inFlight;
  }

  end(): void {
    if (this.inFlight > 0) this.inFlight--;
  }

  /** One answered request; `installation`: the id of the installation whose token made it. */
  record(path: string, status: number, credential: string, spent: boolean, installation?: number): void {
    this.total++;
    const pathKey = this.byPath.has(path) || this.byPath.size < MAX_PATHS ? path : '(other)';
    inc(this.byPath, pathKey);
    inc(this.byStatus, String(status));
    inc(this.byCredential, credential);
    if (installation !== undefined) inc(this.byInstallation, String(installation));
    if (status === 304) this.notModified++;
    if (spent) this.quotaSpent++;
  }

  reset(): void {
    this.total = 0;
    this.byPath = new Map();
    this.byStatus = new Map();
    this.byCredential = new Map();
    this.byInstallation = new Map();
    this.notModified = 0;
    this.quotaSpent = 0;
    this.maxInFlight = this.inFlight;
  }

  snapshot(): FakeStats {
    return {
      total: this.total,
      byPath: Object.fromEntries(this.byPath),
      byStatus: Object.fromEntries(this.byStatus),
      byCredential: Object.fromEntries(this.byCredential),
      byInstallation: Object.fromEntries(this.byInstallation),
      notModified: this.notModified,
      quotaSpent: this.quotaSpent,
      maxInFlight: this.maxInFlight,
    };
  }
}

function inc(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}
