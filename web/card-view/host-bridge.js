// The browser tests' MCP Apps host side (tests/browser/host.html), bundled by build.mjs into
// tests/browser/app-bridge.bundle.js, a classic script that sets globalThis.McpAppBridge.
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
