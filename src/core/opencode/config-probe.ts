/**
 * opencode's own resolved configuration, asked of a server started for the question (never read
 * with regular expressions over files): its default model (`config.get`) and its provider catalog
 * (`config.providers`). The server runs in a folder of Forge's own, because opencode writes into
 * its working folder; the project's configuration files (`opencode.json`, `opencode.jsonc`, in the
 * repository's root or its `.opencode/` folder) are copied there so opencode merges them as it
 * would in the project. Only regular files, at most 1 MB each, are copied; the repository's files
 * are data, never followed out of it.
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export const PROJECT_CONFIG_FILES = ['opencode.json', 'opencode.jsonc', join('.opencode', 'opencode.json'), join('.opencode', 'opencode.jsonc')] as const;
const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * The probe folder of `repoPath` under `probeRoot`, holding copies of its project configuration
 * (stale copies removed); returns the folder and a key that changes when those files do.
 */
export async function prepareProbeDir(probeRoot: string, repoPath: string): Promise<{ dir: string; key: string }> {
  const repo = resolve(repoPath);
  const dir = join(probeRoot, createHash('sha256').update(repo).digest('hex').slice(0, 16));
  await mkdir(join(dir, '.opencode'), { recursive: true });
  const key = createHash('sha256').update(repo);
  for (const name of PROJECT_CONFIG_FILES) {
    const content = await readProjectConfig(join(repo, name));
    const copy = join(dir, name);
    if (content === null) {
      await rm(copy, { force: true });
      key.update(`${name}:-\n`);
    } else {
      await writeFile(copy, content);
      key.update(`${name}:${createHash('sha256').update(content).digest('hex')}\n`);
    }
  }
  return { dir, key: key.digest('hex') };
}

async function readProjectConfig(path: string): Promise<Buffer | null> {
  try {
    const info = await lstat(path);
    if (!info.isFile() || info.size > MAX_CONFIG_BYTES) return null;
    const content = await readFile(path);
    return content.length > MAX_CONFIG_BYTES ? null : content;
  } catch {
    return null;
  }
}
