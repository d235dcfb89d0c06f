import {
  SerializerSelector,
  type Serializer,
  type SerializerFactory,
} from '@fastify/fast-json-stringify-compiler';

/**
 * Answers are written by fast-json-stringify, which turns each response schema into a function
 * when a Fastify instance starts: about a second of compiling for this service's routes. The
 * functions depend on the schemas alone (a route's, and the shared ones it may refer to), so
 * they are kept for the process: a second server in it (a replica, a test's) reuses them and
 * starts in a fraction of the time. The key is the schemas' JSON, never their identity, for
 * routes build their schemas afresh.
 */
const compile = SerializerSelector();
const compiled = new Map<string, Serializer>();

export const sharedSerializers: SerializerFactory = (externalSchemas, options) => {
  const build = compile(externalSchemas, options);
  const context = JSON.stringify([externalSchemas, options]);
  return (route) => {
    const key = `${context}\n${JSON.stringify(route.schema)}`;
    let serialize = compiled.get(key);
    if (!serialize) {
      serialize = build(route);
      compiled.set(key, serialize);
    }
    return serialize;
  };
};
