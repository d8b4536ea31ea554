// The card view's script (bundled by build.mjs into maya_tools/static/card-view.js, which
// maya_tools/app_card.py inlines into card-view.html). Door's strings reach the page only through
// textContent: never markup.
import { App, applyDocumentTheme, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";

const $ = (id) => document.getElementById(id);
const TITLES = { add_node_pool: "Add node pool", scale_node_pool: "Scale node pool",
  relabel_node_pool: "Relabel node pool", remove_node_pool: "Remove node pool", replace_node: "Replace node",
  change_pool_tier: "Change pool tier" };
const KINDS = { "pool.create": "Creating pool", "pool.update": "Updating pool", "pool.delete": "Removing pool",
  "node.replace": "Replacing node" };
const STATES = { running: "in progress", succeeded: "done", failed: "failed" };
const STEP_STATES = { pending: "to do", sending: "sending", waiting: "waiting", done: "done", failed: "failed",
  stopped: "stopped", skipped: "skipped", outcome_unknown: "outcome unknown" };
// A plan card's statuses once it can go no further (confirmation_cards/plans.py).
const ENDED = ["executed", "stopped", "failed", "stale", "outcome_unknown", "declined", "expired"];
// Why this view cannot approve, and what the person can do instead (one sentence each).
const CANNOT = {
  "no-secret": "Your MCP client did not declare MCP Apps support (the io.modelcontextprotocol/ui extension) "
    + "to maya-tools, so maya-tools gave this view no approval key.",
  "no-server-tools": "This host does not let its views call the server's tools (it offered no serverTools), "
    + "so Approve and Decline could not reach maya-tools.",
};
const INSTEAD = "Approve or decline it where your client asks you (a form or a one-time approval link), or in a "
  + "client that declares MCP Apps or MCP elicitation. Nothing changes until then; unapproved, the card expires.";
const WAITING_INSTEAD = "A person who may approve it does so on the server's review page (/cards); nothing changes "
  + "until then; unapproved, the card expires.";
// Following Door's operation after an approval: bounded in rate and in total time.
const POLL_MS = 2000, POLL_LATER_MS = 5000, POLL_FAST_FOR_MS = 60 * 1000, FOLLOW_FOR_MS = 15 * 60 * 1000;
// A plan waits up to MAYA_PLAN_STEP_TIMEOUT_SECONDS (30 minutes by default) per wait step, two with keep_name.
const PLAN_FOLLOW_FOR_MS = 75 * 60 * 1000;
const MAX_FAILED_READS = 3;
let approval = null, expiresAt = null, timer = null, shown = null, following = null;

function text(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}
// A change in words, as the text card writes it (confirmation_cards.render.change_words): no JSON object.
const NODE_REPLACED = "drained and deleted; Door adds a replacement";
function words(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.map(words).join(", ") || "none";
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return keys.length ? keys.map((k) => `“${k}”=${words(value[k])}`).join(", ") : "none";
  }
  return typeof value === "string" ? `“${value}”` : text(value);
}
function isDefault(v) {
  return v === null || v === false || (typeof v === "object" && !Array.isArray(v) && !Object.keys(v).length);
}
function changeCells(c) {
  if (c.field === "node" && c.before && typeof c.before === "object") {
    return [`node ${text(c.before.name)}`, text(c.before.status || "unlisted"), NODE_REPLACED];
  }
  if ((c.before === null && isDefault(c.after)) || (c.after === null && isDefault(c.before))) return null;
  return [c.field, words(c.before), words(c.after)];
}
function row(parent, cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) { const td = document.createElement("td"); td.textContent = text(cell); tr.append(td); }
  parent.append(tr);
}
function money(n) { return typeof n === "number" ? "$" + n.toFixed(2) + "/h" : "—"; }
function capacity(c) {
  return c ? `${text(c.total_vcpu)} vCPU, ${text(c.total_memory_gib)} GiB memory, ${text(c.total_volume_gib)} GiB disk` : "—";
}
function stopCountdown() {
  clearInterval(timer); timer = null;
  $("time").hidden = true;
}
// The decision is final: the outcome is said here and nowhere else, the buttons and the time left go.
function settled(message, ok) {
  approval = null;
  stopCountdown();
  $("approve").disabled = true; $("decline").disabled = true;
  $("buttons").hidden = true; $("cannot").hidden = true;
  $("outcome").hidden = false;
  $("outcome").textContent = message; $("outcome").className = "outcome " + (ok ? "ok" : "bad");
}
// What the view says of a decision: its own words for an approval or a decline (the server's are
// written for the model and repeat themselves here: "Declined (declined on the app card)", "Door
// accepted … Door accepted … Follow it with get_cluster_operations", which the view does itself), the
// server's for anything else (stale, expired, failed, refused), which names the reason.
const SAID = { executed: "Approved: Door accepted the change.", declined: "Declined: nothing was changed." };
function said(status, message, plan) {
  return (plan && status !== "declined" ? null : SAID[status]) || text(message);
}
function tick() {
  if (!expiresAt || timer === null) return;
  const left = Math.max(0, Math.round((expiresAt - Date.now()) / 1000));
  if (left === 0) return settled("Expired: nothing was changed, and this card can no longer be approved.", false);
  $("time").textContent = `Expires in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}
function progress(state, words) {
  $("progress-box").hidden = false;
  $("progress-bar").hidden = state !== "running";
  $("progress").dataset.state = state;
  $("progress").textContent = words;
}
function stopFollowing() {
  if (following) clearTimeout(following.timer);
  following = null;
}
// Follow something Door does: ``read`` gets it (null when it could not), ``show`` says it and tells
// whether it has ended.
function follow(read, show, words, forMs = FOLLOW_FOR_MS) {
  stopFollowing();
  following = { read, show, forMs, since: Date.now(), failedReads: 0, timer: null };
  progress("running", words);
  poll(following);
}
function followOperation(clusterId, operationId) {
  const read = async () => {
    const result = await app.callServerTool({ name: "get_cluster_operations", arguments: { cluster: clusterId } });
    return !result.isError && result.structuredContent ? result.structuredContent.operations || [] : null;
  };
  const show = (ops) => {
    const op = ops.find((o) => o.id === operationId);
    if (!op) {
      progress("unknown", `Door no longer lists operation ${operationId}; check the pool or node.`);
      return true;
    }
    const step = op.status === "failed" ? op.error || op.message : op.message;
    progress(op.status, `${KINDS[op.kind] || text(op.kind)} ${text(op.target)}: ${STATES[op.status] || text(op.status)}`
      + (step ? ` (${text(step)})` : ""));
    return op.status !== "running";
  };
  follow(read, show, `Following Door's operation ${operationId}…`);
}
async function readCard(cardId) {
  const result = await app.callServerTool({ name: "get_card", arguments: { card_id: cardId } });
  return !result.isError && result.structuredContent ? result.structuredContent.card || null : null;
}
// A plan's steps, read from get_card until the plan ends; its final status is the outcome's to say.
function followPlan(cardId) {
  const show = (card) => {
    showSteps(card);
    if (ENDED.includes(card.status)) {
      $("progress-box").hidden = true;
      settled(said(card.status, card.result && card.result.message, true), card.status === "executed");
      return true;
    }
    const now = card.steps.find((s) => s.status !== "done" && s.status !== "skipped");
    progress("running", now ? `Step ${now.index} of ${card.steps.length}: ${text(now.title)}: `
      + (STEP_STATES[now.status] || text(now.status)) : "Finishing the plan…");
    return false;
  };
  follow(() => readCard(cardId), show, "Following the plan…", PLAN_FOLLOW_FOR_MS);
}
async function poll(f) {
  let got = null;
  $("progress").dataset.reads = String(Number($("progress").dataset.reads || 0) + 1);
  try { got = await f.read(); } catch (error) { got = null; }
  if (following !== f) return; // torn down, or another card shown, while the read was under way
  if (got === null) {
    f.failedReads += 1;
    if (f.failedReads >= MAX_FAILED_READS) {
      progress("unknown", "Could not read Door's progress; follow it with get_cluster_operations.");
      return stopFollowing();
    }
    progress("running", `Could not read Door's progress (${f.failedReads} of ${MAX_FAILED_READS} tries); trying again.`);
  } else {
    f.failedReads = 0;
    if (f.show(got)) return stopFollowing();
  }
  const elapsed = Date.now() - f.since;
  if (elapsed >= f.forMs) {
    progress("unknown", `Still running after ${f.forMs / 60000} minutes; stopped following. `
      + "Follow it with get_cluster_operations.");
    return stopFollowing();
  }
  f.timer = setTimeout(() => poll(f), elapsed < POLL_FAST_FOR_MS ? POLL_MS : POLL_LATER_MS);
}
function showSteps(card) {
  const steps = $("steps"); steps.replaceChildren();
  for (const s of card.steps || []) {
    row(steps, [`${s.index}. ${text(s.title)} (${text(s.takes)})`, STEP_STATES[s.status] || s.status,
      s.operation_id || (s.kind === "wait" ? "reads only" : null)]);
    steps.lastChild.dataset.status = s.status;
  }
  $("steps-box").hidden = !(card.steps || []).length;
}
// Why the person cannot decide here, or null when they can: the server gives the secret only to a
// client that declared the Apps extension, and Approve needs a host that passes tools/call on.
function cannotApprove(card, meta) {
  // The team's policy (MAYA_POLICY) waits for other people: the server sent the reason, and no secret.
  if (meta && meta.cardId === card.id && typeof meta.waiting === "string") return "waiting";
  if (!(meta && meta.cardId === card.id)) return "no-secret";
  if (!(app.getHostCapabilities() || {}).serverTools) return "no-server-tools";
  return null;
}
// A host with MCP Apps and no URL elicitation (Claude, ChatGPT): the person has not connected a Door
// token, and the server's result carries, in _meta only, the connect link made for them and the tool
// to retry. The view opens the link through the host (ui/open-link) and retries through tools/call.
const CONNECT_NOTE = "Nothing was sent to Door. Open the page, sign in and paste your Door API token; "
  + "then press Try again here, or ask again.";
