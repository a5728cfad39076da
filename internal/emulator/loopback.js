// Preloaded (node -r) into every emulator that package emulator starts.
//
// It keeps the emulator private to the test that started it, whatever the
// emulator itself would do:
//
// - Every TCP listener is bound to 127.0.0.1 on a port the kernel picks. The
//   port the emulator asked for becomes a label only: once listening, the line
//   "<asked> <bound>" is appended to the file named by
//   BENTHOS_KINESIS_EMULATOR_REPORT, which is how the test learns the port
//   without racing other processes for a "free" one.
// - The process exits when its parent (the test binary) is gone, and after
//   BENTHOS_KINESIS_EMULATOR_LIFETIME_MS milliseconds in any case.
// - A request its client abandons before the body is sent (a canceled
//   context, a killed process) does not take the emulator down: dynalite
//   throws the request's "aborted" error, which would end the process in the
//   middle of a test that is fencing or killing instances on purpose.
'use strict';

const fs = require('fs');
const http = require('http');
const net = require('net');

// The error a server-side request emits when its client closes the
// connection before the request ended; nobody is left to answer, so the
// event is dropped. Every other error is emitted as before.
const originalEmit = http.IncomingMessage.prototype.emit;
http.IncomingMessage.prototype.emit = function (event, ...args) {
  if (event === 'error' && args[0] && args[0].code === 'ECONNRESET' &&
    args[0].message === 'aborted' && this.socket && this.socket.server) {
    return false;
  }
  return originalEmit.call(this, event, ...args);
};

const reportPath = process.env.BENTHOS_KINESIS_EMULATOR_REPORT;
const originalListen = net.Server.prototype.listen;

// isTCP tells listen arguments that open a TCP port from those that open a
// pipe or reuse an inherited handle, which are left untouched.
function isTCP(first) {
  if (first !== null && typeof first === 'object') {
    return first.path === undefined && first.fd === undefined &&
      first.handle === undefined && first._handle === undefined;
  }
  if (typeof first === 'string') {
    return /^\d+$/.test(first);
  }
  return first === undefined || typeof first === 'number';
}

net.Server.prototype.listen = function (...args) {
  if (!isTCP(args[0])) {
    return originalListen.apply(this, args);
  }
  const callback = typeof args[args.length - 1] === 'function' ? args.pop() : undefined;
  const first = args[0];
  const options = {};
  let asked;
  if (first !== null && typeof first === 'object') {
    asked = first.port;
    if (first.backlog !== undefined) options.backlog = first.backlog;
    if (first.exclusive !== undefined) options.exclusive = first.exclusive;
  } else {
    asked = first;
    // listen(port, [host], [backlog]): a number after the port is the backlog.
    const backlog = args.slice(1).find((a) => typeof a === 'number');
    if (backlog !== undefined) options.backlog = backlog;
  }
  options.host = '127.0.0.1';
  options.port = 0;
  if (reportPath) {
    this.once('listening', () => {
      fs.appendFileSync(reportPath, `${Number(asked) || 0} ${this.address().port}\n`);
    });
  }
  return callback ? originalListen.call(this, options, callback) : originalListen.call(this, options);
};

const parentAtStart = process.ppid;
setInterval(() => {
  if (process.ppid !== parentAtStart) {
    process.stderr.write('emulator: parent process is gone, exiting\n');
    process.exit(70);
  }
}, 1000).unref();

const lifetime = Number(process.env.BENTHOS_KINESIS_EMULATOR_LIFETIME_MS);
if (lifetime > 0) {
  setTimeout(() => {
    process.stderr.write(`emulator: lifetime of ${lifetime} ms is over, exiting\n`);
    process.exit(71);
  }, lifetime).unref();
}
