// The official Anthropic SDK, unchanged, against the relay (RELAY_URL) whose target speaks only
// OpenAI chat. Each check throws on a wrong answer; the last line printed is a JSON summary the
// Go test reads. Run by cmd/modelrelay-server/translate_e2e_test.go.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const client = new Anthropic({ baseURL: process.env.RELAY_URL, apiKey: "sk-ant-test", maxRetries: 0 });
const model = process.env.MODEL;
const summary = {};

// A plain answer.
const plain = await client.messages.create({
  model, max_tokens: 64, system: "Be brief.",
  messages: [{ role: "user", content: "Say hello." }],
});
assert.equal(plain.type, "message");
assert.equal(plain.role, "assistant");
assert.equal(plain.model, model);
assert.match(plain.id, /^msg_/);
assert.equal(plain.content[0].type, "text");
assert.equal(plain.content[0].text, "Hello from the openai-only fake.");
assert.equal(plain.stop_reason, "end_turn");
assert.ok(plain.usage.input_tokens > 0 && plain.usage.output_tokens === 7, JSON.stringify(plain.usage));
summary.plain = plain.content[0].text;

// The same, streamed: the raw events in Anthropic's order, and the SDK's assembled message.
const events = [];
const stream = client.messages.stream({ model, max_tokens: 64, messages: [{ role: "user", content: "Say hello." }] });
stream.on("streamEvent", (e) => events.push(e.type));
const streamed = await stream.finalMessage();
assert.equal(streamed.content[0].text, "Hello from the openai-only fake.");
assert.equal(streamed.stop_reason, "end_turn");
const deltas = events.filter((t) => t === "content_block_delta").length;
assert.ok(deltas >= 2, `text arrived in ${deltas} deltas`);
assert.deepEqual(events.filter((t) => t !== "content_block_delta"),
  ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"]);
summary.streamEvents = events;

// A tool round trip, streamed: the arguments arrive as input_json_delta pieces.
const tools = [{
  name: "get_weather", description: "Current weather in a city.",
  input_schema: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] },
}];
const ask = { role: "user", content: "What is the weather in Paris?" };
const partials = [];
const toolStream = client.messages.stream({ model, max_tokens: 128, tools, messages: [ask] });
toolStream.on("streamEvent", (e) => {
  if (e.type === "content_block_delta" && e.delta.type === "input_json_delta") partials.push(e.delta.partial_json);
});
const call = await toolStream.finalMessage();
assert.equal(call.stop_reason, "tool_use");
const use = call.content.find((b) => b.type === "tool_use");
assert.ok(use, JSON.stringify(call.content));
assert.equal(use.name, "get_weather");
assert.deepEqual(use.input, { city: "Paris", unit: "celsius" });
assert.ok(partials.length >= 2, `arguments came in ${partials.length} pieces`);
summary.toolPieces = partials.length;

const answer = await client.messages.create({
  model, max_tokens: 128, tools,
  messages: [ask, { role: "assistant", content: call.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18 degrees and sunny" }] }],
});
assert.equal(answer.content[0].text, "The tool said: 18 degrees and sunny");
summary.toolAnswer = answer.content[0].text;

// The same call, not streamed.
const call2 = await client.messages.create({ model, max_tokens: 128, tools, tool_choice: { type: "auto" }, messages: [ask] });
assert.equal(call2.stop_reason, "tool_use");
assert.deepEqual(call2.content.find((b) => b.type === "tool_use").input, { city: "Paris", unit: "celsius" });

// An image.
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const seen = await client.messages.create({
  model, max_tokens: 64,
  messages: [{ role: "user", content: [
    { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
    { type: "text", text: "What is this?" }] }],
});
assert.equal(seen.content[0].text, `I see an image: image/png, ${png.length} base64 characters`);
summary.image = seen.content[0].text;

// An error from the target, in Anthropic's shape with the status kept.
try {
  await client.messages.create({ model, max_tokens: 64, messages: [{ role: "user", content: "error please" }] });
  assert.fail("no error");
} catch (e) {
  assert.ok(e instanceof Anthropic.BadRequestError, String(e));
  assert.equal(e.status, 400);
  assert.equal(e.error.type, "error");
  assert.equal(e.error.error.type, "invalid_request_error");
  assert.equal(e.error.error.message, "the fake refuses: error please");
  summary.error = e.error.error.message;
}

// count_tokens.
const counted = await client.messages.countTokens({ model, messages: [{ role: "user", content: "Count these words, please." }] });
assert.ok(counted.input_tokens > 0, JSON.stringify(counted));
summary.countTokens = counted.input_tokens;

console.log(JSON.stringify(summary));
