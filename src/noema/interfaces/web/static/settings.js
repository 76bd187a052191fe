// The settings page: one form per section, saved whole; the validator's words shown beside
// the field they name; a model's fields follow its provider, its model picked from the
// server's own list.
"use strict";

const settings = {
  providers: {kinds: {}, addresses: {}},

  kindOf(provider) {
    return settings.providers.kinds[provider] || "";
  },

  // Show only the fields the chosen provider reads.
  follow(form) {
    const select = form.querySelector("select[name$='.provider']");
    if (!select) return;
    const kind = settings.kindOf(select.value);
    for (const row of form.querySelectorAll(".field[data-kinds]")) {
      const kinds = row.dataset.kinds ? row.dataset.kinds.split(" ") : [];
      // No provider yet: nothing but the choice of one.
      row.hidden = row.contains(select) ? false
        : !select.value || (kinds.length > 0 && !kinds.includes(kind));
    }
    const advanced = form.querySelector("details.advanced");
    if (advanced) advanced.hidden = !select.value;
    const address = form.querySelector("input[name$='.base_url']");
    if (address) address.placeholder = settings.providers.addresses[select.value] || "give the server's address";
  },

  field(form, suffix) {
    return form.querySelector(`[name$='.${suffix}']`);
  },

  // Fill the model drop-down from what the server says it serves.
  async listModels(form) {
    const provider = settings.field(form, "provider").value;
    const row = form.querySelector(".field[data-widget=model]");
    const served = row.querySelector("select.served");
    const input = row.querySelector("input[type=text]");
    const state = row.querySelector(".served-state");
    if (!provider || settings.kindOf(provider) === "scripted") {
      served.hidden = true;
      input.hidden = false;
      state.textContent = "";
      return;
    }
    state.className = "served-state muted";
    state.textContent = "Asking the server which models it serves…";
    // Only the latest question's answer counts: an older one may arrive after it.
    const asked = (Number(row.dataset.asked || 0) + 1).toString();
    row.dataset.asked = asked;
    const {status, body} = await noema.post("/api/settings/models", {
      provider,
      base_url: settings.field(form, "base_url").value,
      api_key_env: settings.field(form, "api_key_env").value,
      key: settings.field(form, "key").value,
    });
    if (row.dataset.asked !== asked) return;
    if (status !== 200) {
      served.hidden = true;
      input.hidden = false;
      state.className = "served-state error";
      state.textContent = `${body.error || "the server could not be asked"}. Type the model's name.`;
      return;
    }
    const address = settings.field(form, "base_url");
    const moved = body.base_url && body.base_url !== address.value.trim();
    if (moved) address.value = body.base_url;  // the /v1 the server's API is under
    served.replaceChildren();
    const current = input.value.trim();
    for (const name of body.models) {
      const option = noema.el("option", "", name);
      option.value = name;
      served.append(option);
    }
    if (current && !body.models.includes(current)) {
      const option = noema.el("option", "", `${current} (not served now)`);
      option.value = current;
      served.prepend(option);
    }
    const other = noema.el("option", "", "Another name…");
    other.value = "";
    served.append(other);
    served.value = current || body.models[0];
    input.value = served.value;
    served.hidden = false;
    input.hidden = true;
    state.className = "served-state muted";
    state.textContent = `${body.models.length} model(s) served` +
      (moved ? ` at ${body.base_url} (the server's API is under /v1).` : ".");
    settings.readWindow(form);
  },

  pickModel(event) {
    const served = event.currentTarget;
    const input = served.closest(".field").querySelector("input[type=text]");
    input.hidden = served.value !== "";
    input.value = served.value;
    if (!served.value) input.focus();
    else settings.readWindow(served.closest("form"));
  },

  // Say the window the server serves the chosen model with, and offer to use it.
  async readWindow(form) {
    const out = form.querySelector(".served-window");
    const model = settings.field(form, "model").value.trim();
    if (!out || !model) return;
    out.replaceChildren();
    const asked = (Number(out.dataset.asked || 0) + 1).toString();
    out.dataset.asked = asked;
    const {status, body} = await noema.post("/api/settings/window", {
      provider: settings.field(form, "provider").value,
      base_url: settings.field(form, "base_url").value,
      api_key_env: settings.field(form, "api_key_env").value,
      key: settings.field(form, "key").value,
      model,
    });
    if (out.dataset.asked !== asked) return;
    delete form.dataset.servedWindow;
    if (status !== 200 || !body.window) {
      out.className = "served-window muted";
      out.textContent = status === 200 ? "The server does not say its window for this model."
        : `The window could not be read: ${body.error || "no answer"}.`;
      return;
    }
    const {tokens, source, note} = body.window;
    form.dataset.servedWindow = String(tokens);
    form.dataset.servedModel = model;
    out.className = "served-window";
    out.append(`The server serves ${model} with ${tokens.toLocaleString()} tokens (${source}). `);
    const use = noema.el("button", "use-window", `Use ${tokens}`);
    use.type = "button";
    use.addEventListener("click", () => {
      settings.field(form, "context_window").value = String(tokens);
      settings.checkWindow(form);
    });
    out.append(use);
    if (note) out.append(noema.el("span", "muted", ` ${note}.`));
    out.append(noema.el("span", "window-warning error", ""));
    settings.checkWindow(form);
  },

  // The server's window, while it is the one read for the model in the field.
  servedWindow(form) {
    const model = settings.field(form, "model").value.trim();
    const tokens = Number(form.dataset.servedWindow || 0);
    return tokens > 0 && form.dataset.servedModel === model ? tokens : null;
  },

  // Say at once when the window typed is larger than the server's: requests would be refused.
  checkWindow(form) {
    const warning = form.querySelector(".window-warning");
    if (!warning) return;
    const served = settings.servedWindow(form);
    const typed = Number(settings.field(form, "context_window").value.trim());
    warning.textContent = served && typed > served
      ? ` ${typed.toLocaleString()} is larger than the server's ${served.toLocaleString()}: ` +
        "the server refuses requests past its window, so saving asks you first."
      : "";
  },

  // Text as a TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML takes only escaped.
  tomlText(s) {
    return JSON.stringify(s).replace(/\u007f/g, "\\u007F");
  },

  // The folders' rows as the TOML list `config set` reads.
  rootsValue(box) {
    const text = settings.tomlText;
    const rows = [...box.querySelectorAll(".root")]
      .filter((row) => row.querySelector(".root-path").value.trim())
      .map((row) => `{ path = ${text(row.querySelector(".root-path").value.trim())}, ` +
                    `mode = ${text(row.querySelector(".root-mode").value)} }`);
    return `[${rows.join(", ")}]`;
  },

  addRoot(box) {
    const row = noema.el("div", "root");
    const path = noema.el("input", "root-path");
    path.type = "text";
    path.setAttribute("aria-label", "Folder");
    path.placeholder = "~/projects";
    const mode = noema.el("select", "root-mode");
    mode.setAttribute("aria-label", "What the agent may do there");
    for (const name of ["read-write", "read-only"]) {
      const option = noema.el("option", "", name);
      option.value = name;
      mode.append(option);
    }
    const remove = noema.el("button", "remove-root", "Remove");
    remove.type = "button";
    row.append(path, mode, remove);
    box.insertBefore(row, box.querySelector(".add-root"));
    path.focus();
  },

  // Rows of tables as the TOML list `config set` reads: each row's filled cells,
  // a flag or a choice only where it differs from its default; a row left
  // wholly empty is no row.
  tablesValue(box) {
    const text = settings.tomlText;
    const rows = [];
    for (const row of box.querySelectorAll(".table-rows .table-row")) {
      const pairs = [];
      for (const cell of row.querySelectorAll(".cell")) {
        const input = cell.querySelector(".cell-value");
        const {column, kind} = cell.dataset;
        const fallback = cell.dataset.default;
        let value;
        if (kind === "checkbox") {
          value = input.checked ? "true" : "false";
          if (value === fallback) continue;
        } else {
          value = input.value.trim();
          if (!value || value === fallback) continue;
          const flag = kind === "select" && (value === "true" || value === "false");
          const number = kind === "number" && /^-?\d+(\.\d+)?$/.test(value);
          if (!flag && !number) value = text(value);  // text, or a duration like "5m"
        }
        pairs.push(`${column} = ${value}`);
      }
      if (pairs.length) rows.push(`{ ${pairs.join(", ")} }`);
    }
    return rows.length ? `[${rows.join(", ")}]` : "";  // none: back to the default, none
  },

  numberRows(box) {
    box.querySelectorAll(".table-rows .table-row").forEach((row, index) => {
      row.querySelector("legend .number").textContent = String(index + 1);
      for (const input of row.querySelectorAll("[id]")) {
        const id = input.id.replace(/-\d+-([^-]+)$/, `-${index + 1}-$1`);
        const label = row.querySelector(`label[for="${CSS.escape(input.id)}"]`);
        input.id = id;
        if (label) label.htmlFor = id;
      }
    });
  },

  addRow(box) {
    const row = box.querySelector("template.row-template").content.firstElementChild.cloneNode(true);
    box.querySelector(".table-rows").append(row);
    settings.numberRows(box);
    row.querySelector(".cell-value").focus();
  },

  // A list's fields as a TOML list of texts, blank ones too, so that the server's
  // word about item N lands by the Nth field.
  listValue(box) {
    const texts = [...box.querySelectorAll(".entry-value")].map((input) => settings.tomlText(input.value));
    return `[${texts.join(", ")}]`;
  },

  // Each item's accessible names say its place, kept right as items come and go.
  numberEntries(box) {
    box.querySelectorAll(".entry").forEach((entry, index) => {
      entry.querySelector(".entry-value").setAttribute("aria-label", `${box.dataset.label}, item ${index + 1}`);
      entry.querySelector(".remove-entry").setAttribute("aria-label", `Remove item ${index + 1}`);
    });
  },

  addEntry(box) {
    const entry = noema.el("li", "entry");
    const input = noema.el("input", "entry-value");
    input.type = "text";
    input.spellcheck = false;
    input.autocomplete = "off";
    input.placeholder = box.dataset.example || "";
    if (box.dataset.numbers === "true") input.inputMode = "numeric";
    const remove = noema.el("button", "remove-entry", "✕");
    remove.type = "button";
    remove.title = "Remove";
    const problem = noema.el("p", "problem error");
    problem.setAttribute("role", "alert");
    problem.hidden = true;
    entry.append(input, remove, problem);
    box.querySelector(".entries").append(entry);
    settings.numberEntries(box);
    input.focus();
  },

  removeEntry(box, entry) {
    const next = entry.nextElementSibling || entry.previousElementSibling;
    entry.remove();
    settings.numberEntries(box);
    (next ? next.querySelector(".entry-value") : box.querySelector(".add-entry")).focus();
  },

  // Where a problem goes: its field, or for "key.N" the Nth item of the list `key`.
  placeOf(form, key) {
    const row = (name) => form.querySelector(`.field[data-key="${CSS.escape(name)}"]`);
    if (!key) return {};
    const field = row(key);
    if (field) return {field};
    const item = /^(.*)\.(\d+)$/.exec(key);
    const list = item && row(item[1]);
    if (!list) return {};
    return {field: list, entry: list.querySelectorAll(".entry")[Number(item[2])]};
  },

  clear(form) {
    for (const node of form.querySelectorAll(".problem")) {
      node.hidden = true;
      node.textContent = "";
    }
    for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
    for (const node of form.querySelectorAll(".entry.invalid")) node.classList.remove("invalid");
  },

  show(form, problems) {
    for (const [key, lines] of Object.entries(problems || {})) {
      const {field: row, entry} = settings.placeOf(form, key);
      const target = entry ? entry.querySelector(".problem")
        : row ? row.querySelector(".field-problem") : form.querySelector(".section-problem");
      target.hidden = false;
      target.textContent = lines.join(" ");
      if (entry) {
        entry.classList.add("invalid");
        entry.querySelector(".entry-value").setAttribute("aria-invalid", "true");
      }
      if (row) {
        const input = entry ? null : row.querySelector("[name]");
        if (input) input.setAttribute("aria-invalid", "true");
        const folded = row.closest("details");
        if (folded) folded.open = true;
        row.hidden = false;
      }
    }
  },

  async save(event, larger = false) {
    event.preventDefault();
    const form = event.currentTarget.closest("form");  // the form, or the button in it
    for (const box of form.querySelectorAll(".roots")) {
      box.closest(".field").querySelector(".roots-value").value = settings.rootsValue(box);
    }
    for (const box of form.querySelectorAll(".list-field")) {
      box.closest(".field").querySelector(".list-value").value = settings.listValue(box);
    }
    for (const box of form.querySelectorAll(".tables")) {
      box.closest(".field").querySelector(".tables-value").value = settings.tablesValue(box);
    }
    const values = {};
    let key = "";
    for (const input of form.querySelectorAll("[name]")) {
      if (input.closest(".field").hidden) continue;
      if (input.type === "password") key = input.value;
      else values[input.name] = input.type === "checkbox" ? (input.checked ? "true" : "false") : input.value;
    }
    const out = form.querySelector(".outcome");
    const button = form.querySelector("button.save");
    settings.clear(form);
    button.disabled = true;
    const request = {section: form.dataset.section, values, key};
    if (form.querySelector("[name$='.context_window']")) {
      const served = settings.servedWindow(form);
      if (served) request.served_window = served;
      if (larger) request.larger_window = true;
    }
    const {status, body} = await noema.post("/api/settings", request);
    button.disabled = false;
    out.className = status === 200 ? "outcome" : "outcome error";
    out.textContent = status === 200 ? body.text : (body.error || "not saved");
    if (status === 200) {
      const secret = form.querySelector("input[type=password]");
      if (secret) secret.value = "";
    } else {
      settings.show(form, body.problems);
      if (body.ask === "larger_window") settings.askLarger(form);
    }
  },

  // The window is larger than the server's: the person chooses, beside the field.
  askLarger(form) {
    const row = form.querySelector(".field[data-key$='.context_window']");
    const problem = row.querySelector(".field-problem");
    const served = settings.servedWindow(form);
    const typed = settings.field(form, "context_window").value.trim();
    const use = noema.el("button", "use-window", `Use ${served}`);
    use.type = "button";
    use.addEventListener("click", () => {
      settings.field(form, "context_window").value = String(served);
      settings.clear(form);
      settings.checkWindow(form);
    });
    const keep = noema.el("button", "keep-window", `Save ${Number(typed).toLocaleString()} anyway`);
    keep.type = "button";
    keep.addEventListener("click", (event) => settings.save(event, true));
    problem.append(" ", use, " ", keep);
    const warning = form.querySelector(".window-warning");
    if (warning) warning.textContent = "";  // the refusal beside the field says it whole
  },

  async test(event) {
    const button = event.currentTarget;
    const out = button.closest("form").querySelector(".outcome");
    button.disabled = true;
    out.className = "outcome";
    out.textContent = "Calling the model…";
    const {status, body} = await noema.post("/api/settings/test", {role: button.dataset.role});
    button.disabled = false;
    out.className = status === 200 ? "outcome" : "outcome error";
    out.textContent = status === 200 ? body.text : (body.error || "the test failed");
  },
};

