/**
 * The Dev Container configuration's pure decisions (what of it Forge uses for a docker/podman
 * loop's sandbox image, what it refuses and why), the content tag of a built image, and the
 * clear message of a command missing from the sandbox image or the host.
 */
import { strict as assert } from 'node:assert';
import { bwrapDevcontainerNotice, decideDevcontainer, devcontainerImageNotice, devcontainerImageTag } from '../../../src/core/sandbox/devcontainer/config';
import { missingCommandMessage, missingCommandName, toolchainPlaceOf } from '../../../src/core/checks/missing-command';
import { checkFinding } from '../../../src/core/checks/evaluate';
import type { CheckResult, CheckSpec } from '../../../src/core/checks/types';

const MAIN = '.devcontainer/devcontainer.json';

describe('Dev Container configuration (pure)', () => {
  it('uses `image` as it is, from JSON with comments and trailing commas', () => {
    const text = `// the project's container\n{\n  "name": "proj", /* ignored */\n  "image": "node:22-bookworm",\n  "customizations": { "vscode": { "extensions": ["x"] } },\n}\n`;
    assert.deepEqual(decideDevcontainer(MAIN, text), { kind: 'image', configPath: MAIN, image: 'node:22-bookworm' });
    assert.deepEqual(decideDevcontainer('.devcontainer.json', '{"image":"forge-sandbox:test"}'), { kind: 'image', configPath: '.devcontainer.json', image: 'forge-sandbox:test' });
  });

  it('builds `build.dockerfile` relative to the configuration folder, with context, args and target', () => {
    const d = decideDevcontainer(MAIN, `{ "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "NODE": "22", }, "target": "dev" }, "features": {} }`);
    assert.deepEqual(d, {
      kind: 'build',
      configPath: MAIN,
      build: { dockerfile: '.devcontainer/Dockerfile', context: '.', dockerfileInContext: '.devcontainer/Dockerfile', args: { NODE: '22' }, target: 'dev' },
    });
    // The default context is the configuration's folder; the older top-level `dockerFile` spelling works too.
    const own = decideDevcontainer(MAIN, '{ "dockerFile": "Dockerfile" }');
    assert.deepEqual(own.kind === 'build' && own.build, { dockerfile: '.devcontainer/Dockerfile', context: '.devcontainer', dockerfileInContext: 'Dockerfile', args: {}, target: null });
    const root = decideDevcontainer('.devcontainer.json', '{ "build": { "dockerfile": "docker/Dev.Dockerfile" } }');
    assert.deepEqual(root.kind === 'build' && root.build, { dockerfile: 'docker/Dev.Dockerfile', context: '.', dockerfileInContext: 'docker/Dev.Dockerfile', args: {}, target: null });
  });

  it('refuses what Forge does not support, naming the key and what it supports', () => {
    const refused = (text: string, key: RegExp) => {
      const d = decideDevcontainer(MAIN, text);
      assert.equal(d.kind, 'refused', JSON.stringify(d));
      if (d.kind === 'refused') {
        assert.match(d.message, key);
        assert.ok(d.message.startsWith(`${MAIN}: `), d.message);
      }
    };
    refused('{ "dockerComposeFile": "compose.yml", "service": "app" }', /`dockerComposeFile` is not supported.*Forge supports an `image`, or a `build\.dockerfile`/);
    refused('{ "image": "x", "features": { "ghcr.io/devcontainers/features/node:1": {} } }', /`features` are not supported/);
    refused('{ "image": "${localEnv:IMAGE}" }', /`image` uses a `\$\{…\}` variable/);
    refused('{ "build": { "dockerfile": "Dockerfile", "args": { "U": "${localEnv:USER}" } } }', /`build\.args\.U` uses a `\$\{…\}` variable/);
    refused('{ "build": { "dockerfile": "Dockerfile", "context": "${localWorkspaceFolder}" } }', /`build\.context` uses/);
    refused('{ "build": { "dockerfile": "../../etc/Dockerfile" } }', /`build\.dockerfile` \("\.\.\/\.\.\/etc\/Dockerfile"\) must name a file inside the repository/);
    refused('{ "build": { "dockerfile": "/abs/Dockerfile" } }', /inside the repository/);
    refused('{ "build": { "dockerfile": "Dockerfile", "context": "../.." } }', /`build\.context` \("\.\.\/\.\."\) must be a folder inside the repository/);
    refused('{ "build": { "dockerfile": "../Dockerfile", "context": "." } }', /must lie inside `build\.context` \(\.devcontainer\)/);
    refused('{ "image": "a", "build": { "dockerfile": "Dockerfile" } }', /both `image` and `build`/);
    refused('{ "name": "nothing" }', /neither `image` nor `build\.dockerfile`/);
    refused('{ "image": "--privileged" }', /one image reference/);
    refused('{ "build": { "dockerfile": "Dockerfile", "target": "a b" } }', /`build\.target` must be a build stage name/);
    refused('{ "build": { "dockerfile": "Dockerfile", "args": { "A": 1 } } }', /`build\.args\.A` must be a string/);
    refused('{ "image": ', /not valid JSON/);
    refused('[1]', /a JSON object/);
  });

  it('tags a built image by content: the same parts give the same tag, any change another', () => {
    const parts = { configText: '{"build":{"dockerfile":"Dockerfile"}}', dockerfileObject: 'a'.repeat(40), contextTree: 'b'.repeat(40) };
    const tag = devcontainerImageTag(parts);
    assert.match(tag, /^forge-devcontainer:[0-9a-f]{24}$/);
    assert.equal(devcontainerImageTag({ ...parts }), tag);
    for (const change of [{ configText: `${parts.configText} ` }, { dockerfileObject: 'c'.repeat(40) }, { contextTree: 'd'.repeat(40) }]) {
      assert.notEqual(devcontainerImageTag({ ...parts, ...change }), tag);
    }
  });

  it("says which image a docker/podman loop's sandbox uses and how it was had", () => {
    assert.equal(devcontainerImageNotice({ kind: 'image', configPath: MAIN, image: 'node:22' }, 'podman', 3), 'The podman sandbox uses the image node:22 of .devcontainer/devcontainer.json (as it names it), not forge.sandbox.image.');
    assert.equal(
      devcontainerImageNotice({ kind: 'built', configPath: MAIN, image: 'forge-devcontainer:ab', cached: false }, 'docker', 12_345),
      'The docker sandbox uses the image forge-devcontainer:ab of .devcontainer/devcontainer.json (built now from the base commit in 12.3 s, reused by later loops), not forge.sandbox.image.',
    );
    assert.match(devcontainerImageNotice({ kind: 'built', configPath: MAIN, image: 'forge-devcontainer:ab', cached: true }, 'docker', 5), /\(built by an earlier loop, reused\)/);
  });

  it('says a bwrap loop does not use the configuration', () => {
    assert.match(bwrapDevcontainerNotice(MAIN), /has \.devcontainer\/devcontainer\.json; the bwrap sandbox does not use it: the loop sees the host's toolchains\. Set forge\.sandbox\.driver to docker or podman/);
  });
});

describe('a command missing from the environment (pure)', () => {
  it('names the missing command from what shells and env print on exit 127', () => {
    assert.equal(missingCommandName(127, 'sh: 1: uvu: not found\n'), 'uvu');
    assert.equal(missingCommandName(127, 'bash: line 1: npm: command not found'), 'npm');
    assert.equal(missingCommandName(127, 'some output\n/bin/sh: projtool: not found\n\n'), 'projtool');
    assert.equal(missingCommandName(127, "/usr/bin/env: 'node': No such file or directory"), 'node');
    assert.equal(missingCommandName(1, 'sh: 1: uvu: not found'), null, 'only a 127 exit');
    assert.equal(missingCommandName(127, 'make: *** [test] Error 127'), null, 'nothing named');
  });

  it('places the toolchain: the docker/podman image, else the host', () => {
    assert.deepEqual(toolchainPlaceOf(true, { driver: 'docker', image: 'forge-devcontainer:abc' }), { kind: 'image', image: 'forge-devcontainer:abc', driver: 'docker' });
    assert.deepEqual(toolchainPlaceOf(true, { driver: 'bwrap', image: 'forge-sandbox:latest' }), { kind: 'host', sandboxed: true });
    assert.deepEqual(toolchainPlaceOf(false, undefined), { kind: 'host', sandboxed: false });
  });

  it("puts the clear message in a check's finding, naming the command and the image", () => {
    const spec: CheckSpec = { id: 'c1', key: 'npm test', kind: 'command', command: 'npm test', label: 'npm test', origin: 'the plan', scope: { kind: 'final' } } as unknown as CheckSpec;
    const result = {
      id: 'c1',
      kind: 'command',
      label: 'npm test',
      status: 'not-started',
      message: 'command not found (exit 127): sh: 1: npm: not found',
      exitCode: 127,
      signal: null,
      durationMs: 12,
      outputTail: 'sh: 1: npm: not found\n',
      outputBytes: 22,
      outputTruncated: false,
    } as unknown as CheckResult;
    const finding = checkFinding(spec, result, { worktreeDir: '/w', toolchain: { kind: 'image', image: 'forge-devcontainer:0123', driver: 'podman' } });
    assert.ok(finding);
    assert.match(finding.description, /`npm` is not in the sandbox image forge-devcontainer:0123 \(podman\): this is the environment, not the work\. Add it to the image/);
    const onHost = checkFinding(spec, result, { worktreeDir: '/w', toolchain: { kind: 'host', sandboxed: true } });
    assert.match(onHost!.description, /`npm` is not installed on the host, whose toolchains the bwrap sandbox uses/);
    assert.equal(missingCommandMessage(2, 'failing test', { kind: 'host', sandboxed: false }), null);
    assert.doesNotMatch(checkFinding(spec, { ...result, exitCode: 1, outputTail: '1 failing' } as CheckResult, { worktreeDir: '/w', toolchain: { kind: 'host', sandboxed: false } })!.description, /not installed/);
  });
});
