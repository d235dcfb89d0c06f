import { a2aScenario } from './a2a.js';
import {
  activityEventsScenario,
  activityStreamsScenario,
  activityTimelineScenario,
} from './activity.js';
import { almanacScenario } from './almanac.js';
import { chatRoundTripScenario, chatSessionsFollowingScenario } from './chat.js';
import { federationScenario } from './federation.js';
import { hostingScenario } from './hosting.js';
import { identityScenario } from './identity.js';
import { mailboxDeliveryScenario } from './mailbox-delivery.js';
import { mailboxHeldScenario } from './mailbox-held.js';
import { mailboxListScenario } from './mailbox-list.js';
import { mailboxSubmitScenario, mailboxSubmitUntracedScenario } from './mailbox-submit.js';
import { mcpScenario } from './mcp.js';
import { realAgentsScenario } from './real-agents.js';
import type { Scenario } from './scenario.js';
import { searchScenario } from './search.js';

/**
 * Every scenario `npm run bench` runs, in this order, on each store. A new one is a module
 * beside this one that exports a {@link Scenario}, added here.
 */
export const scenarios: Scenario[] = [
  identityScenario,
  mailboxSubmitScenario,
  mailboxSubmitUntracedScenario,
  mailboxListScenario,
  mailboxDeliveryScenario,
  mailboxHeldScenario,
  realAgentsScenario,
  almanacScenario,
  federationScenario,
  searchScenario,
  activityEventsScenario,
  activityStreamsScenario,
  activityTimelineScenario,
  chatRoundTripScenario,
  chatSessionsFollowingScenario,
  hostingScenario,
  mcpScenario,
  a2aScenario,
];
