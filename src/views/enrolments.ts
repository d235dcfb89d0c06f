import type { EnrolmentInfo, ProvisionedAgent } from '../services/enrolments.js';
import { isoTimestamp } from '../wire/common.js';
import type { Enrolment, ProvisionedAgent as ProvisionedAgentView } from '../wire/enrolments.js';

/** An enrolled address as its owner sees it: never its key. */
export function enrolmentView(enrolment: EnrolmentInfo): Enrolment {
  return {
    address: enrolment.address,
    name: enrolment.name,
    handle: enrolment.handle,
    created_at: isoTimestamp(enrolment.createdAt),
  };
}

/** An agent just provisioned, with its Agent URI: the one time it is shown. */
export function provisionedAgentView(agent: ProvisionedAgent): ProvisionedAgentView {
  return { ...enrolmentView(agent), agent_uri: agent.agentUri };
}