// End a browser's session (this one's: a sign-out, and the page has nothing more to show).
settings.endSession = async (event) => {
  const number = event.target.dataset.number;
  const outcome = document.querySelector(".sessions-outcome");
  const {status, body} = await noema.post(`/api/sessions/${number}/end`);
  outcome.textContent = status === 200 ? body.text : (body.error || "not ended");
  if (status === 200 && body.signed_out) {
    document.querySelector("main").replaceChildren(noema.el("p", "", body.text + " Open the address `noema ui` printed to come back."));
  } else if (status === 200) {
    event.target.closest("li").remove();
  }
};

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.end-session")) {
    button.addEventListener("click", settings.endSession);
  }
  const source = document.getElementById("provider-kinds");
  if (source) settings.providers = JSON.parse(source.textContent);
  for (const box of document.querySelectorAll(".roots")) {
    box.addEventListener("click", (event) => {
      if (event.target.matches(".add-root")) settings.addRoot(box);
      if (event.target.matches(".remove-root")) event.target.closest(".root").remove();
    });
  }
  for (const box of document.querySelectorAll(".tables")) {
    box.addEventListener("click", (event) => {
      if (event.target.matches(".add-row")) settings.addRow(box);
      if (event.target.matches(".remove-row")) {
        event.target.closest(".table-row").remove();
        settings.numberRows(box);
        box.querySelector(".add-row").focus();
      }
    });
  }
  for (const box of document.querySelectorAll(".list-field")) {
    box.addEventListener("click", (event) => {
      if (event.target.matches(".add-entry")) settings.addEntry(box);
      if (event.target.matches(".remove-entry")) settings.removeEntry(box, event.target.closest(".entry"));
    });
    box.addEventListener("keydown", (event) => {  // Enter in an item adds the next, as in a list
      if (event.key !== "Enter" || !event.target.matches(".entry-value")) return;
      event.preventDefault();
      if (event.target.value.trim()) settings.addEntry(box);
    });
  }
  for (const form of document.querySelectorAll("form.section-form")) {
    form.addEventListener("submit", settings.save);
    const provider = form.querySelector("select[name$='.provider']");
    if (!provider) continue;
    settings.follow(form);
    provider.addEventListener("change", () => {
      form.querySelector(".outcome").textContent = "";  // it spoke of the provider before
      settings.follow(form);
      settings.listModels(form);
    });
    settings.field(form, "base_url").addEventListener("change", () => settings.listModels(form));
    form.querySelector("button.list-models").addEventListener("click", () => settings.listModels(form));
    form.querySelector("select.served").addEventListener("change", settings.pickModel);
    settings.field(form, "context_window").addEventListener("input", () => settings.checkWindow(form));
    if (provider.value) settings.listModels(form);
  }
  for (const button of document.querySelectorAll("button.test-model")) {
    button.addEventListener("click", settings.test);
  }
});
