/**
 * The engine folder's files (real files in a temp folder): the claim is taken exclusively, a
 * dead process's claim is cleared, a live one's is respected; the published files are 0600 in
 * a 0700 folder; withdrawing removes only what this process published.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endpointPaths, publishEndpoint, readEngineInfo, readLiveEngineInfo, readSecret, takeClaim, withdrawEndpoint } from '../../../src/core/engine-host/endpoint-files';

/** A pid that was a process and is gone. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout as unknown as number;
}

describe('engine endpoint files (real files)', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'forge-endpoint-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('takes the claim once, in a 0700 folder; a live holder keeps it; a dead holder\'s claim is cleared', () => {
    const paths = endpointPaths(dir);
    assert.equal(takeClaim(paths), true);
    assert.equal(statSync(paths.dir).mode & 0o777, 0o700);
    assert.equal(takeClaim(paths), true, 'already ours');
    writeFileSync(paths.claim, String(process.ppid));
    assert.equal(takeClaim(paths), false, 'a live process holds it');
    writeFileSync(paths.claim, String(Number(deadPid())));
    assert.equal(takeClaim(paths), true, 'a dead process\'s claim is taken over');
    assert.deepEqual(readdirSync(paths.dir), ['claim'], 'the stale claim moved aside is removed');
  });

  it('publishes secret and info (0600), removes a stale socket file, and withdraws only its own', () => {
    const paths = endpointPaths(dir);
    assert.equal(takeClaim(paths), true);
    writeFileSync(paths.socket, 'stale');
    const info = { pid: process.pid, supervisorId: `${process.pid}:cli-me`, kind: 'cli' as const, started: 1, version: 1 };
    const secret = publishEndpoint(paths, info);
    assert.match(secret, /^[0-9a-f]{64}$/);
    assert.equal(readSecret(paths), secret);
    assert.equal(statSync(paths.secret).mode & 0o777, 0o600);
    assert.equal(statSync(paths.info).mode & 0o777, 0o600);
    assert.equal(existsSync(paths.socket), false);
    assert.deepEqual(readLiveEngineInfo(paths), info);
    // Another engine's info now: withdrawing leaves it, and takes only our claim.
    const other = { ...info, supervisorId: `${process.pid}:cli-other` };
    writeFileSync(paths.info, JSON.stringify(other));
    withdrawEndpoint(paths, info);
    assert.deepEqual(readEngineInfo(paths), other);
    assert.equal(existsSync(paths.claim), false);
    writeFileSync(paths.info, JSON.stringify({ ...info, pid: Number(deadPid()) }));
    assert.equal(readLiveEngineInfo(paths), null, 'a dead engine is no engine');
    writeFileSync(paths.info, '{"pid": "x"}');
    assert.equal(readEngineInfo(paths), null, 'a malformed info file is ignored');
  });
});
