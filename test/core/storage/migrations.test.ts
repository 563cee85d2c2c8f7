import assert from 'node:assert/strict';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { isForgeDatabaseError } from '../../../src/core/storage/errors';
import { FORGE_MIGRATIONS, LATEST_SCHEMA_VERSION, type Migration } from '../../../src/core/storage/migrations';
import { makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

function tables(db: ForgeDatabase): string[] {
  return db
    .query<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
    .map((row) => row.name);
}

function indexes(db: ForgeDatabase): string[] {
  return db
    .query<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
    .map((row) => row.name);
}

/** Rows written at each schema version, to check that later migrations keep them. */
const SEED_AT_VERSION: Record<number, (db: ForgeDatabase) => void> = {
  1: (db) => {
    db.run(
      `INSERT INTO loops (project_id, name, status, phase, kind, created_at, updated_at) VALUES ('p', 'old-loop', 'running', 'coding', 'plan', 1, 1)`,
    );
    db.run(
      `INSERT INTO review_findings (project_id, loop_name, file, line, severity, description, status, fingerprint, created_at, updated_at)
       VALUES ('p', 'old-loop', 'a.ts', 3, 'bug', 'off by one', 'open', 'f1', 1, 1)`,
    );
  },
  2: (db) => {
    db.run(
      `INSERT INTO loop_handoffs (project_id, loop_name, role, session_id, iteration, payload, at) VALUES ('p', 'old-loop', 'code', 's1', 1, '{}', 2)`,
    );
  },
};

describe('storage: migrations', function () {
  this.timeout(60_000);
  let data: TempDataDir;

  beforeEach(() => {
    data = makeTempDataDir();
  });

  afterEach(() => data.cleanup());

  it('are registered in strictly increasing order, and there are several (so upgrades are exercised)', () => {
    assert.ok(FORGE_MIGRATIONS.length >= 2);
    FORGE_MIGRATIONS.forEach((migration, index) => {
      if (index > 0) assert.ok(migration.id > FORGE_MIGRATIONS[index - 1]!.id);
      assert.ok(migration.name.length > 0);
    });
    assert.equal(LATEST_SCHEMA_VERSION, FORGE_MIGRATIONS[FORGE_MIGRATIONS.length - 1]!.id);
  });

  it('build the whole schema from an empty folder and record each migration once', async () => {
    let clock = 1_000;
    const db = await openForgeDatabase({ path: data.dbPath, now: () => clock++ });
    assert.deepEqual(tables(db), [
      'check_runs',
      'feature_groups',
      'forge_meta',
      'loop_accepts',
      'loop_attempts',
      'loop_handoffs',
      'loop_large_fields',
      'loop_session_usage',
      'loop_transitions',
      'loops',
      'migrations',
      'plan_amendments',
      'plan_drafts',
      'plans',
      'preferences',
      'review_findings',
      'section_plans',
      'shell_interventions',
    ]);
    assert.deepEqual(
      db.query('SELECT id, name, applied_at FROM migrations ORDER BY id'),
      FORGE_MIGRATIONS.map((m, i) => ({ id: m.id, name: m.name, applied_at: 1_000 + i })),
    );
    assert.equal(db.schemaVersion(), LATEST_SCHEMA_VERSION);
    await db.close();

    // Reopening applies nothing again.
    const again = await openForgeDatabase({ path: data.dbPath, now: () => 9_999 });
    assert.equal(again.query('SELECT * FROM migrations WHERE applied_at = 9999').length, 0);
    assert.equal(again.query('SELECT * FROM migrations').length, FORGE_MIGRATIONS.length);
    await again.close();
  });

  for (const earlier of FORGE_MIGRATIONS.slice(0, -1)) {
    it(`upgrade a database at version ${earlier.id} to the latest, keeping its rows`, async () => {
      const prefix = FORGE_MIGRATIONS.filter((m) => m.id <= earlier.id);
      const old = await openForgeDatabase({ path: data.dbPath, migrations: prefix });
      assert.equal(old.schemaVersion(), earlier.id);
      for (const migration of prefix) SEED_AT_VERSION[migration.id]?.(old);
      const oldTables = tables(old);
      if (earlier.id < 2) assert.ok(!oldTables.includes('loop_handoffs'), 'version 1 has no handoffs table');
      // Half the databases are upgraded from a compacted snapshot, half from the journal alone.
      if (earlier.id % 2 === 1) await old.compact();
      await old.close();

      const db = await openForgeDatabase({ path: data.dbPath });
      assert.equal(db.schemaVersion(), LATEST_SCHEMA_VERSION);
      assert.ok(tables(db).includes('loop_handoffs'));
      assert.ok(indexes(db).includes('review_findings_by_file'), 'the index migration ran');
      assert.deepEqual(
        db.query<{ id: number }>('SELECT id FROM migrations ORDER BY id').map((row) => row.id),
        FORGE_MIGRATIONS.map((m) => m.id),
      );
      assert.equal(db.get<{ n: number }>(`SELECT count(*) AS n FROM loops WHERE name = 'old-loop'`)?.n, 1);
      assert.equal(db.get<{ n: number }>(`SELECT count(*) AS n FROM review_findings WHERE description = 'off by one'`)?.n, 1);
      if (earlier.id >= 2) assert.equal(db.get<{ n: number }>('SELECT count(*) AS n FROM loop_handoffs')?.n, 1);
      assert.ok(tables(db).includes('check_runs'), 'the check log exists');
      assert.equal(db.get<{ source: string }>(`SELECT source FROM review_findings WHERE description = 'off by one'`)?.source, 'auditor', "a finding from before is the auditor's");
      await db.close();
    });
  }

  it('run each migration atomically: a failing migration leaves the database at the previous version', async () => {
    const broken: Migration = {
      id: LATEST_SCHEMA_VERSION + 1,
      name: 'broken',
      up: (tx) => {
        tx.run('CREATE TABLE half_done (x INTEGER)');
        tx.run('INSERT INTO no_such_table VALUES (1)');
      },
    };
    await assert.rejects(openForgeDatabase({ path: data.dbPath, migrations: [...FORGE_MIGRATIONS, broken] }), (error: unknown) => {
      assert.ok(isForgeDatabaseError(error, 'migration_failed'), String(error));
      assert.match(error.message, new RegExp(`to schema version ${broken.id} \\(broken\\): no such table: no_such_table\\. The database is unchanged`));
      return true;
    });
    const db = await openForgeDatabase({ path: data.dbPath });
    assert.equal(db.schemaVersion(), LATEST_SCHEMA_VERSION);
    assert.ok(!tables(db).includes('half_done'));
    await db.close();
  });

  it('refuse a database written by a newer Forge, telling the user to update', async () => {
    const future: Migration = { id: LATEST_SCHEMA_VERSION + 1, name: 'from the future', up: (tx) => void tx.run('CREATE TABLE future (x)') };
    await (await openForgeDatabase({ path: data.dbPath, migrations: [...FORGE_MIGRATIONS, future] })).close();
    try {
      await openForgeDatabase({ path: data.dbPath });
      assert.fail('opened a newer database');
    } catch (error) {
      assert.ok(isForgeDatabaseError(error, 'newer_schema'), String(error));
      assert.match(error.message, new RegExp(`was updated by a newer version of Forge \\(schema changes ${LATEST_SCHEMA_VERSION + 1} `));
      assert.match(error.message, /Update Forge in every VS Code window and the CLI/);
    }
  });

  it('are replayed by another connection that opened before they ran', async () => {
    const older = await openForgeDatabase({ path: data.dbPath, migrations: FORGE_MIGRATIONS.slice(0, 1) });
    const newer = await openForgeDatabase({ path: data.dbPath });
    // The older connection catches up with the newer one's migrations at its next read.
    assert.equal(older.schemaVersion(), LATEST_SCHEMA_VERSION);
    assert.ok(tables(older).includes('loop_handoffs'));
    await older.close();
    await newer.close();
  });
});
