import { Type } from '@sinclair/typebox';
import { AgentAddress, Endpoint } from './common.js';

/** `GET /v1/proxy/resolve/{agent_address}`: the agent resolved. */
export const ProxyResolveParams = Type.Object({ agent_address: AgentAddress });

/** Where a sender reaches a proxy agent (the hosted service's `AgentEndpoint`). */
export const ProxyEndpoint = Type.Object(
  {
    url: Endpoint.properties.url,
    weight: Endpoint.properties.weight,
  },
  {
    description:
      'this proxy’s submit URL, which forwards to the agent; the agent’s own URL stays with its owner',
  },
);
