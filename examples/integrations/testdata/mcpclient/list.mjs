// Starts an MCP server the way an MCP client's configuration says (command,
// args, the working directory), through the official MCP TypeScript SDK,
// lists its tools and calls one; prints a line each.
//
//   node list.mjs CWD TOOL ARGS-JSON COMMAND [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [cwd, tool, toolArgs, command, ...args] = process.argv.slice(2);
const client = new Client({ name: "cordon-integrations-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, cwd, env: process.env, stderr: "inherit" }));
const { tools } = await client.listTools();
console.log("tools: " + tools.map((t) => t.name).sort().join(" "));
const res = await client.callTool({ name: tool, arguments: JSON.parse(toolArgs) }, undefined, { timeout: 300000 });
const text = res.content.filter((c) => c.type === "text").map((c) => c.text).join(" ");
console.log(`${tool} ${res.isError ? "error" : "ok"}: ${text}`);
await client.close();
