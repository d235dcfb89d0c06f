/**
 * The parts of the store that `npm run bench` measures on their own (its storage ceiling
 * writes the service's own message INSERT on a connection with the service's own settings).
 * They are gathered here, deliberately, so that nothing else reaches into the store's
 * modules from outside.
 */
export { openSqliteConnection, sqlitePath } from './database.js';
export { insertMessagesQuery, type NewMessage } from './repositories/mailbox.js';
