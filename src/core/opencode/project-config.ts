/**
 * What of a project's own opencode configuration a Forge-run opencode instance uses.
 *
 * opencode merges the configuration of the directory it serves (`opencode.json[c]`, the
 * `.opencode/` folder's config, plugins, custom tools, agents and commands, AGENTS.md) and runs
 * much of it on the host, in its server process or as its children: plugins and custom tools
 * are imported, MCP servers, formatters, language servers and command templates' shell snippets
 * are started. For a loop that directory is the worktree, which the agent writes. So Forge starts
 * every opencode it runs for loops, the architect and the splitter with project configuration
 * off (`OPENCODE_DISABLE_PROJECT_CONFIG`, opencode 1.18: the directory's config files, its
 * `.opencode/` folders and its AGENTS.md are skipped; the user's global configuration, Forge's
 * inline layer and the plugins it names still load) and with formatters and language servers
 * off (they would start programs from the worktree's `node_modules` on the host).
 *
 * The user's own project configuration — the files in the checkout the loop started from, which
 * no agent writes — still counts for what runs nothing: Forge reads it on the host, as data, and
 * passes its model and provider settings inline (`projectLayerFor`), and names the checkout's
 * AGENTS.md as an instruction. Everything else of it is not used for loops, and the start notice
 * says which parts and how to have plugins and MCP servers anyway (the global configuration).
 */
import { lstat, readdir, readFile, rename } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';

/** Set in every Forge-run opencode server's environment: no configuration from the directory it serves. */
export const NO_PROJECT_CONFIG_ENVIRONMENT: Readonly<Record<string, string>> = Object.freeze({ OPENCODE_DISABLE_PROJECT_CONFIG: '1' });

/** The project files opencode would merge, in its order (later wins). */
export const PROJECT_CONFIG_FILE_NAMES = ['opencode.json', 'opencode.jsonc', '.opencode/opencode.json', '.opencode/opencode.jsonc'] as const;
/** Folders of `.opencode/` whose files opencode loads as code or prompts. */
const PROJECT_CODE_FOLDERS = ['plugin', 'plugins', 'tool', 'tools', 'agent', 'agents', 'command', 'commands', 'mode', 'modes'];
/** The instruction files opencode looks for in a project (the first found counts). */
const INSTRUCTION_FILES = ['AGENTS.md', 'CLAUDE.md', 'CONTEXT.md'];
const MAX_FILE_BYTES = 1024 * 1024;

/** Keys of a project configuration passed to loops: they choose and reach models, and run nothing. */
export const PROJECT_KEYS_FOR_LOOPS = ['model', 'small_model', 'provider', 'enabled_providers', 'disabled_providers'] as const;
/** Keys that would run programs on the host (named in the start notice when a project sets them). */
const RUNNING_KEYS = ['plugin', 'mcp', 'formatter', 'lsp', 'command', 'experimental', 'shell'];

export interface ProjectConfigFile {
  /** One of PROJECT_CONFIG_FILE_NAMES. */
  name: string;
  text: string;
}

export interface ProjectConfigSnapshot {
  /** The checkout it was read from (absolute). */
  dir: string;
  files: ProjectConfigFile[];
  /** `.opencode/<folder>` folders that exist (plugins, tools, agents, commands). */
  codeFolders: string[];
  /** The checkout's instruction file (absolute path), when it has one. */
  instructionFile: string | null;
}

export interface ProjectLayer {
  /** Merge under Forge's inline layer. */
  config: Record<string, unknown>;
  /** Parts of the project configuration loops do not use, for the start notice (e.g. `plugin in opencode.json`, `.opencode/plugin/`). */
  notUsed: string[];
  /** Files that could not be read as JSON(C) (name: reason). */
  problems: string[];
}

/**
 * Reads the project configuration of the user's checkout `dir` as data: regular files only (a
 * link is not followed), at most 1 MB each; absent or unreadable files are skipped.
 */
