// Helpers every page uses: DOM building (text only, never HTML from data), API calls, the confirmation dialog,
// and the way results and the API server's errors are shown.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null || Number.isNaN(seconds)) return "";
  let s = Math.max(0, Math.round(seconds));
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (s >= size) { parts.push(Math.floor(s / size) + unit); s %= size; }
  }
  if (s || !parts.length) parts.push(s + "s");
  return parts.slice(0, 2).join("");
}

export function age(timestamp) {
  return timestamp ? duration((Date.now() - Date.parse(timestamp)) / 1000) : "";
}

export function number(value) {
  if (typeof value !== "number") return String(value ?? "");
  return Number.isInteger(value) ? String(value) : value.toPrecision(4).replace(/\.?0+$/, "");
}

export function phaseBadge(phase) {
  return el("span", { class: `phase phase-${phase}`, "data-testid": "phase" }, phase);
}

// A job whose workers ran on a simulated node (kwok): nothing trained, whatever its phase says (status.simulated).
export function simulatedBadge() {
  return el("span", { class: "simulated", "data-testid": "simulated", title: "its workers ran on a simulated (kwok) node: no code ran" }, "simulated");
}

export function progressBar(percent) {
  if (percent === null || percent === undefined) return el("span", { class: "muted" }, "—");
  const shown = Math.max(0, Math.min(100, percent));
  return el("span", {},
    el("span", { class: "bar" }, el("span", { style: `width:${shown}%` })),
    el("span", { class: "pct", "data-testid": "percent" }, `${Math.round(shown)}%`));
}

// The token `tj ui` printed, kept in this tab's sessionStorage and sent as a header. Never a cookie: cookies are
// not separated by port, so every other service on 127.0.0.1 (any local port's page, any local server) received
// one and could act as you; sessionStorage belongs to this origin (scheme, host and port) alone.
const TOKEN_KEY = "tj-ui-token";

// Move the token from the URL's fragment (`/#token=...`, which the browser never sends to any server) into this
// tab's storage, and out of the address bar and history.
export function takeToken() {
  const match = location.hash.match(/^#token=([^&/]+)/);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, "", `${location.pathname}${location.search}#/`);
}

// A tab without the token (a page opened in a new tab or window, a bookmark, a restarted browser: sessionStorage is
// per tab) gets 401 from every API call. Say so once, and how to get in: open the URL `tj ui` printed, or paste it
// (or its token) here; the page asked for opens once signed in. The token still goes only to this tab's storage.
export function showSignIn() {
  if (document.getElementById("sign-in")) return;
  const input = el("input", { type: "password", autocomplete: "off", "aria-label": "token", "data-testid": "token-input",
    placeholder: "the URL `tj ui` printed, or its token" });
  const form = el("form", { id: "sign-in", class: "alert warning", role: "alert", "data-testid": "sign-in" },
    el("p", {}, "This tab is not signed in to the UI. The token `tj ui` printed is kept in the tab that opened its URL ",
      "(never in a cookie, which every other service on this machine would receive), so a page opened in a new tab, ",
      "a bookmark or a restarted browser needs it again: open the URL `tj ui` printed (it ends in #token=…), or paste ",
      "it here."),
    input, el("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const pasted = input.value.trim();
    const token = pasted.includes("#token=") ? pasted.slice(pasted.indexOf("#token=") + 7).split(/[&/]/)[0] : pasted;
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(token));
    location.reload(); // the same page (its #/route), now with the token
  });
  document.body.prepend(form);
}

export function authHeaders(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : { ...extra };
}

// An EventSource over fetch: EventSource cannot send a header. The same addEventListener/onopen/onerror/close;
// a stream that ends or fails is opened again after a pause, as EventSource does.
const RETRY_MS = 2000;

export class EventStream {
  constructor(path) {
    this.listeners = new Map();
    this.onopen = null;
    this.onerror = null;
    this.closed = false;
    this.controller = new AbortController();
    this.run(path);
  }

  addEventListener(name, handler) {
    if (!this.listeners.has(name)) this.listeners.set(name, []);
    this.listeners.get(name).push(handler);
  }

  close() {
    this.closed = true;
    this.controller.abort();
  }

