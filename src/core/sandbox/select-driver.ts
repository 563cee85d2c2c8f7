import { SANDBOX_DRIVER_NAMES, type SandboxAvailability, type SandboxDriverName } from './types';

/** `forge.sandbox.driver`: `auto` or one driver's name. */
export type SandboxDriverSetting = 'auto' | SandboxDriverName;

/**
 * The order `auto` tries. bubblewrap first: it needs no daemon and no image, starts in
 * milliseconds and is what makes "sandboxed by default" cheap; the container engines follow
 * (they need an image built first). msb is never picked automatically: it needs hardware
 * virtualisation.
 */
export const AUTO_DRIVER_ORDER: readonly SandboxDriverName[] = ['bwrap', 'docker', 'podman'];

export type DriverSelection =
  | { ok: true; driver: SandboxDriverName }
  | { ok: false; reason: string };

/**
 * Picks the sandbox driver from the setting and what the host offers. Pure: the probes
 * are the results of each driver's `checkAvailable()` (a driver not probed counts as
 * unavailable).
 */
export function selectDriver(
  setting: string,
  probes: Partial<Record<SandboxDriverName, SandboxAvailability>>,
): DriverSelection {
  if (setting === 'auto') {
    for (const d of AUTO_DRIVER_ORDER) if (probes[d]?.available) return { ok: true, driver: d };
    const why = AUTO_DRIVER_ORDER.map((d) => `${d}: ${probes[d]?.reason ?? 'not checked'}`).join('; ');
    return {
      ok: false,
      reason: `No sandbox driver is available (${why}). Install bubblewrap (Linux), Docker or Podman, or turn the sandbox off for this loop.`,
    };
  }
  if (!(SANDBOX_DRIVER_NAMES as readonly string[]).includes(setting)) {
    return {
      ok: false,
      reason: `Unknown sandbox driver "${setting}" in forge.sandbox.driver: use auto, ${SANDBOX_DRIVER_NAMES.join(', ')}.`,
    };
  }
  const driver = setting as SandboxDriverName;
  const probe = probes[driver];
  if (probe?.available) return { ok: true, driver };
  return {
    ok: false,
    reason: `The sandbox driver "${driver}" chosen in forge.sandbox.driver is not available: ${probe?.reason ?? 'it was not checked'}`,
  };
}
