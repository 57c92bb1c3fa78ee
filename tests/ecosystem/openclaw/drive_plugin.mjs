// Drives the real @mem0/openclaw-mem0 plugin the way OpenClaw's gateway does, without the
// gateway: register() with a host API that records the hooks, then the two hooks an agent
// turn fires — agent_end (auto-capture) and before_prompt_build (auto-recall) — so the
// plugin's own code makes its own HTTP calls to the Mem0 API it is configured with.
// Usage: node drive_plugin.mjs <capture|recall> <baseUrl> <apiKey> <userId> <text>
// Prints one JSON line: {hooks, result}.
import plugin from "@mem0/openclaw-mem0";

const [step, baseUrl, apiKey, userId, text] = process.argv.slice(2);
const hooks = {};
// The plugin's agent_end hook starts its add() and returns without awaiting it (the gateway
// process lives on); here the step waits for the line the plugin logs when the add settles.
let settled;
const captureSettled = new Promise((resolve) => {
  settled = resolve;
});
const SETTLED = /auto-captured|capture failed|skipping (auto-)?capture/;
const log = (...parts) => {
  const line = parts.join(" ");
  if (SETTLED.test(line)) settled(line);
  process.stderr.write(line + "\n");
};
const noop = () => undefined;
const host = {
  id: "openclaw-mem0",
  pluginConfig: {
    mode: "platform",
    baseUrl,
    apiKey,
    userId,
    autoRecall: true,
    autoCapture: true,
    searchThreshold: 0,
  },
  registrationMode: "full",
  logger: { info: log, warn: log, error: log, debug: noop },
  on: (name, handler) => {
    (hooks[name] ||= []).push(handler);
  },
  resolvePath: (path) => path,
};
const api = new Proxy(host, { get: (target, key) => (key in target ? target[key] : noop) });
(plugin.register ?? plugin.default?.register).call(plugin, api);

const ctx = { sessionKey: "agent:main:cadre-test", trigger: "user" };
let result = null;
if (step === "capture") {
  const event = {
    success: true,
    messages: [
      { role: "user", content: text },
      { role: "assistant", content: "Noted: your weekly reports will be in English." },
    ],
  };
  for (const handler of hooks.agent_end ?? []) result = await handler(event, ctx);
  const timeout = new Promise((resolve) => setTimeout(() => resolve("timed out"), 120000));
  result = { settled: await Promise.race([captureSettled, timeout]) };
} else {
  for (const handler of hooks.before_prompt_build ?? []) {
    result = (await handler({ prompt: text }, ctx)) ?? result;
  }
}
process.stdout.write(JSON.stringify({ hooks: Object.keys(hooks), result }) + "\n");
// The SDK keeps timers (telemetry, retries) alive: the step is done.
process.exit(0);
