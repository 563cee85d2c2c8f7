import { mkdirSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { describeSandboxDriver } from '../../support/sandbox-contract';
import { bwrapPrereqs } from '../../support/sandbox-fixtures';

describeSandboxDriver({
  driver: 'bwrap',
  prereqs: () => {
    bwrapPrereqs();
    return process.env;
  },
  runtime: (dirs) => new BwrapRuntime({ stateDir: dirs.stateDir }),
  brokenRuntime: (dirs) => {
    // The state store cannot be read: its folder is a regular file.
    const blocker = path.join(dirs.base, 'state-is-a-file');
    writeFileSync(blocker, 'not a folder');
    return new BwrapRuntime({ stateDir: path.join(blocker, 'sandboxes') });
  },
  removeOutOfBand: async (name, dirs) => {
    rmSync(path.join(dirs.stateDir, `${name}.json`));
    // Drop its (empty) cgroup too, as a reboot would.
    for (const d of await new SandboxCgroups().dirs(name)) rmdirSync(d);
  },
  breakStateOf: (name, dirs) => {
    const record = path.join(dirs.stateDir, `${name}.json`);
    renameSync(record, `${record}.aside`);
    mkdirSync(record);
    return () => {
      rmdirSync(record);
      renameSync(`${record}.aside`, record);
    };
  },
});
