import type { Store } from '../../src/store/index.js';
import type { DialectName } from '../../src/store/index.js';
import type { Ceilings } from '../ceilings/index.js';
import type { Scenario } from '../scenarios/scenario.js';
import type { Build } from './builds.js';
import { freshDatabase } from './databases.js';
import type { LoadProfile } from './load.js';
import type { Measure } from './report.js';
import { openStore } from './seed.js';
import { startService } from './server.js';

export interface ScenarioRun {
  measures: Measure[];
  /** The server's peak resident memory over the scenario, in bytes. */
  peakRss: number;
}

/**
 * Runs `scenario` once against a fresh server of `build` over a fresh database of `dialect`,
 * then stops the server and drops the database, whether the scenario succeeded or not.
 */
export async function runScenario(options: {
  build: Build;
  scenario: Scenario;
  dialect: DialectName;
  ceilings: Ceilings;
  profile: LoadProfile;
  /** Arguments for Node in the server process, such as `--cpu-prof`. */
  nodeArgs?: string[];
}): Promise<ScenarioRun> {
  const { build, scenario, dialect } = options;
  const settings = { ...scenario.settings, ...(await scenario.prepare?.()) };
  const database = await freshDatabase(dialect);
  const service = await startService(
    database,
    settings,
    options.nodeArgs ?? [],
    build.root,
    scenario.ownMemoryOnly,
  );
  let store: Store | undefined;
  const seeder = build.seed(database.url);
  let measures: Measure[];
  let peakRss: number;
  try {
    measures = await scenario.run({
      dialect,
      service,
      store: () => (store ??= openStore(database.url)),
      seedMessages: (seed) => seeder.seedMessages(seed),
      profile: options.profile,
      ceilings: options.ceilings,
    });
  } finally {
    peakRss = await service.stop();
    await seeder.close();
    await store?.close();
    await database.drop();
  }
  return { measures, peakRss };
}
