import { identityScenario } from './identity.js';
import type { Scenario } from './scenario.js';

/**
 * Every scenario `npm run bench` runs, in this order, on each store. A new one is a module
 * beside this one that exports a {@link Scenario}, added here.
 */
export const scenarios: Scenario[] = [identityScenario];
