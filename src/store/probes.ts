/**
 * The parts of the store that `npm run bench` uses on their own: its storage ceiling writes
 * the service's own message INSERT on a connection with the service's own settings, and its
 * search scenario seeds the full-text index as registration does. They are gathered here,
 * deliberately, so that nothing else reaches into the store's modules from outside.
 */
export { sqlitePath } from './database.js';
export { openSqliteConnection } from './sqlite-connection.js';
export { insertMessagesQuery, type NewMessage } from './repositories/mailbox.js';
export { fullTextSearch } from './full-text.js';
