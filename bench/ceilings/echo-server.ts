import { createServer } from 'node:http';

/**
 * The HTTP ceiling's server, run as its own process: node:http alone, parsing each JSON
 * body and sending it back, the least any JSON API does per request.
 */
const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString('utf8')));
    response.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    response.end(body);
  });
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`listening on ${port}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