export async function readProjectConfig(dir: string): Promise<ProjectConfigSnapshot> {
  const files: ProjectConfigFile[] = [];
  for (const name of PROJECT_CONFIG_FILE_NAMES) {
    const text = await readRegularFile(join(dir, name));
    if (text !== null) files.push({ name, text });
  }
  const codeFolders: string[] = [];
  for (const folder of PROJECT_CODE_FOLDERS) {
    const info = await lstat(join(dir, '.opencode', folder)).catch(() => null);
    if (info?.isDirectory()) codeFolders.push(`.opencode/${folder}/`);
  }
  let instructionFile: string | null = null;
  for (const name of INSTRUCTION_FILES) {
    const info = await lstat(join(dir, name)).catch(() => null);
    if (info?.isFile()) {
      instructionFile = join(dir, name);
      break;
    }
  }
  return { dir, files, codeFolders, instructionFile };
}

async function readRegularFile(path: string): Promise<string | null> {
  try {
    const info = await lstat(path);
    if (!info.isFile() || info.size > MAX_FILE_BYTES) return null;
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
}

/** The inline layer loops get from a project configuration snapshot (pure). */
export function projectLayerFor(snapshot: ProjectConfigSnapshot): ProjectLayer {
  const config: Record<string, unknown> = {};
  const notUsed: string[] = [];
  const problems: string[] = [];
  for (const file of snapshot.files) {
    let parsed: unknown;
    try {
      parsed = parseJsonc(file.text);
    } catch (error) {
      problems.push(`${file.name}: ${(error as Error).message}`);
      continue;
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      problems.push(`${file.name}: not a JSON object`);
      continue;
    }
    for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
      if ((PROJECT_KEYS_FOR_LOOPS as readonly string[]).includes(key)) {
        const kept = key === 'provider' ? providersForLoops(value, file.name, notUsed) : value;
        config[key] = mergeValue(config[key], anchorFileReferences(kept, snapshot.dir));
      } else if (RUNNING_KEYS.includes(key)) {
        notUsed.push(`${key} in ${file.name}`);
      }
    }
  }
  for (const folder of snapshot.codeFolders) notUsed.push(folder);
  if (snapshot.instructionFile) config.instructions = [snapshot.instructionFile];
  return { config, notUsed, problems };
}

/**
 * Provider entries as written, except an `npm` that is not a plain package name of the registry
 * (a path or URL could name code in the worktree): that provider's package is dropped.
 */
function providersForLoops(value: unknown, fileName: string, notUsed: string[]): unknown {
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [id, entry] of Object.entries(value)) {
    if (isPlainObject(entry) && typeof entry.npm === 'string' && !isRegistryPackageName(entry.npm)) {
      const { npm: _npm, ...rest } = entry;
      void _npm;
      out[id] = rest;
      notUsed.push(`provider.${id}.npm in ${fileName}`);
    } else {
      out[id] = entry;
    }
  }
  return out;
}

/** `name`, `@scope/name`, optionally `@version` (no path, URL, git or file specifier). */
export function isRegistryPackageName(spec: string): boolean {
  return /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9._^~<>=*|+ -]+)?$/.test(spec);
}

/**
 * opencode substitutes `{file:PATH}` in configuration text, a relative PATH against the folder of
 * the file it came from. Passed inline, that folder would be the worktree the agent writes: a
 * relative PATH is made absolute in the user's checkout instead.
 */
function anchorFileReferences(value: unknown, dir: string): unknown {
  if (typeof value === 'string') {
    return value.replace(/\{file:([^}]+)\}/g, (whole, path: string) => (isAbsolute(path) || path.startsWith('~/') ? whole : `{file:${join(dir, path)}}`));
  }
  if (Array.isArray(value)) return value.map((v) => anchorFileReferences(v, dir));
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, anchorFileReferences(v, dir)]));
  return value;
}

function mergeValue(base: unknown, over: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) out[key] = mergeValue(out[key], value);
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

/** The start notice for a layer with unused parts; null when the project uses nothing loops leave out. */
export function projectConfigNotice(layer: ProjectLayer): string | null {
  const parts: string[] = [];
  if (layer.notUsed.length > 0) {
    parts.push(
      `Loops use only the model and provider settings of this project's opencode configuration; not used: ${layer.notUsed.join(', ')}. ` +
        "opencode would run them on this machine, outside the sandbox, from files an agent can change. To have a plugin or MCP server in loops, put it in your global opencode configuration (~/.config/opencode/opencode.json); formatters and language servers never run for loops.",
    );
  }
  if (layer.problems.length > 0) parts.push(`This project's opencode configuration could not be read (${layer.problems.join('; ')}): loops go on without it. Fix the file to use its model and provider settings.`);
  return parts.length > 0 ? parts.join(' ') : null;
}

