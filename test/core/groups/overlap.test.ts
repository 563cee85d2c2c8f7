/**
 * The conflict radar's pure part (overlap.ts): which files two or more live loops changed.
 * Exhaustive over small inputs: every way three loops can share two files is checked against a
 * direct count.
 */
import { strict as assert } from 'node:assert';
import { findOverlaps, sameOverlaps, type LoopChanges } from '../../../src/core/groups/overlap';

const c = (featureId: string, files: string[], loopName = `g-${featureId}`): LoopChanges => ({ featureId, loopName, files });

describe('conflict radar: findOverlaps', () => {
  it('nothing changed, one loop, or loops with disjoint files: no overlap', () => {
    assert.deepEqual(findOverlaps([]), []);
    assert.deepEqual(findOverlaps([c('a', [])]), []);
    assert.deepEqual(findOverlaps([c('a', ['x.txt', 'y.txt'])]), []);
    assert.deepEqual(findOverlaps([c('a', ['x.txt']), c('b', ['y.txt']), c('c', [])]), []);
  });

  it('a file two loops changed is an overlap naming both features and loops', () => {
    assert.deepEqual(findOverlaps([c('notes', ['shared.txt', 'notes.txt']), c('search', ['search.txt', 'shared.txt'])]), [
      { file: 'shared.txt', features: ['notes', 'search'], loops: ['g-notes', 'g-search'] },
    ]);
  });

  it('sorts by file, and features and loops within each, whatever the input order', () => {
    const overlaps = findOverlaps([c('zeta', ['b/z.ts', 'a.ts', 'B.ts']), c('alpha', ['a.ts', 'b/z.ts', 'B.ts']), c('mid', ['B.ts'])]);
    assert.deepEqual(overlaps, [
      { file: 'B.ts', features: ['alpha', 'mid', 'zeta'], loops: ['g-alpha', 'g-mid', 'g-zeta'] },
      { file: 'a.ts', features: ['alpha', 'zeta'], loops: ['g-alpha', 'g-zeta'] },
      { file: 'b/z.ts', features: ['alpha', 'zeta'], loops: ['g-alpha', 'g-zeta'] },
    ]);
    assert.deepEqual(findOverlaps([c('alpha', ['a.ts', 'b/z.ts', 'B.ts']), c('mid', ['B.ts']), c('zeta', ['B.ts', 'a.ts', 'b/z.ts'])]), overlaps);
  });

  it('a file listed twice by one loop, or one loop listed twice, is not an overlap', () => {
    assert.deepEqual(findOverlaps([c('a', ['x.txt', 'x.txt'])]), []);
    assert.deepEqual(findOverlaps([c('a', ['x.txt']), c('a', ['x.txt'])]), []);
    assert.deepEqual(findOverlaps([c('a', ['x.txt', 'x.txt']), c('b', ['x.txt'])]), [{ file: 'x.txt', features: ['a', 'b'], loops: ['g-a', 'g-b'] }]);
  });

  it('counts loops, not features: two loops of one feature (a restart under another name) overlap once', () => {
    assert.deepEqual(findOverlaps([c('a', ['x.txt'], 'g-a'), c('a', ['x.txt'], 'g-a-2')]), [{ file: 'x.txt', features: ['a'], loops: ['g-a', 'g-a-2'] }]);
  });

  it('paths are compared exactly: case, folders and spaces matter', () => {
    assert.deepEqual(findOverlaps([c('a', ['X.txt', 'dir/x.txt', 'with space.txt']), c('b', ['x.txt', 'x.txt/dir', 'with space.txt'])]), [
      { file: 'with space.txt', features: ['a', 'b'], loops: ['g-a', 'g-b'] },
    ]);
  });

  it('exhaustively, over three loops and two files: a file overlaps exactly when two or more loops changed it', () => {
    const files = ['p', 'q'];
    const subsets = [[], ['p'], ['q'], ['p', 'q']];
    for (const a of subsets) {
      for (const b of subsets) {
        for (const d of subsets) {
          const input = [c('a', a), c('b', b), c('d', d)];
          const expected = files
            .map((file) => ({ file, who: input.filter((x) => x.files.includes(file)).map((x) => x.featureId) }))
            .filter((x) => x.who.length >= 2)
            .map((x) => ({ file: x.file, features: x.who, loops: x.who.map((w) => `g-${w}`) }));
          assert.deepEqual(findOverlaps(input), expected, JSON.stringify(input));
        }
      }
    }
  });

  it('does not change its input', () => {
    const input = [c('b', ['y', 'x']), c('a', ['x'])];
    const copy = JSON.parse(JSON.stringify(input)) as LoopChanges[];
    findOverlaps(input);
    assert.deepEqual(input, copy);
  });
});

describe('conflict radar: sameOverlaps', () => {
  const o = (file: string, features: string[]) => ({ file, features, loops: features.map((f) => `g-${f}`) });
  it('equal lists are the same; any difference in file, features, loops or length is not', () => {
    assert.equal(sameOverlaps([], []), true);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], [o('x', ['a', 'b'])]), true);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], []), false);
    assert.equal(sameOverlaps([], [o('x', ['a', 'b'])]), false);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], [o('y', ['a', 'b'])]), false);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], [o('x', ['a', 'c'])]), false);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], [o('x', ['a', 'b', 'c'])]), false);
    assert.equal(sameOverlaps([o('x', ['a', 'b'])], [{ file: 'x', features: ['a', 'b'], loops: ['g-a', 'h-b'] }]), false);
    assert.equal(sameOverlaps([o('x', ['a', 'b']), o('y', ['a', 'b'])], [o('x', ['a', 'b'])]), false);
  });
});
