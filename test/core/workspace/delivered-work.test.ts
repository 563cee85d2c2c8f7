import { strict as assert } from 'node:assert';
import { firstUndeliveredEntry } from '../../../src/core/workspace/delivered-work';

describe('delivered work: what a status listing holds beyond staged changes (pure)', () => {
  const table: Array<[string, string | null]> = [
    ['', null],
    ['A  add.js\0M  src/a.js\0D  old.js\0', null],
    ['R  new.js\0old.js\0A  b.js\0', null],
    ['C  copy.js\0?? looks-untracked-but-is-a-source\0', null],
    ['?? add.js\0', '?? add.js'],
    ['!! add.js\0', '!! add.js'],
    ['!! .opencode/\0', '!! .opencode/'],
    ['A  a.js\0 M a.js\0', ' M a.js'],
    ['AM a.js\0', 'AM a.js'],
    ['UU conflict.js\0', 'UU conflict.js'],
  ];
  for (const [listing, expected] of table) {
    it(`${JSON.stringify(listing)} → ${JSON.stringify(expected)}`, () => assert.equal(firstUndeliveredEntry(listing), expected));
  }
});
