/**
 * A repository's Dev Container configuration (`.devcontainer/devcontainer.json` or
 * `.devcontainer.json`), pure: what of it Forge uses for a docker/podman loop's sandbox image.
 *
 * Supported: `image` (used as it is) and `build.dockerfile` with `build.context`, `build.args`
 * and `build.target` (built from the loop's base commit, tagged by content). Refused, with a
 * message naming the key: `dockerComposeFile`, `features`, `${…}` variables in the keys Forge
 * reads, and paths that leave the repository. Everything else (customizations, postCreate
 * commands, mounts, …) is the editor's business and ignored.
 */
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { parseJsonc } from '../../opencode/project-config';

/** Where Forge looks, in this order (the Dev Containers specification's first two places). */
export const DEVCONTAINER_CONFIG_PATHS = ['.devcontainer/devcontainer.json', '.devcontainer.json'] as const;

/** The tag repository of images Forge builds from a Dev Container Dockerfile. */
export const DEVCONTAINER_IMAGE_REPOSITORY = 'forge-devcontainer';

export interface DevcontainerBuild {
  /** The Dockerfile, repository-relative (posix). */
  dockerfile: string;
  /** The build context folder, repository-relative (posix; `.` is the repository's root). */
  context: string;
  /** The Dockerfile, relative to the context (what `--file` names inside the context). */
  dockerfileInContext: string;
  args: Record<string, string>;
  target: string | null;
}

export type DevcontainerDecision =
  | { kind: 'image'; configPath: string; image: string }
  | { kind: 'build'; configPath: string; build: DevcontainerBuild }
  | { kind: 'refused'; configPath: string; message: string };

const SUPPORTED = 'Forge supports an `image`, or a `build.dockerfile` with `build.context`, `build.args` and `build.target`';

/**
 * What Forge does with the configuration text found at `configPath` (one of
 * DEVCONTAINER_CONFIG_PATHS). Never throws: a problem is a `refused` decision with its message.
 */
export function decideDevcontainer(configPath: string, text: string): DevcontainerDecision {
  const refuse = (message: string): DevcontainerDecision => ({ kind: 'refused', configPath, message: `${configPath}: ${message}` });
  let parsed: unknown;
  try {
    parsed = parseJsonc(text);
  } catch (error) {
    return refuse(`it is not valid JSON with comments (${(error as Error).message}).`);
  }
  if (!isObject(parsed)) return refuse('it must hold a JSON object.');
  if (parsed.dockerComposeFile !== undefined) {
    return refuse(`\`dockerComposeFile\` is not supported (a loop's sandbox is one container). ${SUPPORTED}.`);
  }
  if (parsed.features !== undefined && !(isObject(parsed.features) && Object.keys(parsed.features).length === 0)) {
    return refuse(`\`features\` are not supported (installing them needs a registry). Install the tools in the Dockerfile instead: ${SUPPORTED}.`);
  }
  const image = parsed.image;
  const build = parsed.build;
  const dockerFile = parsed.dockerFile; // the older spelling, outside `build`
  if (image !== undefined && (build !== undefined || dockerFile !== undefined)) return refuse('it names both `image` and `build`: keep one.');
  if (image !== undefined) {
    if (typeof image !== 'string' || image.trim() === '') return refuse('`image` must be a non-empty string.');
    if (hasVariable(image)) return refuse(variableMessage('image'));
    if (/\s/.test(image.trim()) || image.trim().startsWith('-')) return refuse('`image` must be one image reference.');
    return { kind: 'image', configPath, image: image.trim() };
  }
  if (build === undefined && dockerFile === undefined) return refuse(`it names neither \`image\` nor \`build.dockerfile\`. ${SUPPORTED}.`);
  if (build !== undefined && !isObject(build)) return refuse('`build` must be an object.');
  const b = (build ?? {}) as Record<string, unknown>;
  const file = b.dockerfile ?? b.dockerFile ?? dockerFile;
  if (typeof file !== 'string' || file.trim() === '') return refuse(`\`build.dockerfile\` must name the Dockerfile. ${SUPPORTED}.`);
  if (hasVariable(file)) return refuse(variableMessage('build.dockerfile'));
  const contextValue = b.context ?? parsed.context ?? '.';
  if (typeof contextValue !== 'string') return refuse('`build.context` must be a string.');
  if (hasVariable(contextValue)) return refuse(variableMessage('build.context'));
  const args: Record<string, string> = {};
  if (b.args !== undefined) {
    if (!isObject(b.args)) return refuse('`build.args` must be an object of strings.');
    for (const [k, v] of Object.entries(b.args)) {
      if (typeof v !== 'string') return refuse(`\`build.args.${k}\` must be a string.`);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) return refuse(`\`build.args\` names "${k}", which is not a build argument name.`);
      if (hasVariable(v)) return refuse(variableMessage(`build.args.${k}`));
      args[k] = v;
    }
  }
  let target: string | null = null;
  if (b.target !== undefined) {
    if (typeof b.target !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(b.target)) return refuse('`build.target` must be a build stage name.');
    target = b.target;
  }
  // Paths are relative to the folder holding the configuration file.
  const base = posix.dirname(configPath);
  const dockerfilePath = inRepository(base, file.trim());
  if (dockerfilePath === null || dockerfilePath === '.') return refuse(`\`build.dockerfile\` ("${file}") must name a file inside the repository.`);
  const context = inRepository(base, contextValue.trim() || '.');
  if (context === null) return refuse(`\`build.context\` ("${contextValue}") must be a folder inside the repository.`);
  const dockerfileInContext = context === '.' ? dockerfilePath : dockerfilePath.startsWith(`${context}/`) ? dockerfilePath.slice(context.length + 1) : null;
  if (dockerfileInContext === null) {
    return refuse(`\`build.dockerfile\` (${dockerfilePath}) must lie inside \`build.context\` (${context}): Forge builds from that folder of the base commit alone.`);
  }
  return { kind: 'build', configPath, build: { dockerfile: dockerfilePath, context, dockerfileInContext, args, target } };
}

