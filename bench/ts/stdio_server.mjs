// The official TypeScript SDK's stdio server for bench/stdio_e2e.py: the same tool as the
// Python servers there (input_required with a form elicitation and a fixed requestState, then
// the result once the retry carries the accepted answer and the echoed state), on the SDK's
// own defaults (requestState unsealed, as a stdio server usually runs).
import { McpServer, acceptedContent, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

const STATE = "awaiting-confirmation";
const EXPECTED = "Confirmed (state-ok).";
const SCHEMA = {
  type: "object",
  properties: { ok: { type: "boolean", description: "Go ahead?" } },
  required: ["ok"],
};

serveStdio(() => {
  const server = new McpServer(
    { name: "stdio-e2e-ts", version: "1.0.0" },
    { capabilities: { tools: {} } },
  );
  server.registerTool(
    "test_input_required_result_request_state",
    { description: "Asks for a confirmation, then confirms." },
    async (ctx) => {
      const req = ctx.mcpReq;
      const content = acceptedContent(req.inputResponses, "confirm");
      if (req.requestState() !== STATE || content?.ok !== true) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: "Please confirm to continue",
              requestedSchema: SCHEMA,
            }),
          },
          requestState: STATE,
        });
      }
      return { content: [{ type: "text", text: EXPECTED }] };
    },
  );
  return server;
});
