import assert from 'node:assert/strict';
import { loopTeardownMessage, sectionCheckpointMessage } from '../../../src/core/workspace';

describe('workspace: checkpoint messages', () => {
  const sections: Array<[number, string, string | undefined, string]> = [
    [1, 'Parser', undefined, 'section 1: Parser'],
    [12, '  Add   the\nstorage layer ', undefined, 'section 12: Add the storage layer'],
    [3, '', undefined, 'section 3'],
    [3, '   ', undefined, 'section 3'],
    [2, 'Title', 'What was done.', 'section 2: Title\n\nWhat was done.\n'],
    [2, 'Title', '   ', 'section 2: Title'],
  ];
  for (const [n, title, body, expected] of sections) {
    it(`section ${n} ${JSON.stringify(title)} → ${JSON.stringify(expected)}`, () => {
      assert.equal(sectionCheckpointMessage(n, title, body), expected);
    });
  }

  const teardowns: Array<[string, string, number, string | undefined, string]> = [
    ['auth', 'completed', 4, undefined, 'loop: auth completed after 4 iterations'],
    ['auth', 'cancelled', 0, undefined, 'loop: auth cancelled after 0 iterations'],
    ['auth', 'worktree_failed: disk\nfull', 2, undefined, 'loop: auth worktree_failed: disk full after 2 iterations'],
    ['auth', 'completed', 7, 'Summary line.\n\nMore.', 'loop: auth completed after 7 iterations\n\nSummary line.\n\nMore.\n'],
  ];
  for (const [name, reason, iterations, body, expected] of teardowns) {
    it(`teardown ${JSON.stringify(reason)} → ${JSON.stringify(expected.split('\n')[0])}`, () => {
      assert.equal(loopTeardownMessage(name, reason, iterations, body), expected);
    });
  }
});