/**
 * The tag of the image built for a configuration: `forge-devcontainer:<24 hex>`, a hash of
 * the configuration text, the Dockerfile's and the context's git object ids (content
 * addressed: the same content always gives the same tag, any change a new one).
 */
export function devcontainerImageTag(parts: { configText: string; dockerfileObject: string; contextTree: string }): string {
  const hash = createHash('sha256').update(parts.configText).update('\0').update(parts.dockerfileObject).update('\0').update(parts.contextTree).digest('hex');
  return `${DEVCONTAINER_IMAGE_REPOSITORY}:${hash.slice(0, 24)}`;
}

/** The notice of a bwrap loop in a repository with a Dev Container configuration. */
export function bwrapDevcontainerNotice(configPath: string): string {
  return `This repository has ${configPath}; the bwrap sandbox does not use it: the loop sees the host's toolchains. Set forge.sandbox.driver to docker or podman to run the loop in the Dev Container image.`;
}

/** The start notice of a docker/podman loop whose sandbox uses the repository's Dev Container image. */
export function devcontainerImageNotice(used: { kind: 'image' | 'built'; configPath: string; image: string; cached?: boolean }, driver: string, elapsedMs: number): string {
  const how = used.kind === 'image' ? 'as it names it' : used.cached ? 'built by an earlier loop, reused' : `built now from the base commit in ${(elapsedMs / 1000).toFixed(1)} s, reused by later loops`;
  return `The ${driver} sandbox uses the image ${used.image} of ${used.configPath} (${how}), not forge.sandbox.image.`;
}

/** `a/b` joined with a relative path, normalised; null when it leaves the repository or is absolute. */
function inRepository(base: string, relative: string): string | null {
  if (relative.startsWith('/') || relative.includes('\\') || relative.includes('\0')) return null;
  const joined = posix.normalize(posix.join(base, relative));
  if (joined === '..' || joined.startsWith('../')) return null;
  return joined.replace(/\/$/, '') || '.';
}

function hasVariable(value: string): boolean {
  return value.includes('${');
}

function variableMessage(key: string): string {
  return `\`${key}\` uses a \`\${…}\` variable, which Forge does not substitute: write the value out.`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
