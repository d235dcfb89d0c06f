import type { HostingCore } from './core.js';
import { MAKE_HOSTING_KEY, type HostingHere, type HostingStatus } from './model.js';

/** What a process that was told nothing of its Python says (the serving command looks). */
const NOT_LOOKED: HostingHere = {
  kind: 'off',
  reason: 'AGENTRY_HOSTING_PYTHON is not set',
  enable: 'AGENTRY_HOSTING_PYTHON=<a Python with uagents installed>',
};

/**
 * Whether hosted agents can run on this deployment (docs/hosting.md, "Running agents"), said
 * in one place for the start-up block, the console and the reason of an agent waiting to run:
 * a runner must be alive (this process, or `agentry runner` processes), and the deployment
 * must have a key to seal the agents' seeds.
 */
export class HostingReadiness {
  private here: HostingHere = NOT_LOOKED;

  constructor(private readonly core: HostingCore) {}

  /** Records what this serving process found at its start. */
  set(here: HostingHere): void {
    this.here = here;
  }

  /** What this process found, and whether the deployment has a key. */
  local(): Omit<HostingStatus, 'runners'> {
    const python = this.here.kind === 'here' ? this.here.python : undefined;
    if (!this.core.key.available) {
      return {
        ready: false,
        python,
        reason: 'this database has no hosting key to seal the agents’ keys with',
        enable: MAKE_HOSTING_KEY,
      };
    }
    switch (this.here.kind) {
      case 'here':
        return { ready: true, python, reason: undefined, enable: undefined };
      case 'separate':
        return {
          ready: false,
          python,
          reason:
            'no "agentry runner" process is running (hosted agents run in those: AGENTRY_HOSTING_RUNNER=separate)',
          enable: 'agentry runner',
        };
      case 'off':
        return { ready: false, python, reason: this.here.reason, enable: this.here.enable };
    }
  }

  /** Whether hosted agents can run now: as {@link local} says, or a runner elsewhere is alive. */
  async status(): Promise<HostingStatus> {
    const runners = await this.core.liveRunnerCount();
    const local = this.local();
    if (runners > 0 && this.core.key.available) {
      return { ...local, runners, ready: true, reason: undefined, enable: undefined };
    }
    return { ...local, runners };
  }
}
