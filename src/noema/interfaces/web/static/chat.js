// The chat page: the agent's live messages (server-sent events, resumed by
// their seq), the history from the store, sending, stopping, approvals.
//
// The page opens on the newest page of the history (inside the page, as
// JSON); older turns are read a page at a time when the person scrolls up to
// a mark that stands for them, or follows a link `#turn-N` to one of them.
"use strict";

const PAGE = 50;  // turns read at a time, as the server's HISTORY_PAGE

const chat = {
  log: null,
  seen: new Set(),        // turn ids already shown
  streaming: null,        // the element receiving the answer as it is written
  lastSeq: null,          // the newest seq seen, to resume a stream we reopen ourselves
  source: null,
  newestStored: 0,         // the newest turn id read from the store
  firstLive: null,         // the first node the live stream added: history goes before it
  welcomedOnce: false,
  calls: new Map(),        // call_id → the one line that shows a tool call and its outcome
  orphans: new Map(),      // call_id → a result shown alone, its call not read yet: {node, turn}
  marks: null,             // watches the marks of unread turns, to read them when in view
  busy: false,
  highlighter: null,       // the code-colouring script, once a code block asked for it
  waiting: 0,              // approvals open now

  start() {
    chat.log = document.getElementById("log");
    document.getElementById("composer").addEventListener("submit", chat.send);
    document.getElementById("message").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        chat.send(event);
      }
    });
    document.getElementById("stop").addEventListener("click", chat.stop);
    document.addEventListener("keydown", chat.shortcut);
    chat.marks = new IntersectionObserver((entries) => {
      for (const entry of entries) if (entry.isIntersecting) chat.readMark(entry.target);
    }, {rootMargin: "600px 0px"});
    chat.showFirst(JSON.parse(document.getElementById("first-history").textContent));
    chat.connect();
    window.addEventListener("hashchange", chat.reveal);
    if (chat.linked() !== null) chat.reveal();
  },

  // The newest page, as the server put it in the page: shown before anything else.
  showFirst(page) {
    for (const turn of page.turns) {
      chat.newestStored = Math.max(chat.newestStored, turn.id);
      const node = chat.turnNode(turn);
      if (node) chat.log.appendChild(node);
    }
    if (page.more && page.turns.length) {
      chat.log.prepend(chat.mark(0, page.turns[0].id, "newest"));
    }
    chat.welcome();
    if (chat.linked() === null) chat.scroll();
  },

  connect() {
    const url = chat.lastSeq === null ? "/live" : `/live?since=${encodeURIComponent(chat.lastSeq)}`;
    const source = new EventSource(url);
    chat.source = source;
    source.onmessage = (event) => {
      if (event.lastEventId !== "") chat.lastSeq = event.lastEventId;
      chat.handle(JSON.parse(event.data));
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {  // refused: try again shortly
        chat.setState("The agent is not reachable; trying again…");
        setTimeout(chat.connect, 2000);
      } else {
        chat.setState("Reconnecting…");
      }
    };
  },

  setState(text) {
    document.getElementById("state").textContent = text;
  },

  setBusy(busy) {
    chat.busy = busy;
    document.getElementById("stop").disabled = !busy;
    document.body.dataset.busy = busy ? "yes" : "no";
    if (!busy) chat.doing("idle");
  },

  // What the agent is doing, in the header: thinking, writing, running a
  // tool, waiting for your approval, idle. An open approval outranks the rest.
  doing(what, detail) {
    const target = document.getElementById("doing");
    if (!target) return;
    if (chat.waiting && what !== "approval") what = "approval";
    const words = {
      idle: "idle", thinking: "thinking…", writing: "writing…",
      running: detail ? `running: ${detail}…` : "running a tool…", approval: "waiting for your approval",
    };
    target.textContent = words[what] || what;
    target.dataset.doing = what;
  },

  // Turns stored after `after` (the newest of them, when there are many).
  // They go before whatever live messages already arrived; a mark stands for
  // any left unread between.
  async loadHistory(after) {
    const {status, body} = await noema.get(`/api/history?after=${after}`);
    if (status !== 200) {
      chat.setState(body.error || "the history could not be read");
      return;
    }
    if (body.more && body.turns.length) {
      chat.log.insertBefore(chat.mark(after, body.turns[0].id, "newest"), chat.firstLive);
    }
    for (const turn of body.turns) chat.newestStored = Math.max(chat.newestStored, turn.id);
    const nodes = chat.nodesOf(body.turns);
    for (const node of nodes) chat.log.insertBefore(node, chat.firstLive);
    chat.welcome();
    if (nodes.length && chat.linked() === null) chat.scroll();
  },

  // A mark standing for the unread turns after < id < before. Read from its
  // "newest" end, what it reads goes below it (scrolling up); from its
  // "oldest" end, above it (reading on from a linked turn).
  mark(after, before, from) {
    const node = chat.el("div", "older");
    node.dataset.after = after;
    node.dataset.before = before;
    node.dataset.from = from;
    node.appendChild(noema.el("span", "count", ""));
    const button = noema.el("button", "", "Show more");
    button.type = "button";
    button.addEventListener("click", () => chat.readMark(node));
    node.appendChild(button);
    chat.labelMark(node);
    chat.marks.observe(node);
    return node;
  },

  labelMark(node) {
    const after = Number(node.dataset.after), before = Number(node.dataset.before);
    const count = before - after - 1;
    const which = node.dataset.from === "newest" ? "earlier" : "later";
    node.querySelector(".count").textContent =
      `${count.toLocaleString()} ${which} turn${count === 1 ? "" : "s"} ` +
      `(#${(after + 1).toLocaleString()}–#${(before - 1).toLocaleString()}) not shown yet`;
  },

  // Read one page of the turns a mark stands for, keeping what the person
  // was looking at where it was.
  async readMark(node) {
    if (node.dataset.reading || !node.isConnected) return;
    node.dataset.reading = "yes";
    const after = Number(node.dataset.after), before = Number(node.dataset.before);
    const oldest = node.dataset.from === "oldest";
    let answer;
    try {
      answer = await noema.get(`/api/history?after=${after}&before=${before}&limit=${PAGE}` +
                               (oldest ? "&oldest=1" : ""));
    } catch (e) {
      answer = {status: 0, body: {error: "the server did not answer"}};
    }
    delete node.dataset.reading;
    const {status, body} = answer;
    if (status !== 200) {
      chat.setState(`Earlier turns could not be read: ${body.error || status}`);
      return;
    }
    const nodes = chat.nodesOf(body.turns);
    if (oldest) {
      node.before(...nodes);  // above the mark: nothing the person sees moves
      if (body.turns.length) node.dataset.after = body.turns[body.turns.length - 1].id;
    } else {
      const below = node.nextElementSibling;
      const top = below ? below.getBoundingClientRect().top : 0;
      node.after(...nodes);
      if (below) window.scrollBy(0, below.getBoundingClientRect().top - top);
      if (body.turns.length) node.dataset.before = body.turns[0].id;
    }
    if (!body.more || !body.turns.length) {
      chat.marks.unobserve(node);
      node.remove();
      return;
    }
    chat.labelMark(node);
    // Still in view (short turns): the observer will not call again, so read on.
    const box = node.getBoundingClientRect();
    if (box.bottom > -600 && box.top < innerHeight + 600) chat.readMark(node);
  },

  // Stored turns as nodes, those already shown left out.
  nodesOf(turns) {
    const nodes = [];
    for (const turn of turns) {
      if (chat.seen.has(turn.id)) continue;
      const node = chat.turnNode(turn);
      if (node) nodes.push(node);
    }
    return nodes;
  },

  // The turn a link `#turn-N` in the address names, or null.
  linked() {
    const match = /^#turn-([0-9]{1,12})$/.exec(location.hash);
    return match ? Number(match[1]) : null;
  },

  // Show the linked turn: read from the store if it is not in the page yet.
  async reveal() {
    const id = chat.linked();
    if (id === null) return;
    let node = chat.nodeFor(id);
    if (!node) {
      const mark = [...chat.log.querySelectorAll(".older")].find(
        (m) => Number(m.dataset.after) < id && id < Number(m.dataset.before));
      if (mark) await chat.readAround(mark, id);
      node = chat.nodeFor(id);
    }
    if (!node) {
      chat.setState(`There is no turn ${id} in this conversation.`);
      return;
    }
    for (const old of chat.log.querySelectorAll(".focus")) old.classList.remove("focus");
    node.classList.add("focus");
    if (node.tagName === "DETAILS") node.open = true;
    node.scrollIntoView({block: "center"});
  },

  // The node showing turn `id`: its own, its call's line for a result, or
  // for a turn the chat does not show (a note) the next one shown.
  nodeFor(id) {
    const own = chat.log.querySelector(`[data-turn="${id}"], [data-result="${id}"]`);
    if (own) return own;
    for (const node of chat.log.children) {
      if (node.classList.contains("older") && Number(node.dataset.before) > id) return null;
      if (node.dataset.turn && Number(node.dataset.turn) > id) return node;
    }
    return null;
  },

  // Read a page of a mark's turns starting a few before `id`: the mark then
  // stands for those above the page, and a new one for those below it.
  async readAround(mark, id) {
    const after = Number(mark.dataset.after), before = Number(mark.dataset.before);
    const from = Math.max(after + 1, id - 5);
    const {status, body} = await noema.get(
      `/api/history?after=${from - 1}&before=${before}&limit=${PAGE}&oldest=1`);
    if (status !== 200 || !body.turns.length) {
      chat.setState(`Turn ${id} could not be read: ${body.error || "it is not stored"}`);
      return;
    }
    const first = body.turns[0].id, last = body.turns[body.turns.length - 1].id;
    if (body.more) mark.after(chat.mark(last, before, "oldest"));
    mark.after(...chat.nodesOf(body.turns));
    if (first - 1 > after) {
      mark.dataset.before = first;
      chat.labelMark(mark);
    } else {
      chat.marks.unobserve(mark);
      mark.remove();
    }
  },

  // An empty conversation says what the agent is and how to reach it.
  welcome() {
    const empty = !chat.log.querySelector(".turn");
    const card = document.getElementById("welcome");
    if (card) card.hidden = !empty;
  },

  // The first welcome: the history was read before the stream was opened, so
  // what was stored in between is read too; after a gap the backlog could not
  // cover, what was stored since the newest turn read is read.
  async welcomed(message) {
    chat.setState("");
    if (!message.complete || !chat.welcomedOnce) {
      await chat.loadHistory(chat.newestStored);
    }
    chat.welcomedOnce = true;
  },

  handle(message) {
    switch (message.type) {
      case "welcome":
        chat.welcomed(message);
        break;
      case "said":
      case "turn":
        chat.showTurn(message.turn);
        break;
      case "text":
        chat.appendText(message.cycle_id, message.delta, message.html);
        break;
      case "tool_started":
        chat.doing("running", message.call.tool_words || message.call.tool_name);
        break;
      case "tool_finished":
        chat.showTurn(message.result);
        chat.doing("thinking");
        break;
      case "cycle_started":
        chat.setBusy(true);
        chat.doing("thinking");
        break;
      case "cycle_ended":
        chat.cycleEnded(message);
        break;
      case "idle":
        chat.setBusy(false);
        break;
      case "approval_asked":
        chat.askApproval(message);
        break;
      case "approval_settled":
        chat.settleApproval(message);
        chat.answerCall(message);
        break;
      case "notice":
        chat.line("notice", message.text);
        break;
      case "retry":
        chat.line("notice", message.line);
        break;
      case "goodbye":
        chat.setState(`The agent closed the connection${message.reason ? ": " + message.reason : ""}.`);
        break;
      default:
        break;  // a message this page does not show
    }
  },

  // A piece of the answer. The server sends the whole answer so far as
  // sanitised HTML, its unfinished Markdown closed, so no marker shows raw.
  appendText(cycleId, delta, html) {
    if (!chat.streaming) {
      chat.streaming = chat.el("div", "turn assistant streaming");
      chat.streaming.dataset.cycle = cycleId ?? "";
      chat.streaming.appendChild(chat.meta({kind: "assistant", ts: Date.now() / 1000}));
      chat.streaming.appendChild(noema.el("div", "body"));
      chat.addLive(chat.streaming);
      chat.welcome();
    }
    const body = chat.streaming.querySelector(".body");
    if (typeof html === "string") {
      body.innerHTML = html;  // rendered and sanitised by the server
      body.dataset.text = (body.dataset.text || "") + delta;
    } else {
      body.textContent += delta;
    }
    chat.doing("writing");
    chat.scroll();
  },

  showTurn(turn) {
    if (chat.seen.has(turn.id)) return;
    const node = chat.turnNode(turn);
    if (!node) return;
    if (turn.kind === "assistant" && chat.streaming) {
      chat.streaming.replaceWith(node);
      if (chat.firstLive === chat.streaming) chat.firstLive = node;
      chat.streaming = null;
    } else {
      chat.addLive(node);
    }
    chat.scroll();
  },

  addLive(node) {
    chat.log.appendChild(node);
    if (!chat.firstLive) chat.firstLive = node;
    chat.welcome();
  },

  // Who speaks and when, above a message.
  meta(turn) {
    const who = turn.kind === "user" ? "You" : "Noema";
    const via = turn.kind === "user" && turn.channel && turn.channel !== "web"
      && turn.channel !== "terminal" ? ` · by ${turn.channel}` : "";
    const line = noema.el("div", "meta", `${who}${via} · `);
    // Today's turns by their time; older ones by their date and time.
    const today = noema.day(turn.ts) === noema.day(Date.now() / 1000);
    line.appendChild(noema.timeNode(turn.ts, today));
    return line;
  },

  // A copy button on each block of code.
  // A code block says its language and is coloured by highlight.js (served
  // from the package); its text stays the model's, set as text by the library.
  // The library (127 KB) is loaded with the first code block the page shows,
  // never before: the first paint never waits for it, and code drawn before it
  // came is coloured when it comes.
  codeBlocks(body) {
    for (const code of body.querySelectorAll("pre > code")) {
      const named = /\blanguage-([\w+#-]+)/.exec(code.className);
      if (!named) continue;
      const pre = code.parentElement;
      pre.dataset.language = named[1];
      pre.before(noema.el("span", "code-language", named[1]));
      chat.colour(code);
    }
    chat.copyButtons(body);
  },

  colour(code) {
    const language = /\blanguage-([\w+#-]+)/.exec(code.className);
    if (!language) return;
    if (typeof hljs !== "object") {
      chat.loadHighlighter();
      return;
    }
    if (!hljs.getLanguage(language[1])) return;
    if (!code.classList.contains("hljs")) hljs.highlightElement(code);
  },

  loadHighlighter() {
    if (chat.highlighter) return;
    chat.highlighter = document.createElement("script");
    chat.highlighter.src = "/static/vendor/highlight.min.js";
    chat.highlighter.addEventListener("load", chat.colourAll);
    document.head.appendChild(chat.highlighter);
  },

  colourAll() {
    for (const code of chat.log.querySelectorAll("pre[data-language] > code")) chat.colour(code);
  },

  // Under a message: copy an answer, ask for an answer again, or edit a
  // message of yours. The store keeps every message as it was: asking again
  // and editing send a new message, and the page says so.
  actions(turn) {
    const bar = chat.el("div", "message-actions");
    const button = (label, title, act) => {
      const node = noema.el("button", "action", label);
      node.type = "button";
      node.title = title;
      node.addEventListener("click", () => act(node));
      bar.appendChild(node);
      return node;
    };
    if (turn.kind === "assistant") {
      button("Copy", "Copy this answer", async (node) => {
        try {
          await navigator.clipboard.writeText(turn.content);
          node.textContent = "Copied";
        } catch (e) {
          node.textContent = "Select it to copy";
        }
        setTimeout(() => { node.textContent = "Copy"; }, 1500);
      });
      button("Ask again", "Send the question before this answer again, as a new message", () => {
        const asked = chat.questionBefore(turn.id);
        if (asked === null) {
          chat.setState("The question before this answer is not on the page.");
          return;
        }
        chat.resent = {text: asked, note: "asked again — sent as a new message"};
        chat.say(asked);
      });
    } else {
      button("Edit", "Edit this message and send it as a new one", () => chat.startEdit(turn));
    }
    return bar;
  },

  // The person's message last before turn `id`, as the page holds it.
  questionBefore(id) {
    let asked = null;
    for (const node of chat.log.querySelectorAll(".turn.user[data-turn]")) {
      if (Number(node.dataset.turn) < id) asked = node.querySelector(".body").textContent;
    }
    return asked;
  },

  startEdit(turn) {
    const field = document.getElementById("message");
    field.value = turn.content;
    chat.editing = turn.id;
    let banner = document.getElementById("editing");
    if (!banner) {
      banner = chat.el("p", "editing");
      banner.id = "editing";
      document.getElementById("composer").before(banner);
    }
    banner.replaceChildren(noema.el("span", "",
      `Editing your message #${turn.id}: it is sent as a new message; the one before stays as it was. `));
    const cancel = noema.el("button", "cancel-edit", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", chat.endEdit);
    banner.appendChild(cancel);
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  },

  endEdit() {
    chat.editing = null;
    const banner = document.getElementById("editing");
    if (banner) banner.remove();
    document.getElementById("message").value = "";
  },

  copyButtons(body) {
    for (const pre of body.querySelectorAll("pre")) {
      const button = noema.el("button", "copy", "Copy");
      button.type = "button";
      button.addEventListener("click", async () => {
        const text = pre.innerText;
        try {
          await navigator.clipboard.writeText(text);
        } catch (e) {  // no clipboard API here: select the code for Ctrl+C
          const range = document.createRange();
          range.selectNodeContents(pre);
          getSelection().removeAllRanges();
          getSelection().addRange(range);
        }
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = "Copy"; }, 1500);
      });
      pre.before(button);
    }
  },

  // What a tool call touched, in a few words: its file, command, address, mail.
  touched(tool, argumentsText) {
    let args = {};
    try { args = JSON.parse(argumentsText || "{}") || {}; } catch (e) { return ""; }
    for (const key of ["path", "command", "url", "to", "query", "uid", "name", "channels",
                       "when", "source", "destination", "file_id"]) {
      const value = args[key];
      if (value === undefined || value === null || value === "") continue;
      const text = Array.isArray(value) ? value.join(", ") : String(value);
      return text.length > 80 ? text.slice(0, 79) + "…" : text;
    }
    return "";
  },

  // One line per tool call: what it touched and how it went, open for details.
  callNode(turn) {
    const node = chat.el("details", "turn tool");
    const summary = noema.el("summary", "");
    summary.appendChild(noema.el("span", "outcome-mark", "…"));
    const name = noema.el("span", "tool-name", turn.tool_words || turn.tool_name || "a tool");
    name.title = turn.tool_name || "";  // the tool's own name, for who wants it
    summary.appendChild(name);
    const what = chat.touched(turn.tool_name, turn.arguments);
    if (what) summary.appendChild(noema.el("code", "touched", what));
    node.appendChild(summary);
    node.appendChild(noema.el("p", "part", "Arguments"));
    node.appendChild(noema.el("pre", "arguments", turn.arguments || "{}"));
    node.dataset.state = "running";
    return node;
  },

  // A waiting result (its question went to the person's channels) is not
  // done: its line says it waits, then what the person answered; what the
  // call did once allowed comes as a turn of its own.
  finishCall(node, turn) {
    node.appendChild(noema.el("p", "part", turn.waiting ? "Result (not run yet)"
      : turn.error ? "Result (failed)" : "Result"));
    node.appendChild(noema.el("pre", "result", turn.content));
    node.dataset.result = turn.id;
    chat.markCall(node, turn.waiting ? (turn.answered || "waiting")
      : turn.error ? "failed" : "done");
  },

  CALL_STATES: {
    done: ["✓", "done", ""],
    failed: ["✗", "failed", ""],
    waiting: ["◷", "not run yet: it waits for your answer to the question asked away",
              "— not run yet, waiting for your answer"],
    allowed: ["✓", "asked away and allowed later; what it did is a turn of its own, below",
              "— allowed later; its outcome is below"],
    refused: ["✗", "asked away and refused: it never ran", "— refused, not run"],
    expired: ["✗", "asked away, unanswered in time: it never ran",
              "— expired unanswered, not run"],
  },

  markCall(node, state) {
    const [mark, title, words] = chat.CALL_STATES[state];
    node.dataset.state = state;
    node.classList.toggle("failed", mark === "✗");
    node.classList.toggle("waiting", state === "waiting");
    node.querySelector(".outcome-mark").textContent = mark;
    const summary = node.querySelector("summary");
    summary.title = title;
    summary.querySelector(".waits")?.remove();
    if (words) summary.appendChild(noema.el("span", "waits", words));
  },

  // The person answered a question asked away: its call's line says so now
  // (the stored result got the same answer, so a reload reads the same).
  answerCall(message) {
    const node = message.call_id &&
      (chat.calls.get(message.call_id) || chat.orphans.get(message.call_id)?.node);
    if (!node || node.dataset.state !== "waiting") return;
    chat.markCall(node, message.allowed ? "allowed"
      : message.by === "timeout" || message.by === "restart" ? "expired" : "refused");
  },

  el(tag, className) {
    return noema.el(tag, className);
  },

  turnNode(turn) {
    chat.seen.add(turn.id);
    const flags = turn.flags || [];
    let node;
    if (turn.kind === "tool_call" && turn.tool_name === "pool_event") {
      return null;  // the call that carries a delivery: its result shows what came
    }
    if (turn.kind === "note") {
      return null;  // the orchestrator's notes to the model are not the conversation
    }
    if (turn.kind === "tool_call") {
      node = chat.callNode(turn);
      if (turn.call_id) chat.calls.set(turn.call_id, node);
      const orphan = turn.call_id && chat.orphans.get(turn.call_id);
      if (orphan) {  // its result was read first (a newer page): one line for both again
        chat.orphans.delete(turn.call_id);
        orphan.node.remove();
        chat.finishCall(node, orphan.turn);
      }
    } else if (turn.kind === "tool_result" && turn.call_id && chat.calls.has(turn.call_id)) {
      chat.finishCall(chat.calls.get(turn.call_id), turn);
      return null;  // shown on its call's line
    } else if (turn.kind === "tool_result") {
      node = chat.callNode(turn);  // its call is older than what the page holds
      chat.finishCall(node, turn);
      if (turn.call_id) chat.orphans.set(turn.call_id, {node, turn});
    } else if (turn.kind === "event" && turn.delivery) {
      node = chat.deliveryNode(turn, turn.delivery);
    } else if (turn.kind === "event") {
      node = chat.el("details", "turn event");
      node.appendChild(noema.el("summary", "", "Events from the senses, delivered"));
      node.appendChild(noema.el("pre", "body", turn.content));
      chat.archiveLinks(node, turn.content);
    } else {
      node = chat.el("div", `turn ${turn.kind}`);
      node.appendChild(chat.meta(turn));
      const body = chat.el("div", "body");
      if (turn.kind === "assistant" && typeof turn.html === "string") {
        body.innerHTML = turn.html;  // Markdown rendered and sanitised by the server
        chat.codeBlocks(body);
      } else {
        body.textContent = turn.content;
      }
      node.appendChild(body);
      if (turn.kind === "assistant" || turn.kind === "user") node.appendChild(chat.actions(turn));
      if (turn.kind === "user" && chat.resent && chat.resent.text === turn.content) {
        node.querySelector(".meta").append(noema.el("span", "resent", ` · ${chat.resent.note}`));
        chat.resent = null;
      }
    }
    node.dataset.turn = turn.id;
    node.id = `turn-${turn.id}`;
    if (turn.cycle_id !== null && turn.cycle_id !== undefined) node.dataset.cycle = turn.cycle_id;
    for (const flag of flags) node.classList.add(flag);
    if (flags.includes("discarded")) node.title = "discarded by a safe cancellation";
    return node;
  },

  // Events delivered to the model, apart from the conversation: which channels
  // spoke, each package's first and last events around its gap, and the gap's
  // place in the archive as a link. Every piece is set as text.
  deliveryNode(turn, delivery) {
    const node = chat.el("details", "turn event delivery");
    const left = delivery.packages.reduce((n, p) => n + (p.gap ? p.gap.count : 0), 0);
    const count = delivery.packages.length;
    let label = `Events delivered from ${delivery.channels.join(", ")}` +
      ` · ${count} package${count === 1 ? "" : "s"}`;
    if (left) label += ` · ${left} left in the archive`;
    node.appendChild(noema.el("summary", "", label));
    for (const p of delivery.packages) {
      const box = chat.el("section", "package");
      box.dataset.channel = p.channel;
      const who = [p.channel, p.nature, p.sender ? `from ${p.sender}` : "",
        p.authorised ? "authorised" : "not authorised"].filter(Boolean).join(" · ");
      box.appendChild(noema.el("p", "package-head", who));
      if (p.head.length) box.appendChild(noema.el("pre", "head", p.head.join("\n")));
      if (p.gap) box.appendChild(chat.gapNode(p.gap));
      if (p.tail.length) box.appendChild(noema.el("pre", "tail", p.tail.join("\n")));
      node.appendChild(box);
    }
    const raw = chat.el("details", "raw");
    raw.appendChild(noema.el("summary", "", "As the model read it"));
    raw.appendChild(noema.el("pre", "body", turn.content));
    node.appendChild(raw);
    node.dataset.channels = delivery.channels.join(" ");
    return node;
  },

  // The sandwich's middle: how many events were left out, and where each run is.
  gapNode(gap) {
    const line = noema.el("p", "gap", `… ${gap.count} ${gap.what}: `);
    gap.places.forEach((place, i) => {
      if (i) line.append("; ");
      if (!place.batch) {
        line.append("not archived");
        return;
      }
      const link = noema.el("a", "batch", `batch ${place.batch} offsets ${place.first}–${place.last}`);
      link.href = `/senses/batch/${encodeURIComponent(place.batch)}?offset=${place.first}`;
      line.appendChild(link);
    });
    return line;
  },

  // A delivered gap names the archive batches holding what was left out.
  archiveLinks(node, text) {
    const batches = new Set();
    for (const match of text.matchAll(/\bbatch (b\d{1,18})\b/g)) batches.add(match[1]);
    if (!batches.size) return;
    const line = noema.el("p", "archive-links", "In the archive: ");
    for (const batch of batches) {
      const link = noema.el("a", "", batch);
      link.href = `/senses/batch/${batch}`;
      line.append(link, " ");
    }
    node.appendChild(line);
  },

  cycleEnded(message) {
    chat.setBusy(false);
    const cycle = String(message.cycle_id);
    const kept = chat.streaming;
    chat.streaming = null;
    const words = {
      stopped: "Stopped: the answer so far is kept.",
      cancelled_safe: "Cancelled safely: nothing had run; this answer was discarded and will be redone.",
      cancelled_unsafe: "Cancelled after something ran: what ran is kept, and the model was told it was cut short.",
      failed: `The cycle failed${message.error ? ": " + message.error : ""}.`,
      step_limit: "The cycle reached its step limit.",
      repeating: "Stopped: the model kept making the same call.",
      no_progress: "Stopped: the model kept making calls that changed only in details and changed nothing.",
    };
    if (message.outcome === "cancelled_safe") {
      if (kept) kept.classList.add("discarded");
      for (const node of chat.log.querySelectorAll(`[data-cycle="${CSS.escape(cycle)}"]`)) {
        node.classList.add("discarded");
      }
    } else if (kept) {
      kept.classList.remove("streaming");
      kept.classList.add("interrupted");
    }
    if (words[message.outcome]) {
      const line = chat.line(`outcome ${message.outcome}`, words[message.outcome]);
      line.dataset.cycle = cycle;
    }
    noema.showContext();
  },

  line(className, text) {
    const node = noema.el("p", `line ${className}`, text);
    chat.addLive(node);
    chat.scroll();
    return node;
  },

  // A reason as a sentence: its first letter up, a full stop at its end.
  sentence(text) {
    const trimmed = text.trim();
    const up = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
    return /[.!?]$/.test(up) ? up : `${up}.`;
  },

  // An approval's arguments as the person reads them (approval_view.py's kinds).
  argumentsNode(view) {
    const box = chat.el("div", `arguments view-${view.kind}`);
    const row = (label, value, className = "") => {
      const line = chat.el("div", `field ${className}`);
      line.append(noema.el("span", "label", label), noema.el("span", "value", value));
      return line;
    };
    if (view.kind === "command") {
      const pre = chat.el("pre", "command");
      pre.appendChild(noema.el("code", "", view.command));
      box.appendChild(pre);
      for (const note of view.notes || []) box.appendChild(noema.el("p", "muted small", note));
    } else if (view.kind === "diff") {
      box.appendChild(noema.el("p", "path", `${view.path} · ${view.state}`));
      const pre = chat.el("pre", "diff");
      view.lines.forEach(([sign, text], place) => {
        if (sign === "@" && place === 0) return;  // nothing was left out before the first change
        const kind = {"+": "add", "-": "del", "@": "hunk"}[sign] || "ctx";
        pre.appendChild(noema.el("span", `line ${kind}`, `${sign === "@" ? "" : sign} ${text}`));
      });
      box.appendChild(pre);
    } else if (view.kind === "mail") {
      box.appendChild(row(view.to.length > 1 ? `To (${view.to.length})` : "To", view.to.join("\n"), "to"));
      box.appendChild(row("Subject", view.subject, "subject"));
      if (view.reply) box.appendChild(noema.el("p", "muted small", "An answer in the thread of a mail received."));
      box.appendChild(noema.el("div", "mail-body", view.body));
    } else if (view.kind === "message") {
      if (view.to) box.appendChild(row("To chat", view.to));
      box.appendChild(noema.el("div", "mail-body", view.text));
    } else {
      box.appendChild(noema.el("pre", "lines", chat.recipientsApart(view.text)));
    }
    return box;
  },

  // Recipients one per line: a list joined by commas hides who is added.
  recipientsApart(text) {
    return text.replace(/^((?:to|cc|bcc|recipients?): )(.*)$/gim,
      (_, key, list) => key + "\n" + list.split(/\s*[,;]\s*/).filter(Boolean)
        .map((r) => "  " + r).join("\n"));
  },

  askApproval(message) {
    const box = document.getElementById("approvals");
    const shown = box.querySelector(`[data-approval="${message.approval}"]`);
    // The same question again, asked away now (its watchers had left): the
    // card is redrawn to say where; otherwise it is already on the page.
    if (shown && (shown.dataset.where || "") === (message.where || "")) return;
    if (shown) {
      shown.remove();
      chat.waiting = Math.max(0, chat.waiting - 1);
    }
    const card = chat.el("div", "approval");
    card.dataset.where = message.where || "";
    card.dataset.approval = message.approval;
    card.setAttribute("role", "alertdialog");
    // The server writes out invisible and direction-changing characters as
    // ⟨U+XXXX⟩ (`arguments_shown`), with the classifier every interface uses,
    // and reads them into what the tool does (`view`: a command, a diff, a mail).
    const view = message.view || {title: message.tool, kind: "lines", text: message.arguments_shown};
    card.setAttribute("aria-label", `Allow: ${view.title}?`);
    const ask = noema.el("p", "ask", `${document.body.dataset.agent || "Noema"} asks: ${view.title}`);
    ask.appendChild(noema.el("code", "tool-id", message.tool));
    card.appendChild(ask);
    if (message.reason) card.appendChild(noema.el("p", "reason", chat.sentence(message.reason_shown)));
    card.appendChild(chat.argumentsNode(view));
    if (message.flagged) {
      card.appendChild(noema.el("p", "hidden-warning",
        "⚠ It holds invisible or direction-changing characters, shown as ⟨U+…⟩: read it with care."));
    }
    card.appendChild(noema.el("p", "when", chat.approvalWhen(message)));
    const allow = noema.el("button", "allow", "Allow");
    const refuse = noema.el("button", "refuse", "Refuse");
    allow.type = refuse.type = "button";
    allow.title = "Alt+Y";
    refuse.title = "Alt+N";
    allow.disabled = refuse.disabled = true;  // until it has been on screen a moment
    // A click counts only on a card that has been on screen for a while: one
    // in its first moments was aimed at whatever stood there before.
    allow.addEventListener("click", (event) => {
      if (chat.cardSeen(card, event)) chat.answer(message.approval, true, card);
    });
    refuse.addEventListener("click", (event) => {
      if (chat.cardSeen(card, event)) chat.answer(message.approval, false, card);
    });
    const buttons = chat.el("div", "buttons");
    buttons.append(allow, refuse, noema.el("span", "keys", "Alt+Y allows · Alt+N refuses (outside the message box)"));
    card.appendChild(buttons);
    box.appendChild(card);
    chat.armCards();
    chat.waiting += 1;
    chat.doing("approval");
  },

  // Where the question was asked and when it expires, on the person's clock.
  approvalWhen(message) {
    const where = message.where
      ? `Asked ${message.where} while you were away; answer here or there, the first answer counts. `
      : "";
    if (!message.expires_at) return where.trim();
    const at = new Date(message.expires_at * 1000);
    const minutes = Math.max(1, Math.ceil((at - Date.now()) / 60000));
    const clock = noema.clock(message.expires_at);
    return `${where}Unanswered, it is refused at ${clock} (in ${minutes} minute${minutes === 1 ? "" : "s"}).`;
  },

  // How long a card must have been on screen before an answer counts.
  SEEN_MS: 500,

  // The cards are drawn, or moved (one above them went): each counts as on
  // screen from its next painted frame; `data-armed` says when it may be answered.
  armCards() {
    for (const card of document.querySelectorAll("#approvals .approval")) {
      delete card.dataset.armed;
      card.drawnAt = Infinity;
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      requestAnimationFrame(() => {
        const drawnAt = performance.now();
        card.drawnAt = drawnAt;
        setTimeout(() => {
          if (card.drawnAt !== drawnAt || !card.isConnected) return;
          card.dataset.armed = "";
          if (!("sending" in card.dataset)) {
            for (const button of card.querySelectorAll("button")) button.disabled = false;
          }
          // Refuse takes the focus only when nothing else has it: a person
          // typing a message keeps their text box (a space or an Enter meant
          // for it must not press a button).
          const first = document.querySelector("#approvals .approval");
          const idle = !document.activeElement || document.activeElement === document.body;
          if (card === first && idle) card.querySelector("button.refuse")?.focus();
        }, chat.SEEN_MS);
      });
    }
  },

  // Whether `event` (a click or a key press) came once `card` had been on
  // screen for SEEN_MS: not before it was drawn, not in its first moments.
  cardSeen(card, event) {
    const drawnAt = card.drawnAt ?? Infinity;
    return event.timeStamp - drawnAt >= chat.SEEN_MS;
  },

  // Alt+Y and Alt+N answer the oldest open approval: a fresh press (a key
  // held down repeats, and would answer the next card as it appears), on a
  // card on screen long enough to read, and never while the person types.
  shortcut(event) {
    if (!event.altKey || !["y", "n"].includes(event.key.toLowerCase())) return;
    const card = document.querySelector("#approvals .approval");
    if (!card) return;
    const typing = event.target.closest?.("input, textarea, select, [contenteditable]");
    if (event.repeat || typing || !chat.cardSeen(card, event)) return;
    event.preventDefault();
    chat.answer(Number(card.dataset.approval), event.key.toLowerCase() === "y", card);
  },

  async answer(approval, allow, card) {
    card.dataset.sending = "";
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    const {status, body} = await noema.post("/api/answer", {approval, allow});
    delete card.dataset.sending;
    if (status !== 200) {
      chat.setState(body.error || "the answer was not sent");
      if ("armed" in card.dataset) {
        for (const button of card.querySelectorAll("button")) button.disabled = false;
      }
    }
  },

  settleApproval(message) {
    const card = document.querySelector(`#approvals [data-approval="${message.approval}"]`);
    if (card) {
      card.remove();
      chat.waiting = Math.max(0, chat.waiting - 1);
      chat.armCards();  // the others moved
    }
    chat.doing(chat.busy ? "thinking" : "idle");
    chat.line(message.allowed ? "approved" : "refused", chat.settledText(message));
  },

  // How a question ended, in the words the other channels use (security/away.py).
  settledText(message) {
    if (message.by === "timeout") {
      return "No answer came in time: it was refused, and nothing was run.";
    }
    if (message.by === "restart") {
      return "The question ended when the agent restarted: nothing was run.";
    }
    const places = {web: "on this page", telegram: "on Telegram", email: "by mail",
                    chat: "in the terminal", terminal: "in the terminal"};
    const where = places[message.by] ? ` ${places[message.by]}` : "";
    return message.allowed ? `Allowed${where}.` : `Refused${where}: nothing was run.`;
  },

  async send(event) {
    event.preventDefault();
    const field = document.getElementById("message");
    const text = field.value;
    if (!text.trim()) return;
    if (chat.editing) chat.resent = {text, note: `edited from #${chat.editing} — sent as a new message`};
    await chat.say(text);
  },

  // Send `text` as the person's message; the composer is emptied once it is
  // taken, if it still holds it.
  async say(text) {
    const field = document.getElementById("message");
    const button = document.getElementById("send");
    button.disabled = true;
    try {
      const {status, body} = await noema.post("/api/say", {text});
      if (status === 200) {
        if (field.value === text) field.value = "";
        if (chat.editing) chat.endEdit();
        chat.setState("");
      } else {
        chat.setState(body.error || "your message was not sent");  // the text stays in the box
      }
    } catch (e) {
      chat.setState("your message was not sent: the server did not answer");
    } finally {
      button.disabled = false;
    }
  },

  async stop() {
    const {status, body} = await noema.post("/api/stop", {});
    if (status !== 200 || !body.ok) chat.setState(body.error || "nothing was running");
  },

  scroll() {
    window.scrollTo(0, document.body.scrollHeight);
  },
};

document.addEventListener("DOMContentLoaded", chat.start);
