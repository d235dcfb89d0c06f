import { almanacScenario } from './almanac.js';
import { identityScenario } from './identity.js';
import { mailboxListScenario } from './mailbox-list.js';
import { mailboxSubmitScenario } from './mailbox-submit.js';
import type { Scenario } from './scenario.js';

/**
 * Every scenario `npm run bench` runs, in this order, on each store. A new one is a module
 * beside this one that exports a {@link Scenario}, added here.
 */
export const scenarios: Scenario[] = [
  identityScenario,
  mailboxSubmitScenario,
  mailboxListScenario,
  almanacScenario,
];
