/**
 * Lower-case labels of letters, digits and inner hyphens, at least two: `alice.agent`. In a
 * module of its own, with no imports, so that the web pages check names by the same rule
 * without bundling the schema library.
 */
export const DOMAIN_NAME_PATTERN =
  '^(?=.{3,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$';
