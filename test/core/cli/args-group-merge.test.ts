/** `forge group merge ID --into BRANCH` at the argument parser (issue 14 part 4). */
import { strict as assert } from 'node:assert';
import { parseCli, UsageError } from '../../../src/cli/args';

describe('forge group merge arguments', () => {
  it('takes one group id and --into BRANCH', () => {
    const cmd = parseCli(['group', 'merge', 'shop', '--into', 'main'], '/repo');
    assert.equal(cmd.command, 'group');
    assert.deepEqual(cmd.command === 'group' ? [cmd.action, cmd.target, cmd.into] : [], ['merge', 'shop', 'main']);
  });

  it('refuses a missing --into or id, --into on other actions and commands, and other options on merge', () => {
    const refused: Array<[string[], RegExp]> = [
      [['group', 'merge', 'shop'], /forge group merge takes one group id and the branch to merge into: forge group merge ID --into BRANCH\./],
      [['group', 'merge', '--into', 'main'], /forge group merge takes one group id/],
      [['group', 'merge', 'shop', '--into'], /--into needs a value: a BRANCH\./],
      [['group', 'launch', 'shop', '--into', 'main'], /--into does not apply to forge group launch\./],
      [['status', '--into', 'main'], /--into applies to forge group only\./],
      [['group', 'merge', 'shop', '--into', 'main', '--max-concurrent', '2'], /--max-concurrent does not apply to forge group merge\. Its options: --into\./],
    ];
    for (const [argv, message] of refused) assert.throws(() => parseCli(argv, '/repo'), (e: unknown) => e instanceof UsageError && message.test(e.message), argv.join(' '));
  });
});
