// Shared by every page: actions carry the page's CSRF token; text is set as text.
"use strict";

const noema = {
  csrf() {
    return document.querySelector('meta[name="csrf-token"]').content;
  },

  // POST a JSON body; resolves to {status, body} (the body's error says what went wrong).
  async post(url, data) {
    return noema.request(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": noema.csrf()},
      body: JSON.stringify(data || {}),
    });
  },

  async get(url) {
    return noema.request(url, {credentials: "same-origin"});
  },

  // A request whose answer is always {status, body}: the server's JSON, or an
  // error in words. A page that is not JSON (a proxy's or a crashed server's
  // HTML) is never shown: only what it means.
  async request(url, options) {
    let response;
    try {
      response = await fetch(url, options);
    } catch (e) {
      return {status: 0, body: {ok: false, error: "The page could not reach the server: is `noema ui` still running?"}};
    }
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text);
      if (body && typeof body === "object") return {status: response.status, body};
    } catch (e) { /* not JSON: said in words below */ }
    return {status: response.status, body: {ok: false, error: noema.failure(response.status)}};
  },

  failure(status) {
    if (status >= 500) return `The server failed (error ${status}); its log says why.`;
    if (status === 401 || status === 403) return "This page's access has expired: open the address `noema ui` printed again.";
    if (status === 404) return "The server does not know this address: reload the page.";
    return `The server refused the request (error ${status}).`;
  },

  // An element with text content only (never markup).
  el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  },

  // Times as the server writes them (dates.py): "7 Dec 2026, 19:52", in the
  // person's zone (the body's data-zone; none set: this machine's).
  format(options) {
    const key = JSON.stringify(options);
    noema.formats = noema.formats || new Map();  // a formatter is costly to build: one per kind
    if (!noema.formats.has(key)) {
      const zone = document.body.dataset.zone;
      noema.formats.set(key, new Intl.DateTimeFormat("en-GB",
        {hourCycle: "h23", ...options, ...(zone ? {timeZone: zone} : {})}));
    }
    return noema.formats.get(key);
  },

  when(ts) {
    return noema.format({day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit"})
      .format(new Date(ts * 1000));
  },

  // "7 Dec 2026": the day of a Unix time, in the same zone.
  day(ts) {
    return noema.format({day: "numeric", month: "short", year: "numeric"}).format(new Date(ts * 1000));
  },

  // "19:52": a time of today, in the same zone.
  clock(ts) {
    return noema.format({hour: "2-digit", minute: "2-digit"}).format(new Date(ts * 1000));
  },

  // A <time> element holding the date and time of a Unix time.
  timeNode(ts, short = false) {
    const node = noema.el("time", "", short ? noema.clock(ts) : noema.when(ts));
    node.dateTime = new Date(ts * 1000).toISOString();
    if (short) node.title = noema.when(ts);
    return node;
  },

  // The page may carry the status as it was when it was served (the chat
  // does, so its first paint waits for no request): used once, then asked.
  async showContext() {
    const target = document.getElementById("context");
    if (!target) return;
    const served = document.getElementById("first-status");
    let answer = null;
    if (served && !served.dataset.used) {
      served.dataset.used = "yes";
      const view = JSON.parse(served.textContent);  // null: the agent did not say in time
      if (view) answer = {status: 200, body: view};
    }
    if (!answer) answer = await noema.get("/api/status").catch(() => ({status: 0, body: {}}));
    const {status, body} = answer;
    if (status !== 200) {
      target.textContent = "agent not reachable";
      return;
    }
    const share = body.context_window ? Math.round(100 * body.context_tokens / body.context_window) : 0;
    // The chat page says what the agent does in its own words (#doing).
    const phase = document.getElementById("doing") ? "" : ` · ${body.phase}`;
    target.textContent = `context ${body.context_tokens.toLocaleString()} / ` +
      `${body.context_window.toLocaleString()} tokens (${share}%)${phase}`;
    target.dataset.busy = body.busy ? "yes" : "no";
  },
};

document.addEventListener("DOMContentLoaded", () => { noema.showContext(); });
