// grpc-js's `net`, in the bundle (issue 13, cold start).
//
// grpc-js asks `net.isIPv6` (and `net.isIP`) of every address it resolves, connects to and logs.
// Node's IPv6 test is one large regular expression that V8 compiles at its first use: ≈ 3 ms of
// every `ping`, to learn that 127.0.0.1 or a host name is no IPv6 address. Every IPv6 address has
// a colon, so grpc-js's `net` answers the rest without the regular expression: same answers,
// everything else is Node's `net` itself (its prototype).

/** The module grpc-js's `require("net")` gets (CommonJS, like grpc-js). */
export const grpcNetSource = `const net = require('node:net');
const isIPv6 = (s) => String(s).includes(':') && net.isIPv6(s);
module.exports = Object.assign(Object.create(net), { isIPv6, isIP: (s) => (net.isIPv4(s) ? 4 : isIPv6(s) ? 6 : 0) });
`;

/** The esbuild plugin: `net` required from inside @grpc/grpc-js resolves to grpcNetSource. */
export const grpcNet = {
  name: 'grpc-net-ipv6-colon-first',
  setup(b) {
    b.onResolve({ filter: /^net$/ }, (args) => (/[\\/]@grpc[\\/]grpc-js[\\/]/.test(args.importer) ? { path: 'grpc-net', namespace: 'grpc-net' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'grpc-net' }, () => ({ contents: grpcNetSource, loader: 'js' }));
  },
};
