/**
 * The conflict radar's pure part (issue 14 part 4): given the files each live loop of a group
 * changed, which files two or more of them changed. No I/O; conflict-radar.ts reads the files.
 */

/** A file changed by two or more live loops of one group. */
export interface FileOverlap {
  /** Repository-relative path, `/`-separated, as git names it. */
  file: string;
  /** The features whose loops changed it, sorted, each once. */
  features: string[];
  /** Those features' loops, sorted, each once. */
  loops: string[];
}

export interface LoopChanges {
  featureId: string;
  loopName: string;
  files: readonly string[];
}

/** Code-unit order: the same on every machine and locale. */
const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The files changed by at least two different loops, sorted by file; features and loops sorted.
 * A loop listed twice, or a file listed twice by one loop, counts once.
 */
export function findOverlaps(changes: ReadonlyArray<LoopChanges>): FileOverlap[] {
  const byFile = new Map<string, { features: Set<string>; loops: Set<string> }>();
  for (const change of changes) {
    for (const file of new Set(change.files)) {
      let entry = byFile.get(file);
      if (!entry) byFile.set(file, (entry = { features: new Set(), loops: new Set() }));
      entry.features.add(change.featureId);
      entry.loops.add(change.loopName);
    }
  }
  const overlaps: FileOverlap[] = [];
  for (const [file, entry] of byFile) {
    if (entry.loops.size < 2) continue;
    overlaps.push({ file, features: [...entry.features].sort(byCodeUnit), loops: [...entry.loops].sort(byCodeUnit) });
  }
  return overlaps.sort((a, b) => byCodeUnit(a.file, b.file));
}

/** Whether two overlap lists (as findOverlaps returns them) say the same. */
export function sameOverlaps(a: readonly FileOverlap[], b: readonly FileOverlap[]): boolean {
  if (a.length !== b.length) return false;
  const same = (x: readonly string[], y: readonly string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return a.every((o, i) => o.file === b[i]!.file && same(o.features, b[i]!.features) && same(o.loops, b[i]!.loops));
}
