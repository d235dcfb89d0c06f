import type { Server, Socket } from 'node:net';

/**
 * Closes, as soon as it is accepted, any connection beyond `max` open at once from one
 * client address, so that one client cannot take every socket (and file descriptor) the
 * process has. `refused` hears of each one closed. `max` 0 sets no limit. Connections from
 * an address `exempt` names (a trusted reverse proxy, which carries many clients) are not
 * counted.
 */
export function limitConnectionsPerAddress(
  server: Server,
  max: number,
  refused: (address: string) => void = () => {},
  exempt: (address: string) => boolean = () => false,
): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    if (exempt(address)) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      refused(address);
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}
