/**
 * A command a check (or a setup step) runs that the environment does not have, pure: a shell
 * exiting 127 with "not found" says which command is missing; the message names it and the
 * place lacking it (the sandbox image, or the host), so `npm: not found` reads as an
 * environment problem, not as the work failing.
 */

/** Where a loop's commands run, for the message: the sandbox image, or the host's toolchains. */
export type ToolchainPlace =
  | { kind: 'image'; image: string; driver: string }
  | { kind: 'host'; sandboxed: boolean };

/**
 * The place of a loop's toolchain from its confinement and stored sandbox configuration
 * (`{ driver, image }`): docker/podman use their image; bwrap and unconfined loops the host's.
 */
export function toolchainPlaceOf(sandboxed: boolean, config: unknown): ToolchainPlace {
  if (sandboxed && typeof config === 'object' && config !== null) {
    const { driver, image } = config as { driver?: unknown; image?: unknown };
    if ((driver === 'docker' || driver === 'podman') && typeof image === 'string' && image) return { kind: 'image', image, driver };
  }
  return { kind: 'host', sandboxed };
}

/**
 * The command a 127 exit's output names as not found (`sh: 1: uvu: not found`,
 * `bash: line 1: npm: command not found`, `/bin/sh: projtool: not found`,
 * `env: 'node': No such file or directory`); null when the output says nothing of the kind.
 */
export function missingCommandName(exitCode: number | null, output: string): string | null {
  if (exitCode !== 127) return null;
  const lines = output.split('\n').map((l) => l.trim()).filter(Boolean).reverse();
  for (const line of lines) {
    const shell = /^(?:[\w./-]*sh|[\w./-]+)(?::\s*line\s+\d+|:\s*\d+)?:\s*([^\s:'"]+):\s*(?:command )?not found$/.exec(line);
    if (shell) return shell[1]!;
    const env = /^(?:\/usr\/bin\/)?env:\s*['‘]?([^\s'’]+)['’]?:\s*No such file or directory$/.exec(line);
    if (env) return env[1]!;
  }
  return null;
}

/** The clear message for a missing command, or null when the result is not one. */
export function missingCommandMessage(exitCode: number | null, output: string, place: ToolchainPlace): string | null {
  const command = missingCommandName(exitCode, output);
  if (!command) return null;
  const name = command.length > 80 ? `${command.slice(0, 80)}…` : command;
  if (place.kind === 'image') {
    return (
      `\`${name}\` is not in the sandbox image ${place.image} (${place.driver}): this is the environment, not the work. ` +
      `Add it to the image (the repository's .devcontainer Dockerfile, or the image forge.sandbox.image names), or change the check.`
    );
  }
  return place.sandboxed
    ? `\`${name}\` is not installed on the host, whose toolchains the bwrap sandbox uses: this is the environment, not the work. Install it, or change the check.`
    : `\`${name}\` is not installed on the host: this is the environment, not the work. Install it, or change the check.`;
}
