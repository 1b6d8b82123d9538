// A small agent on the official MCP TypeScript SDK, for cordon's tests:
// it connects to cordon's gateway, lists the tools, makes the calls it is
// given and prints what it got, a line each.
//
//   node client.mjs CALLS-JSON stdio CMD [ARG...]
//   node client.mjs CALLS-JSON http URL
//
// Over http, the client presents the token MCP_TOKEN, when set.
//
// CALLS-JSON is a list of [tool, arguments] pairs (@FILE: read from FILE); ["#session"] closes the
// session and opens a new one; ["#as", TOKEN] opens one with another
// client's token; ["#wait", TOOL] lists the tools until TOOL
// is among them (a minute at most); ["#resources"] asks for the resources
// and the prompts.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const [calls, mode, ...rest] = process.argv.slice(2);

let token = process.env.MCP_TOKEN;

function transport() {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" });
  }
  if (mode === "http") {
    return new StreamableHTTPClientTransport(new URL(rest[0]), token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : undefined);
  }
  throw new Error(`unknown mode ${mode}`);
}

// With ELICIT=approve or ELICIT=deny the client can ask its user (MCP
// elicitation), and the "user" answers so.
const elicit = process.env.ELICIT;

async function connect() {
  const client = new Client({ name: "ts-agent", version: "1.0.0" }, elicit ? { capabilities: { elicitation: {} } } : {});
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      console.log("asked: " + req.params.message.split("\n")[0]);
      return { action: "accept", content: { approve: elicit === "approve", reason: "answered by the test" } };
    });
  }
  await client.connect(transport());
  const { tools } = await client.listTools();
  console.log("tools: " + tools.map((t) => t.name).join(" "));
  return client;
}

let client = await connect();
for (const [name, args] of JSON.parse(calls.startsWith("@") ? readFileSync(calls.slice(1), "utf8") : calls)) {
  if (name === "#as") {
    await client.close();
    token = args;
    client = await connect();
    continue;
  }
  if (name === "#session") {
    await client.close();
    client = await connect();
    continue;
  }
  if (name === "#wait") {
    const deadline = Date.now() + 60000;
    for (;;) {
      const { tools } = await client.listTools();
      if (tools.some((t) => t.name === args)) {
        console.log("listed: " + args);
        break;
      }
      if (Date.now() > deadline) {
        console.log("not listed: " + args);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    continue;
  }
  if (name === "#resources") {
    console.log("capabilities: " + Object.keys(client.getServerCapabilities()).sort().join(" "));
    for (const [what, ask] of [["resources/list", () => client.listResources()], ["prompts/list", () => client.listPrompts()]]) {
      try {
        await ask();
        console.log(`${what} ok`);
      } catch (err) {
        console.log(`${what} failed: ${err.message}`);
      }
    }
    continue;
  }
  let res;
  try {
    res = await client.callTool({ name, arguments: args }, undefined, { timeout: 600000 });
  } catch (err) {
    console.log(`${name} failed: ${err.message}`);
    continue;
  }
  const text = res.content.filter((c) => c.type === "text").map((c) => c.text).join(" ");
  console.log(`${name} ${res.isError ? "error" : "ok"}: ${text}`);
}
await client.close();
