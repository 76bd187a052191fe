// The first-run form: `noema setup` in fields. Every step sends the whole form;
// the server answers, or names the field a problem concerns and says it there.
"use strict";

const setup = {
  choices: {},
  previousAddress: "",  // the last provider's own address, replaced when the provider changes

  start() {
    const form = document.getElementById("setup");
    if (!form) return;
    setup.choices = JSON.parse(document.getElementById("setup-choices").textContent);
    document.getElementById("setup-provider").addEventListener("change", setup.chosen);
    document.getElementById("setup-list").addEventListener("click", setup.list);
    document.getElementById("setup-model").addEventListener("change", setup.window);
    document.getElementById("setup-test").addEventListener("click", setup.test);
    form.addEventListener("submit", setup.save);
    setup.chosen();
  },

  field(name) {
    return document.getElementById(`setup-${name}`);
  },

  values() {
    const values = {};
    for (const name of ["provider", "base_url", "key", "model", "context_window"]) {
      values[name] = setup.field(name).value;
    }
    if (setup.field("base_url").closest(".field").hidden) values.base_url = "";
    return values;
  },

  // A provider chosen: its address (when it asks for one), what its key is.
  chosen() {
    const choice = setup.choices[setup.field("provider").value];
    const address = setup.field("base_url");
    address.closest(".field").hidden = !choice.asks_address;
    if (!address.value || address.value === setup.previousAddress) address.value = choice.base_url;
    address.placeholder = choice.base_url || "http://localhost:8000/v1";
    setup.previousAddress = choice.base_url;
    const help = document.getElementById("setup-key-help");
    if (choice.key_kept) {
      help.textContent = `A key is kept already as ${choice.key_env}: leave this empty to use it.`;
    } else if (choice.key_required) {
      help.textContent = `${choice.label} needs one. It is kept in secrets.toml as ${choice.key_env}.`;
    } else {
      help.textContent = "Only if your server asks for one.";
    }
    setup.field("key").placeholder = choice.key_required && !choice.key_kept ? "needed" : "optional";
    setup.models([]);
    setup.clear();
  },

  models(names) {
    const select = setup.field("model");
    select.replaceChildren();
    if (!names.length) {
      select.appendChild(noema.el("option", "", "(list the server's models first)")).value = "";
    }
    for (const name of names) select.appendChild(noema.el("option", "", name)).value = name;
    select.disabled = !names.length;
    document.getElementById("setup-model-help").textContent = "";
  },

  clear() {
    for (const node of document.querySelectorAll("#setup .problem")) node.textContent = "";
    for (const node of document.querySelectorAll("#setup [aria-invalid]")) {
      node.removeAttribute("aria-invalid");
    }
    setup.state("");
  },

  state(text) {
    document.getElementById("setup-state").textContent = text;
  },

  // A refused step: its text beside the field it concerns.
  problem(body) {
    const field = body.field || "";
    const target = document.getElementById(`setup-${field}-problem`) ||
      document.getElementById("setup--problem");
    target.textContent = body.error || "the server did not say what went wrong";
    const input = field && setup.field(field);
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  },

  // One step: the whole form sent, buttons held while it runs.
  async step(path, working) {
    setup.clear();
    setup.state(working);
    const buttons = document.querySelectorAll("#setup button");
    for (const button of buttons) button.disabled = true;
    try {
      const {status, body} = await noema.post(path, setup.values());
      setup.state("");
      if (status === 200 && body.ok) return body;
      setup.problem(body);
      return null;
    } catch (e) {
      setup.state("");
      setup.problem({error: "the page's server did not answer"});
      return null;
    } finally {
      for (const button of buttons) button.disabled = false;
    }
  },

  async list() {
    const body = await setup.step("/api/first-run/models", "Asking the server for its models…");
    if (!body) return;
    if (body.base_url) setup.field("base_url").value = body.base_url;
    setup.models(body.models);
    const count = body.models.length;
    document.getElementById("setup-model-help").textContent =
      `The server serves ${count} model${count === 1 ? "" : "s"}.` + (body.note ? ` ${body.note}` : "");
    await setup.window();
  },

  async window() {
    if (!setup.field("model").value) return;
    setup.field("context_window").value = "";
    const body = await setup.step("/api/first-run/window", "Reading the model's window…");
    if (!body) return;
    setup.field("context_window").value = body.tokens;
    document.getElementById("setup-window-source").textContent =
      `${body.tokens.toLocaleString()} tokens, ${body.source}.` + (body.note ? ` Note: ${body.note}` : "");
  },

  async test() {
    const body = await setup.step("/api/first-run/test", "Trying a request, with a tool offered…");
    if (body) setup.state(body.text);
  },

  async save(event) {
    event.preventDefault();
    const body = await setup.step("/api/first-run/save", "Saving…");
    if (!body) return;
    setup.field("key").value = "";  // kept in secrets.toml now; not in the page
    setup.state(`${body.text} ${body.next}`);
    document.getElementById("setup-open").hidden = !body.started;
    if (body.started) {
      const state = document.getElementById("first-run-state");
      if (state) state.textContent = "model ready";  // the header said "no model yet"
      for (const node of document.querySelectorAll("#setup input, #setup select, #setup button")) {
        node.disabled = true;
      }
    }
  },
};

document.addEventListener("DOMContentLoaded", setup.start);
