// The chat page: the agent's live messages (server-sent events, resumed by
// their seq), the history from the store, sending, stopping, approvals.
"use strict";

const chat = {
  log: null,
  seen: new Set(),        // turn ids already shown
  streaming: null,        // the element receiving the answer as it is written
  lastSeq: null,          // the newest seq seen, to resume a stream we reopen ourselves
  source: null,
  history: null,           // the first history read, started with the stream
  newestStored: 0,         // the newest turn id read from the store
  firstLive: null,         // the first node the live stream added: history goes before it
  welcomedOnce: false,

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
    chat.history = chat.loadHistory();
    chat.connect();
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
    document.getElementById("stop").disabled = !busy;
    document.body.dataset.busy = busy ? "yes" : "no";
  },

  // Stored turns: all of the newest (after = 0), or those stored after `after`.
  // They go before whatever live messages already arrived.
  async loadHistory(after = 0) {
    const {status, body} = await noema.get(`/api/history${after ? "?after=" + after : ""}`);
    if (status !== 200) {
      chat.setState(body.error || "the history could not be read");
      return;
    }
    for (const turn of body.turns) {
      chat.newestStored = Math.max(chat.newestStored, turn.id);
      if (chat.seen.has(turn.id)) continue;
      const node = chat.turnNode(turn);
      if (node) chat.log.insertBefore(node, chat.firstLive);
    }
    chat.scroll();
  },

  // The first welcome: the history was read while the stream was being opened,
  // so what was stored in between is read too; after a gap the backlog could
  // not cover, everything is read again.
  async welcomed(message) {
    chat.setState("");
    if (!message.complete) {
      await chat.loadHistory();
    } else if (!chat.welcomedOnce) {
      await chat.history;
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
        chat.appendText(message.cycle_id, message.delta);
        break;
      case "tool_finished":
        chat.showTurn(message.result);
        break;
      case "cycle_started":
        chat.setBusy(true);
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

  appendText(cycleId, delta) {
    if (!chat.streaming) {
      chat.streaming = chat.el("div", "turn assistant streaming");
      chat.streaming.dataset.cycle = cycleId ?? "";
      chat.streaming.appendChild(noema.el("div", "body"));
      chat.addLive(chat.streaming);
    }
    chat.streaming.querySelector(".body").textContent += delta;
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
    if (turn.kind === "event" && turn.delivery) {
      node = chat.deliveryNode(turn, turn.delivery);
    } else if (turn.kind === "tool_call" || turn.kind === "tool_result" || turn.kind === "event") {
      node = chat.el("details", `turn ${turn.kind}`);
      const label = turn.kind === "tool_call" ? `${turn.tool_name || "tool"} called`
        : turn.kind === "event" ? "events from the senses, delivered" : `${turn.tool_name || "tool"} answered`;
      node.appendChild(noema.el("summary", "", turn.error ? `${label} (failed)` : label));
      const text = turn.kind === "tool_call" ? (turn.arguments || "") : turn.content;
      node.appendChild(noema.el("pre", "body", text));
      if (turn.kind === "event") chat.archiveLinks(node, turn.content);
    } else {
      node = chat.el("div", `turn ${turn.kind}`);
      const body = chat.el("div", "body");
      if (turn.kind === "assistant" && typeof turn.html === "string") {
        body.innerHTML = turn.html;  // Markdown rendered and sanitised by the server
      } else {
        body.textContent = turn.content;
      }
      node.appendChild(body);
    }
    node.dataset.turn = turn.id;
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

  askApproval(message) {
    const box = document.getElementById("approvals");
    if (box.querySelector(`[data-approval="${message.approval}"]`)) return;
    const card = chat.el("div", "approval");
    card.dataset.approval = message.approval;
    card.appendChild(noema.el("p", "", `The agent asks to run ${message.tool}.`));
    if (message.reason) card.appendChild(noema.el("p", "reason", message.reason));
    card.appendChild(noema.el("pre", "arguments", message.arguments));
    const allow = noema.el("button", "allow", "Allow");
    const refuse = noema.el("button", "refuse", "Refuse");
    allow.type = refuse.type = "button";
    allow.addEventListener("click", () => chat.answer(message.approval, true, card));
    refuse.addEventListener("click", () => chat.answer(message.approval, false, card));
    card.append(allow, refuse);
    box.appendChild(card);
    allow.focus();
  },

  async answer(approval, allow, card) {
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    const {status, body} = await noema.post("/api/answer", {approval, allow});
    if (status !== 200) {
      chat.setState(body.error || "the answer was not sent");
      for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
  },

  settleApproval(message) {
    const card = document.querySelector(`#approvals [data-approval="${message.approval}"]`);
    if (card) card.remove();
    const who = message.by ? ` (${message.by})` : "";
    chat.line(message.allowed ? "approved" : "refused",
      `${message.allowed ? "Allowed" : "Refused"}: approval ${message.approval}${who}.`);
  },

  async send(event) {
    event.preventDefault();
    const field = document.getElementById("message");
    const text = field.value;
    if (!text.trim()) return;
    const button = document.getElementById("send");
    button.disabled = true;
    try {
      const {status, body} = await noema.post("/api/say", {text});
      if (status === 200) {
        if (field.value === text) field.value = "";
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
