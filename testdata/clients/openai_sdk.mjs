// The official OpenAI SDK, unchanged, against the relay (RELAY_URL) whose target speaks only
// Anthropic Messages. Each check throws on a wrong answer; the last line printed is a JSON
// summary the Go test reads. Run by cmd/modelrelay-server/translate_e2e_test.go.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.RELAY_URL + "/v1", apiKey: "sk-test", maxRetries: 0 });
const model = process.env.MODEL;
const summary = {};

// A plain answer.
const plain = await client.chat.completions.create({
  model, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hello." }],
});
assert.equal(plain.object, "chat.completion");
assert.equal(plain.model, model);
assert.equal(plain.choices[0].message.role, "assistant");
assert.equal(plain.choices[0].message.content, "Hello from the anthropic-only fake.");
assert.equal(plain.choices[0].finish_reason, "stop");
assert.ok(plain.usage.prompt_tokens > 0 && plain.usage.completion_tokens === 7, JSON.stringify(plain.usage));
summary.plain = plain.choices[0].message.content;

// Streamed, with the usage chunk asked for.
const stream = await client.chat.completions.create({
  model, stream: true, stream_options: { include_usage: true },
  messages: [{ role: "user", content: "Say hello." }],
});
let text = "", role = "", finish = "", usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  assert.equal(chunk.object, "chat.completion.chunk");
  if (chunk.usage) usage = chunk.usage;
  const c = chunk.choices[0];
  if (!c) continue;
  if (c.delta.role) role = c.delta.role;
  if (c.delta.content) text += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
assert.equal(role, "assistant");
assert.equal(text, "Hello from the anthropic-only fake.");
assert.equal(finish, "stop");
assert.ok(usage && usage.completion_tokens === 7, JSON.stringify(usage));
assert.ok(chunks >= 4, `${chunks} chunks`);
summary.streamChunks = chunks;

// A tool round trip, streamed: arguments arrive in pieces with the id and name on the first.
const tools = [{ type: "function", function: {
  name: "get_weather", description: "Current weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] } } }];
const ask = { role: "user", content: "What is the weather in Paris?" };
const toolStream = await client.chat.completions.create({ model, stream: true, tools, messages: [ask] });
let id = "", name = "", args = "", pieces = 0, toolFinish = "";
for await (const chunk of toolStream) {
  const c = chunk.choices[0];
  if (!c) continue;
  for (const tc of c.delta.tool_calls ?? []) {
    assert.equal(tc.index, 0);
    if (tc.id) id = tc.id;
    if (tc.function?.name) name = tc.function.name;
    if (tc.function?.arguments) { args += tc.function.arguments; pieces++; }
  }
  if (c.finish_reason) toolFinish = c.finish_reason;
}
assert.equal(name, "get_weather");
assert.equal(toolFinish, "tool_calls");
assert.deepEqual(JSON.parse(args), { city: "Paris", unit: "celsius" });
assert.ok(pieces >= 2, `arguments came in ${pieces} pieces`);
summary.toolPieces = pieces;

const answer = await client.chat.completions.create({
  model, tools,
  messages: [ask,
    { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name, arguments: args } }] },
    { role: "tool", tool_call_id: id, content: "18 degrees and sunny" }],
});
assert.equal(answer.choices[0].message.content, "The tool said: 18 degrees and sunny");
summary.toolAnswer = answer.choices[0].message.content;

// The same call, not streamed.
const call2 = await client.chat.completions.create({ model, tools, tool_choice: "auto", messages: [ask] });
assert.equal(call2.choices[0].finish_reason, "tool_calls");
assert.deepEqual(JSON.parse(call2.choices[0].message.tool_calls[0].function.arguments), { city: "Paris", unit: "celsius" });

// An image.
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const seen = await client.chat.completions.create({
  model, messages: [{ role: "user", content: [
    { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
    { type: "text", text: "What is this?" }] }],
});
assert.equal(seen.choices[0].message.content, `I see an image: image/png, ${png.length} base64 characters`);
summary.image = seen.choices[0].message.content;

// An error from the target, in OpenAI's shape with the status kept.
try {
  await client.chat.completions.create({ model, messages: [{ role: "user", content: "error please" }] });
  assert.fail("no error");
} catch (e) {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.status, 400);
  assert.equal(e.error.message, "the fake refuses: error please");
  assert.equal(e.error.type, "invalid_request_error");
  summary.error = e.error.message;
}

console.log(JSON.stringify(summary));
