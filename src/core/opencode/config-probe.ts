/**
 * opencode's own resolved configuration, asked of a server started for the question (never read
 * with regular expressions over files): its default model (`config.get`) and its provider catalog
 * (`config.providers`). The server runs in an empty folder of Forge's own, because opencode writes
 * into its working folder, with the project configuration off (`OPENCODE_DISABLE_PROJECT_CONFIG`)
 * and the repository's project configuration passed inline as loops get it (`projectLayerFor`:
 * model and provider settings only). So the probe sees the model and providers the user configured
 * for the project, and runs none of its plugins, MCP servers, formatters or language servers: a
 * repository's files are data here, as in a loop (issue 26).
 */
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { projectLayerFor, readProjectConfig } from './project-config';

export interface ProbeSetup {
  /** Forge's own, empty working folder of the probe server. */
  dir: string;
  /** Changes when the repository's project configuration does. */
  key: string;
  /** Merge into the probe server's inline configuration. */
  projectLayer: Record<string, unknown>;
}

/** The probe folder of `repoPath` under `probeRoot`, and the project layer the probe server gets inline. */
export async function prepareProbeDir(probeRoot: string, repoPath: string): Promise<ProbeSetup> {
  const repo = resolve(repoPath);
  const dir = join(probeRoot, createHash('sha256').update(repo).digest('hex').slice(0, 16));
  await mkdir(dir, { recursive: true });
  const projectLayer = projectLayerFor(await readProjectConfig(repo)).config;
  const key = createHash('sha256').update(repo).update('\0').update(JSON.stringify(projectLayer)).digest('hex');
  return { dir, key, projectLayer };
}
