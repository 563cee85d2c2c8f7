import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * The real path of `path` with every symbolic link followed: of the path itself when it exists,
 * else of its longest existing parent with the rest appended (a file about to be written). A
 * dangling link is followed to where it points (a write through it would create its target),
 * so a request is judged by the place it would really touch.
 */
export function realPathThroughLinks(path: string, hops = 0): string {
  const absolute = resolve(path);
  if (hops > 40) return absolute; // a link loop: the file tool itself fails on it (ELOOP)
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      const real = realpathSync(current);
      return rest.length === 0 ? real : join(real, ...[...rest].reverse());
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') return absolute;
      try {
        if (lstatSync(current).isSymbolicLink()) {
          const target = resolve(dirname(current), readlinkSync(current));
          return realPathThroughLinks(rest.length === 0 ? target : join(target, ...[...rest].reverse()), hops + 1);
        }
      } catch {
        // not there at all: keep climbing
      }
      const parent = dirname(current);
      if (parent === current) return absolute;
      rest.push(basename(current));
      current = parent;
    }
  }
}