/**
 * JSON with comments (`//`, `/* *\/`) and trailing commas, as opencode reads its configuration.
 * Throws with the position of the first error.
 */
export function parseJsonc(text: string): unknown {
  let out = '';
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < n && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) throw new Error('unterminated comment');
      out += ' ';
      i = end + 2;
    } else if (c === ',') {
      let j = i + 1;
      // A trailing comma: only whitespace or comments before the closing bracket.
      let rest = '';
      while (j < n) {
        if (/\s/.test(text[j]!)) j++;
        else if (text[j] === '/' && text[j + 1] === '/') while (j < n && text[j] !== '\n') j++;
        else if (text[j] === '/' && text[j + 1] === '*') {
          const end = text.indexOf('*/', j + 2);
          j = end < 0 ? n : end + 2;
        } else {
          rest = text[j]!;
          break;
        }
      }
      if (rest !== '}' && rest !== ']') out += ',';
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return JSON.parse(out.replace(/^\uFEFF/, ''));
}

/** The suffix Forge gives worktree files opencode would run as plugins. */
export const DISABLED_SUFFIX = '.forge-disabled';

/**
 * opencode 1.18.33 has a second configuration loader (its "v2" configuration and plugins) that
 * ignores `OPENCODE_DISABLE_PROJECT_CONFIG`: when an instance starts for a directory it reads the
 * `opencode.json[c]` and `.opencode/opencode.json[c]` there (plugins, agents with their
 * permissions, policies, providers) and imports every `.opencode/plugin[s]/*.{js,ts}` (seen in a
 * loop: an agent's `.opencode/plugin/evil.js` ran in the server at the next instance start). So
 * before Forge lets opencode start an instance for a worktree, it renames each of those files
 * that the user's checkout does not hold with the same content to `<name>.forge-disabled`: the
 * agent's work stays in the worktree (and in the loop's diff), inert. Returns the
 * worktree-relative names it disabled.
 */
export async function disableWorktreePluginCode(worktreeDir: string, userCheckoutDir: string | undefined): Promise<string[]> {
  const candidates: string[] = [];
  // Never through a link: a linked `.opencode` or plugin folder is disabled itself, its target untouched.
  const top = await lstat(join(worktreeDir, '.opencode')).catch(() => null);
  if (top && !top.isDirectory()) candidates.push('.opencode');
  for (const folder of top?.isDirectory() ? ['plugin', 'plugins'] : []) {
    const info = await lstat(join(worktreeDir, '.opencode', folder)).catch(() => null);
    if (!info) continue;
    if (!info.isDirectory()) {
      candidates.push(`.opencode/${folder}`);
      continue;
    }
    const entries = await readdir(join(worktreeDir, '.opencode', folder)).catch(() => [] as string[]);
    for (const entry of entries) if (/\.(js|ts)$/.test(entry)) candidates.push(`.opencode/${folder}/${entry}`);
  }
  for (const name of PROJECT_CONFIG_FILE_NAMES) {
    if (name.startsWith('.opencode/') && !top?.isDirectory()) continue;
    if (await lstat(join(worktreeDir, name)).then(() => true, () => false)) candidates.push(name);
  }
  const disabled: string[] = [];
  for (const name of candidates) {
    if (userCheckoutDir && (await sameRegularFile(join(worktreeDir, name), join(userCheckoutDir, name)))) continue;
    await rename(join(worktreeDir, name), join(worktreeDir, `${name}${DISABLED_SUFFIX}`));
    disabled.push(name);
  }
  return disabled;
}

async function sameRegularFile(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([readRegularFile(a), readRegularFile(b)]);
  return x !== null && x === y;
}

/** The notice for opencode files Forge disabled in a worktree. */
export function disabledPluginNotice(names: readonly string[]): string {
  return `Forge disabled opencode configuration and plugin code an agent wrote in the worktree (${names.join(', ')}; renamed to *${DISABLED_SUFFIX}): opencode would have loaded it, and run its plugins on this machine, outside the sandbox.`;
}
