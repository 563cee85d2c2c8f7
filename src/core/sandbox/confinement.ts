/**
 * How a loop is confined: the decision taken once at its start and the words every surface
 * (CLI, status bar, quick pick, dashboard, Loop Explorer) uses for it. Pure: the driver probe
 * arrives as data. Shared vocabulary of the loop runtime, the CLI and the VS Code surfaces, so
 * it lives beside the sandbox drivers rather than inside one of its users.
 *
 * Safe by default: a new loop is sandboxed whenever a driver works here. Without a working
 * driver it runs unconfined only when the user did not insist on a sandbox (`--sandbox`,
 * `forge.sandbox.required`), and every surface then says so plainly, with the reason.
 */

/** What the user asked for a new loop. */
export type ConfinementRequest =
  /** `--sandbox`, the quick pick's "Sandboxed", `forge.sandbox.required`: no sandbox, no loop. */
  | 'required'
  /** The default (`forge.sandbox.enabled`): sandboxed where a driver works, else unconfined and said so. */
  | 'preferred'
  /** `--no-sandbox`, the quick pick's "Unconfined", `forge.sandbox.enabled: false`. */
  | 'off';

export type UnconfinedReason = 'turned-off' | 'no-driver';

/** Stored with the loop (its state) and shown by every surface. */
export type Confinement =
  | { sandboxed: true; driver: string }
  | { sandboxed: false; reason: UnconfinedReason; detail: string };

export type ConfinementDecision = { ok: true; confinement: Confinement } | { ok: false; message: string };

/** The request from a start's explicit choice (undefined: none) and the settings. */
export function confinementRequest(explicit: boolean | undefined, settings: { enabled: boolean; required: boolean }): ConfinementRequest {
  if (explicit === true) return 'required';
  if (explicit === false) return 'off';
  if (!settings.enabled) return 'off';
  return settings.required ? 'required' : 'preferred';
}

/**
 * Decides a new loop's confinement from the request, the driver setting and the driver it
 * resolves to. Only `auto` finding nothing working leads to an unconfined loop: a driver the
 * user named (`forge.sandbox.driver: docker`) that does not work here refuses the start, since
 * they configured that sandbox and would not expect to lose it to a stopped daemon.
 */
export function decideConfinement(
  request: ConfinementRequest,
  driver: { driver: string | null; reason: string | null },
  driverSetting = 'auto',
): ConfinementDecision {
  if (request === 'off') {
    return { ok: true, confinement: { sandboxed: false, reason: 'turned-off', detail: 'the sandbox is turned off for this loop' } };
  }
  if (driver.driver) return { ok: true, confinement: { sandboxed: true, driver: driver.driver } };
  const why = driver.reason ?? 'no sandbox driver is available';
  if (request === 'required' || driverSetting !== 'auto') {
    return {
      ok: false,
      message:
        request === 'required'
          ? `A sandbox was required for this loop, but none can run here: ${why} The loop was not started. Install bubblewrap (Linux), Docker or Podman, or start the loop without a sandbox.`
          : `${why} The loop was not started: forge.sandbox.driver names this driver. Make it work, set forge.sandbox.driver to auto, or start the loop without a sandbox.`,
    };
  }
  return { ok: true, confinement: { sandboxed: false, reason: 'no-driver', detail: why } };
}

/** One line for a loop's start, `forge status` and the dashboard. */
export function describeConfinement(c: Confinement): string {
  if (c.sandboxed) return `sandboxed (${c.driver}): agent commands run confined to the worktree`;
  return `UNCONFINED (${c.reason === 'turned-off' ? 'sandbox turned off' : 'no sandbox driver works here'}): agent commands run on this machine as you`;
}

/** The start notice of an unconfined loop: what it means and how to change it. */
export function unconfinedNotice(c: Extract<Confinement, { sandboxed: false }>): string {
  const cause =
    c.reason === 'turned-off'
      ? 'the sandbox is turned off (forge.sandbox.enabled, --no-sandbox or the quick pick)'
      : `no sandbox driver works here (${c.detail.replace(/\.$/, '')})`;
  return (
    `This loop runs UNCONFINED because ${cause}. Its agents' shell commands run on this machine as you: ` +
    'they can write outside the worktree and reach the network. Forge keeps its and opencode\'s secrets out of their environment and ' +
    'refuses `git push` through git, but only a sandbox stops a determined agent. ' +
    (c.reason === 'turned-off' ? 'Turn the sandbox on (forge.sandbox.enabled) for unattended runs.' : 'Install bubblewrap (apt install bubblewrap), Docker or Podman for unattended runs.')
  );
}

/** Where a loop keeps its confinement, in its stored state. */
export const LOOP_CONFINEMENT_STATE_KEY = 'confinement';

/** A loop's stored confinement; loops from before it was stored are read from their sandbox flag. */
export function confinementOf(loop: { sandbox: boolean; state: Record<string, unknown> }): Confinement {
  const stored = loop.state[LOOP_CONFINEMENT_STATE_KEY] as Confinement | undefined;
  if (stored && typeof stored === 'object' && typeof stored.sandboxed === 'boolean') return stored;
  const config = loop.state.sandboxConfig as { driver?: string } | undefined;
  if (loop.sandbox) return { sandboxed: true, driver: config?.driver ?? 'sandbox' };
  return { sandboxed: false, reason: 'turned-off', detail: 'started without a sandbox' };
}