  async run(path) {
    while (!this.closed) {
      try {
        const response = await fetch(path, { headers: authHeaders({ Accept: "text/event-stream" }), signal: this.controller.signal });
        if (response.status === 401) {
          showSignIn(); // retrying cannot help until the tab has the token
          return;
        }
        if (response.ok) {
          this.onopen?.();
          await this.read(response.body);
        }
      } catch { /* a failed or aborted connection: retried below unless closed */ }
      if (this.closed) return;
      this.onerror?.();
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  async read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || this.closed) return;
      buffer += value; // the UI server ends lines with \n alone
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0 && !this.closed) {
        this.dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  dispatch(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    for (const handler of this.listeners.get(event) || []) handler({ data: data.join("\n") });
  }
}

// An API call of the UI server. Resolves to {ok, status, body}; `body` of a failure is the API server's own
// {status, reason, message} (or the UI server's {message} for input it could not send).
export async function api(method, path, body) {
  const options = { method, headers: authHeaders({ "X-TJ-UI": "1" }) };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    return { ok: false, status: 0, body: { message: `the UI server did not answer: ${error}` } };
  }
  if (response.status === 401) showSignIn();
  let payload = {};
  try { payload = await response.json(); } catch { payload = { message: response.statusText }; }
  return { ok: response.ok, status: response.status, body: payload };
}

export function errorText(body, status) {
  const head = [body.status ?? status, body.reason].filter(Boolean).join(" ");
  return head ? `${head}: ${body.message ?? ""}` : body.message ?? "";
}

// Show an action's outcome in `box`: the API server's message verbatim on failure.
export function showResult(box, result, success) {
  box.replaceChildren();
  if (result.ok) {
    box.append(el("div", { class: "alert ok", "data-testid": "action-ok" }, success));
  } else {
    box.append(el("div", { class: "alert error", role: "alert", "data-testid": "action-error" },
      errorText(result.body, result.status)));
  }
}

export function confirmAction(title, text, detail) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const pre = document.getElementById("confirm-detail");
  pre.textContent = detail || "";
  pre.hidden = !detail;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

// A job's queue (status.queue, as the list summary or the job carry it) and its place read from Kueue's visibility
// API (/api/queue-positions; not in status, see ui/queue.py): "team-a · #2 in gpus · queued 5m". Text only.
export function waitedSeconds(queue) {
  if (!queue) return null;
  const since = queue.queuedSince ? (Date.now() - Date.parse(queue.queuedSince)) / 1000 : 0;
  return (queue.queuedSeconds || 0) + Math.max(0, since || 0);
}

export function positionText(place) {
  if (!place) return "";
  if (place.positionInClusterQueue !== null && place.positionInClusterQueue !== undefined) {
    return `#${place.positionInClusterQueue} in ClusterQueue ${place.clusterQueue || "?"}, #${place.positionInLocalQueue} in LocalQueue ${place.localQueue}`;
  }
  if (place.beyond !== null && place.beyond !== undefined) return `beyond the first ${place.beyond}`;
  return place.unknown ? `position unknown: ${place.unknown}` : "";
}

export function queueCell(queue, place) {
  if (!queue) return "";
  if (queue.admitted) return el("span", { "data-testid": "queue" }, queue.name);
  const position = place && place.positionInClusterQueue !== null && place.positionInClusterQueue !== undefined
    ? `#${place.positionInClusterQueue}` : (place?.beyond ? `>${place.beyond}` : "?");
  return el("span", { "data-testid": "queue", title: positionText(place) },
    `${queue.name} · `, el("span", { "data-testid": "queue-position" }, position),
    ` · ${duration(waitedSeconds(queue))}`);
}

// Ask for the waiting jobs' places every POSITION_MS while `wanted()` says a waiting job is shown; `apply(rows)`
// gets the answer. Returns a function that stops it.
const POSITION_MS = 5000;

// A job that starts waiting (or a page that opens on one) is asked about at once, then every POSITION_MS.
export function followPositions(query, wanted, apply) {
  let stopped = false, last = 0;
  const tick = async () => {
    if (stopped) return;
    if (wanted() && Date.now() - last >= POSITION_MS) {
      last = Date.now();
      const result = await api("GET", `/api/queue-positions${query}`);
      if (!stopped && result.ok && Array.isArray(result.body)) apply(result.body);
    } else if (!wanted()) {
      last = 0;
    }
    if (!stopped) setTimeout(tick, 250);
  };
  tick();
  return () => { stopped = true; };
}
