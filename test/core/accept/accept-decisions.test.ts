/** The pure parts of `forge accept`: the strategy the flags and setting choose, how a result is recorded, compare URLs. */
import { strict as assert } from 'node:assert';
import { acceptHowOf, chooseAcceptStrategy, compareUrl, knownHostRepository } from '../../../src/core/accept/accept-decisions';
import { acceptRefusal } from '../../../src/core/accept/accept-loop';

describe('accept decisions (pure)', () => {
  it('the flags win over the setting; both flags at once is refused', () => {
    assert.equal(chooseAcceptStrategy('merge-commit', {}), 'merge-commit');
    assert.equal(chooseAcceptStrategy('squash', {}), 'squash');
    assert.equal(chooseAcceptStrategy('merge-commit', { squash: true }), 'squash');
    assert.equal(chooseAcceptStrategy('squash', { mergeCommit: true }), 'merge-commit');
    assert.equal(chooseAcceptStrategy('squash', { squash: true, mergeCommit: true }), null);
  });

  it('records a fast-forward as such whatever the strategy, a merge as the strategy, and nothing for a refusal or no-op', () => {
    assert.equal(acceptHowOf({ kind: 'fast-forwarded' }, 'squash'), 'fast-forward');
    assert.equal(acceptHowOf({ kind: 'merged' }, 'merge-commit'), 'merge');
    assert.equal(acceptHowOf({ kind: 'merged' }, 'squash'), 'squash');
    assert.equal(acceptHowOf({ kind: 'refused' }, 'merge-commit'), null);
    assert.equal(acceptHowOf({ kind: 'kept' }, 'merge-commit'), null);
  });

  it('only a loop that is not running, with a branch, may be accepted', () => {
    const loop = { name: 'l1', status: 'completed' as const, branch: 'forge/l1', repoDir: '/r' };
    assert.equal(acceptRefusal(loop), null);
    assert.equal(acceptRefusal({ ...loop, status: 'paused' }), null);
    assert.match(acceptRefusal({ ...loop, status: 'running' })!, /^Loop "l1" is still running; .*forge cancel l1/);
    assert.match(acceptRefusal({ ...loop, branch: null })!, /no branch/);
  });

  it('builds the compare / pull-request URL of github.com, gitlab.com and bitbucket.org remotes in each URL form', () => {
    const gh = 'https://github.com/acme/shop/compare/main...forge/add-cart?expand=1';
    for (const url of ['git@github.com:acme/shop.git', 'https://github.com/acme/shop.git', 'https://github.com/acme/shop', 'ssh://git@github.com/acme/shop.git', 'https://user:tok@github.com/acme/shop.git', 'github.com:acme/shop']) {
      assert.equal(compareUrl(url, 'forge/add-cart', 'main'), gh, url);
    }
    assert.equal(compareUrl('git@github.com:acme/shop.git', 'forge/x', null), 'https://github.com/acme/shop/pull/new/forge/x');
    assert.equal(compareUrl('git@github.com:acme/shop.git', 'forge/x', 'release/1 ö'), 'https://github.com/acme/shop/compare/release/1%20%C3%B6...forge/x?expand=1');
    assert.equal(
      compareUrl('git@gitlab.com:grp/sub/shop.git', 'forge/x', 'main'),
      'https://gitlab.com/grp/sub/shop/-/merge_requests/new?merge_request%5Bsource_branch%5D=forge%2Fx&merge_request%5Btarget_branch%5D=main',
    );
    assert.equal(compareUrl('https://bob@bitbucket.org/team/shop.git', 'forge/x', 'dev'), 'https://bitbucket.org/team/shop/pull-requests/new?source=forge%2Fx&dest=dev');
  });

  it('gives no URL for other remotes: file paths, self-hosted, look-alike hosts, odd paths', () => {
    for (const url of ['/tmp/remote.git', 'file:///tmp/remote.git', '../remote', 'https://git.example.com/acme/shop.git', 'https://github.com.evil.io/acme/shop.git', 'https://github.com/acme', 'https://github.com/a/b/c', 'https://github.com/../x', 'C:\\repos\\shop', '']) {
      assert.equal(compareUrl(url, 'forge/x', 'main'), null, url);
    }
    assert.deepEqual(knownHostRepository('https://www.github.com/acme/shop/'), { host: 'github.com', path: 'acme/shop' });
  });
});