let connecting = null, toolArguments = {};
function showConnect(meta) {
  connecting = meta;
  $("waiting").hidden = true; $("card").hidden = true; $("connect").hidden = false;
  $("connect-why").textContent = (meta.refused
    ? "Door refused the Door API token you had connected, so maya-tools forgot it. "
    : "maya-tools calls Door with your own Door API token, and you have not connected one yet. ") + CONNECT_NOTE;
  $("connect-retry").disabled = !(app.getHostCapabilities() || {}).serverTools;
}
function connectSaid(message, ok) {
  $("connect-said").hidden = false; $("connect-said").textContent = message;
  $("connect-said").className = "outcome " + (ok ? "ok" : "bad");
}
async function openConnect() {
  if (!connecting) return;
  try {
    const { isError } = await app.openLink({ url: connecting.url });
    connectSaid(isError ? `Your host did not open the page: open ${connecting.url} in your browser.`
      : "The connect page is open in your browser. Once your Door token is connected, press Try again.", !isError);
  } catch (error) {
    connectSaid(`Your host did not open the page: open ${connecting.url} in your browser.`, false);
  }
}
async function retryConnect() {
  if (!connecting) return;
  $("connect-retry").disabled = true;
  try {
    const result = await app.callServerTool({ name: connecting.tool, arguments: toolArguments });
    $("connect-retry").disabled = false;
    if ((result._meta || {})["maya-tools/connect"]) return connectSaid("Not connected yet: connect your Door token on the page first.", false);
    if (result.isError) return connectSaid((result.content || []).map((c) => c.text || "").join(" "), false);
    connecting = null; $("connect").hidden = true;
    render(result);
  } catch (error) {
    $("connect-retry").disabled = false;
    connectSaid("The call could not be sent: " + String(error && error.message || error), false);
  }
}
function render(result) {
  const data = result.structuredContent || {};
  const card = data.card;
  const connect = (result._meta || {})["maya-tools/connect"];
  if (!card && connect && typeof connect.url === "string") return showConnect(connect);
  if (!card) return;
  stopFollowing(); $("progress-box").hidden = true;
  shown = card;
  $("waiting").hidden = true; $("card").hidden = false;
  $("title").textContent = TITLES[card.action] || text(card.action);
  $("target").textContent = `${text(card.target)} on cluster ${text(card.cluster_name)}`;
  const diff = $("diff"); diff.replaceChildren();
  for (const change of card.diff || []) { const cells = changeCells(change); if (cells) row(diff, cells); }
  const cap = $("capacity"); cap.replaceChildren();
  row(cap, ["Capacity", capacity(card.capacity_before), capacity(card.capacity_after)]);
  row(cap, ["Price", money(card.price_before), money(card.price_after)]);
  const plan = (card.steps || []).length > 0;
  $("peak").hidden = !plan;
  $("peak").textContent = plan ? `At the peak (both pools): ${capacity(card.capacity_peak)}, ${money(card.price_peak)}`
    + (typeof card.credit_needed === "number" ? `; the peak needs $${card.credit_needed.toFixed(2)} of credit (R-CREDIT-01)` : "")
    : "";
  showSteps(card);
  const warnings = $("warnings"); warnings.replaceChildren();
  for (const w of card.warnings || []) { const li = document.createElement("li"); li.textContent = text(w.message) + (w.rule ? ` [${w.rule}]` : ""); warnings.append(li); }
  $("warnings-box").hidden = !(card.warnings || []).length;
  const request = (r) => `${text(r.method)} ${text(r.path)}\n${JSON.stringify(r.body ?? {}, null, 2)}`;
  $("request").textContent = plan ? card.steps.map((s) => `${s.index}. ${request(s)}`).join("\n\n") : request(card);
  expiresAt = Date.parse(card.expires_at);
  if (card.status !== "pending") {
    settled(plan && card.status === "executing" ? "Approved: the plan is running."
      : said(card.status, data.message, plan), card.status === "executed" || card.status === "executing");
    if (plan && card.status === "executing") followPlan(card.id);
    else if (card.status === "executed" && data.operation_id) followOperation(card.cluster_id, data.operation_id);
    return;
  }
  const meta = (result._meta || {})["maya-tools/approval"];
  const why = cannotApprove(card, meta);
  approval = why === null ? meta : null;
  $("approve").disabled = !approval; $("decline").disabled = !approval;
  $("buttons").hidden = !approval; $("outcome").hidden = true;
  $("cannot").hidden = why === null; $("cannot").dataset.reason = why || "";
  $("cannot-why").textContent = why === "waiting" ? `The team's policy: this card ${meta.waiting}.`
    : why ? CANNOT[why] : "";
  $("cannot-instead").textContent = why === "waiting" ? WAITING_INSTEAD : INSTEAD;
  $("time").hidden = false;
  clearInterval(timer); timer = setInterval(tick, 1000); tick();
}
async function decide(decision) {
  if (!approval) return;
  const { cardId, secret } = approval;
  $("approve").disabled = true; $("decline").disabled = true;
  // decide_card answers a plan once it ends; meanwhile its steps are followed through get_card.
  const plan = shown && shown.id === cardId && (shown.steps || []).length > 0;
  if (plan && decision === "approve") {
    stopCountdown(); $("buttons").hidden = true;
    followPlan(cardId);
  }
  try {
    const result = await app.callServerTool({ name: "decide_card", arguments: { card_id: cardId, secret, decision } });
    const data = result.structuredContent || {};
    const executed = !result.isError && data.status === "executed";
    const words = data.message || (result.content || []).map((c) => c.text || "").join(" ");
    if (plan) {
      stopFollowing(); $("progress-box").hidden = true;
      readCard(cardId).then((card) => card && shown && shown.id === cardId && showSteps(card), () => null);
    }
    settled(result.isError ? words : said(data.status, words, plan), executed);
    if (executed && !plan && data.operation_id && shown && shown.id === cardId) {
      followOperation(shown.cluster_id, data.operation_id);
    }
  } catch (error) {
    if (plan) stopFollowing();
    settled("The decision could not be sent: " + String(error && error.message || error), false);
  }
}
function theme(ctx) {
  if (!ctx) return;
  if (ctx.theme) applyDocumentTheme(ctx.theme);
  if (ctx.styles && ctx.styles.variables) applyHostStyleVariables(ctx.styles.variables);
}
const app = new App({ name: "maya-tools card", version: "1" });
app.ontoolresult = render;
app.ontoolinput = (params) => { toolArguments = (params && params.arguments) || {}; };
app.onhostcontextchanged = theme;
app.onteardown = async () => { stopFollowing(); stopCountdown(); return {}; };
$("approve").addEventListener("click", () => decide("approve"));
$("decline").addEventListener("click", () => decide("decline"));
$("connect-open").addEventListener("click", openConnect);
$("connect-retry").addEventListener("click", retryConnect);
await app.connect();
theme(app.getHostContext());
