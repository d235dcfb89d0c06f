import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Protocol manifests found by name and by model (docs/almanac.md, "Protocol manifests").
 *
 * - `almanac_manifests.name`, `.version`: the manifest's `metadata.name` and
 *   `metadata.version`, so that a name finds its versions without reading every manifest.
 * - `almanac_manifest_models`: one row per model a stored manifest holds (`model:` and hex),
 *   so that a model's digest finds the manifests that define it.
 *
 * The manifests stored before are read once and indexed.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('almanac_manifests').addColumn('name', 'text').execute();
  await db.schema.alterTable('almanac_manifests').addColumn('version', 'text').execute();
  await db.schema
    .createIndex('almanac_manifests_by_name')
    .on('almanac_manifests')
    .column('name')
    .execute();
  await db.schema
    .createTable('almanac_manifest_models')
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('digest', 'text', (c) =>
      c.notNull().references('almanac_manifests.digest').onDelete('cascade'),
    )
    .addPrimaryKeyConstraint('almanac_manifest_models_pk', ['model', 'digest'])
    .execute();
  const stored = (await db
    .selectFrom('almanac_manifests')
    .select(['digest', 'manifest'])
    .execute()) as {
    digest: string;
    manifest: string;
  }[];
  for (const row of stored) {
    const { name, version, models } = manifestKeys(row.manifest);
    await db
      .updateTable('almanac_manifests')
      .set({ name, version })
      .where('digest', '=', row.digest)
      .execute();
    if (models.length > 0) {
      await db
        .insertInto('almanac_manifest_models')
        .values(models.map((model) => ({ model, digest: row.digest })))
        .execute();
    }
  }
}

/** What a manifest's text says of its name, version and models; nothing it does not say. */
function manifestKeys(text: string): {
  name: string | null;
  version: string | null;
  models: string[];
} {
  const manifest = JSON.parse(text) as {
    metadata?: { name?: unknown; version?: unknown };
    models?: { digest?: unknown }[];
  };
  const name = typeof manifest.metadata?.name === 'string' ? manifest.metadata.name : null;
  const version = typeof manifest.metadata?.version === 'string' ? manifest.metadata.version : null;
  const models = new Set<string>();
  for (const model of Array.isArray(manifest.models) ? manifest.models : []) {
    if (typeof model?.digest === 'string') models.add(model.digest);
  }
  return { name, version, models: [...models] };
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('almanac_manifest_models').execute();
  await db.schema.dropIndex('almanac_manifests_by_name').execute();
  await db.schema.alterTable('almanac_manifests').dropColumn('version').execute();
  await db.schema.alterTable('almanac_manifests').dropColumn('name').execute();
}
