/** Reads a markdown file the user named (a plan, a PRD), turning what can go wrong into usage errors. */
import { readFile, stat } from 'node:fs/promises';
import { UsageError } from './args';

export async function readInputFile(path: string, what: 'Plan' | 'PRD'): Promise<string> {
  try {
    const s = await stat(path);
    if (s.isDirectory()) throw new UsageError(`${path} is a folder; give the path of a markdown ${what === 'Plan' ? 'plan' : 'PRD'} file.`);
    return await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new UsageError(`${what} file ${path} does not exist.`);
    if (code === 'EACCES') throw new UsageError(`${what} file ${path} cannot be read (permission denied).`);
    throw error;
  }
}
