/**
 * The engine endpoint's wire protocol (pure): line framing, request and reply validation, the
 * secret comparison, the compatibility key, and how forge status names a loop's supervisor.
 */
import { strict as assert } from 'node:assert';
import { compatibilityKey, encodeMessage, LineDecoder, parseReply, parseRequest, secretMatches } from '../../../src/core/engine-host/protocol';
import { describeSupervision, formatSupervision, supervisorKind } from '../../../src/core/engine-host/supervision';

const START = { type: 'start', secret: 's', clientPid: 12, compat: 'k', follow: true, request: { kind: 'plan', repoPath: '/r', planText: '# p', planSource: 'p.md', merge: 'never', budget: { money: 1, tokens: null } } };

describe('engine protocol (pure)', () => {
  it('frames messages as lines, across chunk boundaries, skipping blank lines', () => {
    const d = new LineDecoder();
    const line = encodeMessage(START as never);
    assert.ok(line.endsWith('\n') && !line.slice(0, -1).includes('\n'));
    assert.deepEqual(d.push(line.slice(0, 10)), { lines: [], overflow: false });
    assert.deepEqual(d.push(line.slice(10) + '\n' + line), { lines: [line.slice(0, -1), line.slice(0, -1)], overflow: false });
  });

  it('an over-long line is an overflow (the connection is dropped)', () => {
    const d = new LineDecoder(16);
    assert.equal(d.push('x'.repeat(17)).overflow, true);
    assert.equal(new LineDecoder(16).push('x'.repeat(20) + '\n').overflow, true);
    assert.equal(new LineDecoder(16).push('short\n').overflow, false);
  });

  it('accepts well-formed requests of each type', () => {
    const ok = parseRequest(JSON.stringify(START));
    assert.ok(ok.ok, JSON.stringify(ok));
    assert.ok(parseRequest(JSON.stringify({ type: 'hello', secret: 's', version: 1 })).ok);
    assert.ok(parseRequest(JSON.stringify({ type: 'cancel', secret: 's', ref: { projectId: 'p', name: 'n' } })).ok);
    assert.ok(parseRequest(JSON.stringify({ type: 'tell', secret: 's', ref: { projectId: 'p', name: 'n' }, text: 'hi' })).ok);
    // An empty message, or one past the limit, is refused before the engine acts on it.
    assert.equal(parseRequest(JSON.stringify({ type: 'tell', secret: 's', ref: { projectId: 'p', name: 'n' }, text: '' })).ok, false);
    assert.equal(parseRequest(JSON.stringify({ type: 'tell', secret: 's', ref: { projectId: 'p', name: 'n' }, text: 'x'.repeat(20_001) })).ok, false);
    assert.ok(parseRequest(JSON.stringify({ type: 'restart', secret: 's', clientPid: 1, compat: 'k', ref: { projectId: 'p', name: 'n' }, options: { force: true, budget: { tokens: 5 } } })).ok);
  });

  it('refuses what is not a request, with a reason: not JSON, no secret, unknown type or field, wrong types', () => {
    const cases: Array<[string, RegExp]> = [
      ['{"type":"start"', /not JSON/],
      [JSON.stringify({ ...START, secret: undefined }), /secret/],
      [JSON.stringify({ type: 'format-disk', secret: 's' }), /type/],
      [JSON.stringify({ ...START, request: { ...START.request, shell: 'rm -rf /' } }), /request/],
      [JSON.stringify({ ...START, request: { ...START.request, kind: 'exploit' } }), /request\.kind/],
      [JSON.stringify({ ...START, request: { ...START.request, merge: 'force-push' } }), /request\.merge/],
      [JSON.stringify({ ...START, clientPid: 'me' }), /clientPid/],
      [JSON.stringify({ type: 'cancel', secret: 's', ref: { projectId: '', name: 'n' } }), /ref\.projectId/],
      ['[]', /.+/],
    ];
    for (const [line, reason] of cases) {
      const r = parseRequest(line);
      assert.equal(r.ok, false, line);
      assert.match((r as { message: string }).message, reason, line);
    }
  });

  it('replies: events must name a loop; unknown shapes are refused', () => {
    assert.ok(parseReply(JSON.stringify({ type: 'event', event: { type: 'loop.ended', loop: { projectId: 'p', name: 'n' }, status: 'completed' } })).ok);
    assert.equal(parseReply(JSON.stringify({ type: 'event', event: { type: 'loop.ended' } })).ok, false);
    assert.equal(parseReply(JSON.stringify({ type: 'event', event: { type: 'rm', loop: { projectId: 'p', name: 'n' } } })).ok, false);
    assert.ok(parseReply(JSON.stringify({ type: 'refused', code: 'unauthorized', message: 'no' })).ok);
    assert.equal(parseReply(JSON.stringify({ type: 'refused', code: 'maybe', message: 'no' })).ok, false);
    assert.ok(parseReply(JSON.stringify({ type: 'hello', engine: { pid: 3, supervisorId: '3:cli-x', kind: 'cli', started: 1, version: 1 } })).ok);
    assert.equal(parseReply(JSON.stringify({ type: 'hello', engine: { pid: -3, supervisorId: '3:cli-x', kind: 'cli', started: 1, version: 1 } })).ok, false);
  });

  it('the secret must match exactly', () => {
    assert.equal(secretMatches('abc', 'abc'), true);
    assert.equal(secretMatches('abd', 'abc'), false);
    assert.equal(secretMatches('ab', 'abc'), false);
    assert.equal(secretMatches('', 'abc'), false);
  });

  it('the compatibility key: equal for the same settings and relevant environment (key order aside), different otherwise; credentials never appear in it', () => {
    const env = { HOME: '/h', PATH: '/bin', ANTHROPIC_API_KEY: 'sk-secret', TERM: 'xterm', FORGE_CLI_TEST_PROCESS: 'a' };
    const k = compatibilityKey({ a: 1, b: { c: 2 } }, env);
    assert.equal(k, compatibilityKey({ b: { c: 2 }, a: 1 }, { ...env, TERM: 'dumb', FORGE_CLI_TEST_PROCESS: 'b', SHLVL: '3' }));
    assert.notEqual(k, compatibilityKey({ a: 2, b: { c: 2 } }, env));
    // The merge mode travels in each request: runs with different --merge share an engine.
    assert.equal(compatibilityKey({ a: 1, 'forge.loop.merge': 'never' }, env), compatibilityKey({ a: 1, 'forge.loop.merge': 'fast-forward' }, env));
    assert.notEqual(k, compatibilityKey({ a: 1, b: { c: 2 } }, { ...env, ANTHROPIC_API_KEY: 'sk-other' }));
    assert.notEqual(k, compatibilityKey({ a: 1, b: { c: 2 } }, { ...env, FORGE_MODEL: 'x/y' }));
    assert.notEqual(k, compatibilityKey({ a: 1, b: { c: 2 } }, { ...env, XDG_CONFIG_HOME: '/c' }));
    assert.doesNotMatch(k, /sk-secret/);
  });

  it('names the supervisor of a running loop: pid, kind, engine or not, alive or not', () => {
    const now = 1_000;
    const engine = { pid: process.pid, supervisorId: `${process.pid}:cli-u`, kind: 'cli' as const, started: 0, version: 1 };
    assert.equal(supervisorKind('12:vscode-abc'), 'vscode');
    assert.equal(supervisorKind('12:abc'), null);
    assert.deepEqual(describeSupervision({ status: 'running', supervisorId: `${process.pid}:cli-u`, leaseExpiresAt: now + 1 }, engine, now), { pid: process.pid, kind: 'cli', engine: true, alive: true });
    assert.deepEqual(describeSupervision({ status: 'running', supervisorId: `${process.pid}:vscode-v`, leaseExpiresAt: now + 1 }, engine, now), { pid: process.pid, kind: 'vscode', engine: false, alive: true });
    assert.equal(describeSupervision({ status: 'running', supervisorId: `${process.pid}:cli-u`, leaseExpiresAt: now - 1 }, engine, now), null, 'an expired lease names nobody');
    assert.equal(describeSupervision({ status: 'completed', supervisorId: null, leaseExpiresAt: null }, engine, now), null);
    assert.equal(formatSupervision({ pid: 7, kind: 'cli', engine: true, alive: false }), "process 7 (cli, the data folder's engine, gone)");
    assert.equal(formatSupervision({ pid: 7, kind: null, engine: false, alive: true }), 'process 7 (unknown kind)');
  });
});
