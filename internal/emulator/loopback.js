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
'use strict';

const fs = require('fs');
const net = require('net');

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
